"""``status``: what ran, what happened, what is next (:mod:`dreamer.commands.status`)."""

from __future__ import annotations

import argparse

from dreamer.cli.base import run_async
from dreamer.cli.registry import CommandGroup

COMMANDS = CommandGroup()


def _status_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print the status as JSON")


@COMMANDS.subcommand(
    "status",
    help="per profile: watermark, last run, pending units, deferrals",
    description=(
        "Show, per profile, the watermark, the last run's outcome and counts, the units waiting "
        "to be rolled up and consecutive deferrals, and the size of the promotion ledger. Reads the "
        "state file; safe while the daemon runs. (`systemctl status dreamer` shows the next run.)"
    ),
    arguments=_status_arguments,
    examples=["dreamer status", "dreamer status --json | jq '.profiles[] | {profile, units_pending}'"],
)
def _status(args: argparse.Namespace) -> int:
    from dreamer.commands.status import status_command

    return run_async(args, lambda config: status_command(config, as_json=args.json))
