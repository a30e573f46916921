"""``state``: Dreamer's own state, moved between its backends (:mod:`dreamer.commands.state`) and
given vectors of a new model (:mod:`dreamer.commands.reembed`).

``dreamer state copy`` copies the SQLite state file into the PostgreSQL schema ``[state]`` names;
``dreamer state reembed`` embeds the ledger and the embedded store with the configured model now.
"""

from __future__ import annotations

import argparse
import textwrap
from pathlib import Path

from dreamer.cli.base import add_global_options, config_path, run_async, run_sync
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


_REEMBED = (
    "Embed every ledger card and every unit of the embedded store that has no vector of the "
    "configured model ([embeddings]), a batch at a time, each batch stored in its own transaction. "
    "After a model change a run embeds only reembed_batch cards and each recall a few units, so a "
    "large ledger would take many runs to catch up; this does it now. The local model embeds 60-90 "
    'card-sized texts a second on one or two cores, about 190 with runtime = "onnx" and '
    "OPENBLAS_NUM_THREADS=2 (a ledger of 1M cards and its store: about 3 hours that way). Stopping "
    "it keeps what it stored, and running it again goes on from there; the daemon may run meanwhile. "
    "Its next run writes the new model's vector segments. Exit 1 when the embedder fails."
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
    reembed = actions.add_parser(
        "reembed",
        help="embed the ledger and the embedded store with the configured model now",
        description=textwrap.fill(_REEMBED, width=100),
        epilog="examples:\n  dreamer state reembed\n  dreamer state reembed --batch 512 --json",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    reembed.add_argument("--json", action="store_true", help="print what was embedded as JSON")
    reembed.add_argument(
        "--batch",
        type=_batch_rows,
        default=256,
        metavar="N",
        help="texts per embedder call and per transaction (default: 256)",
    )
    add_global_options(reembed, top_level=False)


@COMMANDS.subcommand(
    "state",
    help="Dreamer's own state: copy a SQLite state file into PostgreSQL, embed it with a new model",
    description="Dreamer's own state. `dreamer state copy` moves a SQLite state file into PostgreSQL; "
    "`dreamer state reembed` embeds the ledger and the embedded store with the configured model.",
    arguments=_state_arguments,
    examples=[
        "dreamer state copy",
        "dreamer state copy --from old/state.sqlite3 --json",
        "dreamer state reembed",
    ],
)
def _state(args: argparse.Namespace) -> int:
    if args.state_action == "reembed":
        from dreamer.commands.reembed import reembed_command

        return run_async(
            args,
            lambda config: reembed_command(config, config_path(args), batch=args.batch, as_json=args.json),
        )
    from dreamer.commands.state import copy_command

    return run_sync(
        args,
        lambda config: copy_command(
            config, config_path(args), source=args.source, as_json=args.json, batch_rows=args.batch_rows
        ),
    )
