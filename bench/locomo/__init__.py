"""LoCoMo conversations replayed through the real roll-up and three dedup baselines.

``python -m bench.locomo --data DIR``; see ``docs/benchmarks.md`` for what it measures.
"""
