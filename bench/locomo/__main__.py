"""``python -m bench.locomo``: the command of the LoCoMo roll-up benchmark."""

from __future__ import annotations

from bench.locomo.replay import main

if __name__ == "__main__":
    raise SystemExit(main())
