"""``rollup``: the scheduled roll-up job, run by hand (:mod:`dreamer.commands.rollup`)."""

from __future__ import annotations

import argparse

from dreamer.cli.base import run_async
from dreamer.cli.registry import CommandGroup
from dreamer.config import Config

COMMANDS = CommandGroup()



def _rollup_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--profile",
        action="append",
        default=[],
        metavar="P",
        help="roll up this profile (repeatable; default: every enabled profile)",
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="do everything except writing upstream and committing; print the plan",
    )
    parser.add_argument(
        "--since",
        metavar="TS",
        help="read units created at or after this ISO 8601 time instead of the watermark (this run only)",
    )
    parser.add_argument("--json", action="store_true", help="print the reports as JSON")


@COMMANDS.subcommand(
    "rollup",
    help="run the roll-up now (the scheduled job, by hand)",
    description=(
        "Roll up what is new in each profile bank into its upstream bank, exactly as the daemon's "
        "hourly job does: gate on activity, take the slot lock around LLM calls, summarise into "
        "cards, deduplicate, promote append-only, commit the watermark. Prints each card with its "
        "verdict and why. Exit 0 when done, 75 when a run was deferred (retry later), 1 on failure."
    ),
    arguments=_rollup_arguments,
    examples=[
        "dreamer rollup --profile research --dry-run",
        "dreamer rollup --since 2026-11-01T00:00:00Z --profile homelab",
        "dreamer rollup --json | jq '.reports[] | {profile, outcome, promoted}'",
    ],
)
def _rollup(args: argparse.Namespace) -> int:
    from dreamer.commands.rollup import parse_since, rollup_command

    async def body(config: Config) -> int:
        since = parse_since(args.since) if args.since else None
        return await rollup_command(
            config, args.profile, dry_run=args.dry_run, since=since, as_json=args.json
        )

    return run_async(args, body)
