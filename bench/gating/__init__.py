"""Gating cost over many profiles, and one run's cost as a bank grows.

``python -m bench.gating``; see ``docs/benchmarks.md`` for what it measures.
"""
