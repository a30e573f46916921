"""``python -m bench.gating``: the command of the gating and scale benchmarks."""

from __future__ import annotations

from bench.gating.gate import main

if __name__ == "__main__":
    raise SystemExit(main())
