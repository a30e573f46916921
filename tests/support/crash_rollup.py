"""Run one real roll-up and SIGKILL this process at a named step boundary.

``python -m tests.support.crash_rollup CONFIG PROFILE STEP`` — the pipeline, backend and state are
the real ones; only the step hook is the test's, and it kills the process the hard way.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

from dreamer.backends import open_backend
from dreamer.config import load_config
from dreamer.rollup.pipeline import Rollup
from dreamer.state import StateStore


async def main(config_path: str, profile: str, crash_at: str) -> int:
    config = load_config(Path(config_path))

    def on_step(step: str, _profile: str) -> None:
        if step == crash_at:
            os.kill(os.getpid(), signal.SIGKILL)

    backend = open_backend(config)
    try:
        with StateStore.open(config.state_path) as state:
            report = await Rollup(config, backend, state, on_step=on_step).run(profile)
            print(report.outcome)
    finally:
        await backend.aclose()
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(*sys.argv[1:4])))
