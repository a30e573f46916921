"""``card``: the bounded peer card of each profile and of the global bank
(:mod:`dreamer.commands.card`)."""

from __future__ import annotations

import argparse

from dreamer.cli.base import run_async
from dreamer.cli.registry import CommandGroup

COMMANDS = CommandGroup()


def _card_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--profile", action="append", default=[], metavar="P", help="this profile's card (repeatable)"
    )
    parser.add_argument(
        "--write", action="store_true", help="also write the cards to their configured paths (atomic)"
    )
    parser.add_argument("--json", action="store_true", help="print the cards as JSON")


@COMMANDS.subcommand(
    "card",
    help="the bounded peer card of each profile and of the global bank",
    description=(
        "Synthesise each profile's peer card (and, without --profile, the global one) from the "
        "promoted cards in the local ledger: stable, most-reinforced facts first, at most 40 "
        "entries of at most 200 characters within the character budget, rendered like a Hermes "
        "memory block. --write writes them to profiles.<P>.peer_card_path / peer_card.global_path; "
        "with peer_card.polish and a backend whose reflect uses an LLM (Hindsight), each written card "
        "is then rewritten by one reflect under the slot lock, and the card as built stays if that fails."
    ),
    arguments=_card_arguments,
    examples=["dreamer card --profile research", "dreamer card --write"],
)
def _card(args: argparse.Namespace) -> int:
    from dreamer.commands.card import card_command

    return run_async(
        args, lambda config: card_command(config, args.profile, write=args.write, as_json=args.json)
    )
