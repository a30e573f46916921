"""The roll-up subcommands: ``rollup`` runs the scheduled job by hand, ``status`` shows what ran and
what waits, ``demo`` runs a whole roll-up on a throwaway embedded store."""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from dreamer.cli.base import log_format, log_level, report_error, run_async
from dreamer.cli.registry import CommandGroup
from dreamer.config import Config
from dreamer.log import configure_logging

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
