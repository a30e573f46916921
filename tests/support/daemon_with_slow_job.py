"""The real daemon with a job body that a test controls.

``python -m tests.support.daemon_with_slow_job --config FILE --flags DIR [--mode block|fail]``

Everything is the real ``dreamer run`` (:func:`dreamer.service.start.run_daemon`: configuration, scheduler,
signal handlers, sd_notify, watchdog, drain, run records, logging); only the job body is
substituted:

- ``block``: each run creates ``DIR/started-<profile>-<run_id>``, then waits until the file
  ``DIR/release`` exists, and returns outcome ``released``;
- ``fail``: each run raises ``RuntimeError("job body failed on purpose")``.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from dreamer.config import Config
from dreamer.jobs.spec import JobOutcome, JobRunner, JobSpec
from dreamer.service.start import run_daemon

RELEASE = "release"


def blocking_runner(flags: Path) -> JobRunner:
    async def run(config: Config, job: JobSpec, run_id: str) -> JobOutcome:
        (flags / f"started-{job.key}-{run_id}").touch()
        while not (flags / RELEASE).exists():
            await asyncio.sleep(0.05)
        return JobOutcome("released", "the test released the job", {"waited": 1})

    return run


async def failing_runner(config: Config, job: JobSpec, run_id: str) -> JobOutcome:
    raise RuntimeError("job body failed on purpose")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="daemon_with_slow_job")
    parser.add_argument("--config", type=Path, required=True)
    parser.add_argument("--flags", type=Path, required=True)
    parser.add_argument("--mode", choices=("block", "fail"), default="block")
    args = parser.parse_args(argv)
    runner = blocking_runner(args.flags) if args.mode == "block" else failing_runner
    return run_daemon(args.config, runner=runner, log_format="json")


if __name__ == "__main__":
    sys.exit(main())
