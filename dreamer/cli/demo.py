"""``demo``: a whole roll-up on a throwaway embedded store (:mod:`dreamer.commands.demo`)."""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from dreamer.cli.base import log_format, log_level, report_error
from dreamer.cli.registry import CommandGroup
from dreamer.log import configure_logging

COMMANDS = CommandGroup()


def _demo_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--dir",
        type=Path,
        metavar="D",
        help="directory for the demo's store and state (default: a new temporary directory)",
    )


@COMMANDS.subcommand(
    "demo",
    help="a complete roll-up on the embedded store, in a fresh directory",
    description=(
        "Create an embedded store in a fresh directory, fill three profile banks with a small "
        "sample of memories (paraphrases, a changed version number, an idle profile), run two "
        "roll-up cycles for every profile, and print what was promoted, reinforced and skipped, "
        "and why. Needs no configuration file and no server; it leaves D/config.toml (never over an "
        "existing one) and ends with three commands to try on the state it made."
    ),
    arguments=_demo_arguments,
    examples=["dreamer demo", "dreamer demo --dir /tmp/dreamer-demo --log-level info"],
)
def _demo(args: argparse.Namespace) -> int:
    from dreamer.commands.demo import run_demo
    from dreamer.errors import DreamerError

    configure_logging(log_format=log_format(args), level=log_level(args) or "warning", stream=sys.stderr)
    try:
        asyncio.run(run_demo(args.dir))
    except DreamerError as exc:
        return report_error(args, exc)
    return 0
