"""``state``: Dreamer's own state, moved between its backends (:mod:`dreamer.commands.state`).

``dreamer state copy`` copies the SQLite state file into the PostgreSQL schema ``[state]`` names.
"""

from __future__ import annotations

import argparse
import textwrap
from pathlib import Path

from dreamer.cli.base import add_global_options, config_path, run_sync
from dreamer.cli.registry import CommandGroup

COMMANDS = CommandGroup()

_COPY = (
    "Copy the SQLite state file (default: <state_dir>/state.sqlite3) into the PostgreSQL schema "
    'that [state] names (backend = "postgres"): watermarks, cards, their words, profiles, ranks and '
    "vectors, decisions and run records; not leases nor hosts. The file is opened read-only and "
    "never changed. Batches go in one transaction each under the schema's write lock. Running it "
    "again inserts nothing new, and a copy that was stopped halfway finishes. A schema holding cards, "
    "runs or decisions the file does not have is refused. At the end the rows of every table and a "
    "checksum of the ledger and of the watermarks are compared; exit 1 when they differ. Stop the "
    "daemons first, and start them on PostgreSQL once it says ok."
)


def _batch_rows(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number of rows, at least 1, got {text!r}")
    return value


def _state_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="state_action", metavar="ACTION", title="actions", required=True)
    copy = actions.add_parser(
        "copy",
        help="copy the SQLite state file into the PostgreSQL state [state] names",
        description=textwrap.fill(_COPY, width=100),
        epilog=(
            "examples:\n"
            "  dreamer state copy\n"
            "  dreamer state copy --from /var/lib/dreamer/state.sqlite3 --json"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    copy.add_argument(
        "--from",
        dest="source",
        type=Path,
        metavar="PATH",
        help="the SQLite state file to copy (default: <state_dir>/state.sqlite3)",
    )
    copy.add_argument("--json", action="store_true", help="print the comparison as JSON")
    copy.add_argument(
        "--batch-rows",
        type=_batch_rows,
        default=5_000,
        metavar="N",
        help="rows per PostgreSQL transaction (default: 5000)",
    )
    add_global_options(copy, top_level=False)


@COMMANDS.subcommand(
    "state",
    help="Dreamer's own state: copy a SQLite state file into PostgreSQL",
    description="Dreamer's own state. `dreamer state copy` moves a SQLite state file into PostgreSQL.",
    arguments=_state_arguments,
    examples=["dreamer state copy", "dreamer state copy --from old/state.sqlite3 --json"],
)
def _state(args: argparse.Namespace) -> int:
    from dreamer.commands.state import copy_command

    return run_sync(
        args,
        lambda config: copy_command(
            config, config_path(args), source=args.source, as_json=args.json, batch_rows=args.batch_rows
        ),
    )
