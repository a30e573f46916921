"""``explain``: why a unit, a card or a text ended where it did (:mod:`dreamer.commands.explain`)."""

from __future__ import annotations

import argparse

from dreamer.cli.base import run_async
from dreamer.cli.registry import CommandGroup

COMMANDS = CommandGroup()


def _explain_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "unit_id", nargs="?", metavar="UNIT_ID", help="a memory unit's id (as recall shows it)"
    )
    parser.add_argument("--card", metavar="DOC_ID", help="a card's document id (rollup:<profile>:<hash>)")
    parser.add_argument("--text", metavar="TEXT", help="what the dedup would decide for a card saying TEXT")
    parser.add_argument(
        "--profile",
        metavar="P",
        help="with UNIT_ID: look for it pending in this profile only; with --text: judge "
        "against this profile's upstream bank (needed when several profiles are enabled)",
    )
    parser.add_argument("--json", action="store_true", help="print the trail as JSON")


@COMMANDS.subcommand(
    "explain",
    help="why a unit or card ended where it did: each decision with its rule, score and run",
    description=(
        "Show the decision trail the roll-ups recorded. For a UNIT_ID: each run's decision about it "
        "(promoted into which card; merged into which existing card as a duplicate, by which rule "
        "and with which scores; dropped as chatter and why; left out because no card cited it), "
        "the card it lives in and what became of that card, or that it is pending after a "
        "profile's watermark. For --card: the card, the units it was made of, the units merged "
        "into it since, and what it supersedes or is superseded by. For --text: the verdict the "
        "dedup would give a card saying TEXT now. Reads the state file only; exit 1 when there "
        "is nothing to explain."
    ),
    arguments=_explain_arguments,
    examples=[
        "dreamer explain 3f1c2a",
        "dreamer explain --card rollup:research:0a1b2c3d4e5f60718293a4b5c6d7e8f9",
        "dreamer explain --text 'Nextcloud runs 28.0' --profile homelab --json",
    ],
)
def _explain(args: argparse.Namespace) -> int:
    from dreamer.commands.explain import explain_command

    return run_async(
        args,
        lambda config: explain_command(
            config,
            unit_id=args.unit_id,
            card_id=args.card,
            text=args.text,
            profile=args.profile,
            as_json=args.json,
        ),
    )
