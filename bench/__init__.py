"""Benchmarks of Dreamer: roll-up quality and cost on real conversation memory, gating, daemon footprint.

Each benchmark is one command that prints an aligned plain-text table (or JSON with ``--json``) and
runs its baselines side by side on the same input in the same run; ``--quick`` is the CI size.
See ``docs/benchmarks.md`` for the commands, the numbers of a full run and what they mean.

- ``python -m bench.locomo --data DIR``: LoCoMo conversations replayed session by session through
  the real roll-up pipeline, against three dedup baselines;
- ``python -m bench.gating``: backend requests and time of the activity gate for 10 to 1000
  profiles, and the cost of one run as a bank grows from 1k to 100k units;
- ``python -m bench.daemon``: ``dreamer run`` under a real notify socket: time to READY, RSS, idle
  CPU, reload latency and drain time.
"""

from __future__ import annotations
