"""The read-side subcommands over the named banks: ``banks``, ``recall``, ``reflect``, ``retain``
(:mod:`dreamer.commands.banks`), and what an agent is given from the configuration alone:
``tool-schemas`` and ``prelude``."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable

from dreamer.cli.base import run_async, run_sync
from dreamer.cli.registry import CommandGroup
from dreamer.config import Config

COMMANDS = CommandGroup()


def _profile_option(parser: argparse.ArgumentParser, help: str) -> None:
    parser.add_argument("--profile", metavar="P", help=help)


def _banks_arguments(parser: argparse.ArgumentParser) -> None:
    _profile_option(parser, "show what this profile may read and write")
    parser.add_argument("--json", action="store_true", help="print the banks as JSON")


@COMMANDS.subcommand(
    "banks",
    help="the named banks: aliases, bank ids, access, roles and activity",
    description=(
        "List every configured bank alias with its bank id, access policy, role (global roll-up, "
        "shared, a profile's own bank), whether it may be read or written (for --profile P), and "
        "its activity: units stored and the last write."
    ),
    arguments=_banks_arguments,
    examples=["dreamer banks", "dreamer banks --profile research --json | jq '.banks[] | {alias, writable}'"],
)
def _banks(args: argparse.Namespace) -> int:
    from dreamer.commands.banks import banks_command

    return run_async(args, lambda config: banks_command(config, args.profile, as_json=args.json))


def _recall_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("query", help="what to look for")
    parser.add_argument(
        "--bank", action="append", default=[], metavar="A", help="read this bank alias (repeatable)"
    )
    _profile_option(parser, "read as this profile: without --bank, its read-union (own, global, shared)")
    parser.add_argument(
        "--budget", choices=["low", "mid", "high"], help="recall effort (default: the bank's)"
    )
    parser.add_argument("--limit", type=int, metavar="N", help="at most N results")
    parser.add_argument("--json", action="store_true", help="print results as JSON, each with its bank")


@COMMANDS.subcommand(
    "recall",
    help="search one or more banks; every result labelled with its bank",
    description=(
        "Recall QUERY from the named banks (--bank, repeatable), or from a profile's read-union "
        "{own bank, global roll-up, shared}, or from the default bank. Results from several banks "
        "are merged and ranked; the same memory found in two banks is shown once with both labels. "
        "A card a newer one superseded (a recency_wins conflict) is marked '(superseded) ... — "
        "superseded by: <newer text>' and ranked below it, from the cards' own metadata and the "
        "state file's ledger. "
        "A bank that cannot be read is reported as missing and the rest is still shown (exit 75)."
    ),
    arguments=_recall_arguments,
    examples=[
        "dreamer recall 'deploy constraints' --bank ops --bank code",
        "dreamer recall 'test commands' --profile coder",
        "dreamer recall nginx --profile homelab --json | jq '.results[] | {banks, text}'",
    ],
)
def _recall(args: argparse.Namespace) -> int:
    from dreamer.commands.banks import recall_command

    return run_async(
        args,
        lambda config: recall_command(
            config,
            args.query,
            banks=args.bank,
            profile=args.profile,
            budget=args.budget,
            limit=args.limit,
            as_json=args.json,
        ),
    )


def _reflect_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("query", help="the question")
    parser.add_argument(
        "--bank", action="append", default=[], metavar="A", help="ask this bank alias (repeatable)"
    )
    _profile_option(parser, "ask as this profile (its policy applies)")
    parser.add_argument("--budget", choices=["low", "mid", "high"], help="reflect effort (default: low)")
    parser.add_argument("--json", action="store_true", help="print the answers as JSON")


@COMMANDS.subcommand(
    "reflect",
    help="ask one or more banks a question; one labelled answer per bank",
    description=(
        "Run one reflect per bank (LLM-backed on Hindsight, extractive on the embedded store) and "
        "print each answer under its bank's alias."
    ),
    arguments=_reflect_arguments,
    examples=["dreamer reflect 'What do we know about deploying this service?' --bank code --bank ops"],
)
def _reflect(args: argparse.Namespace) -> int:
    from dreamer.commands.banks import reflect_command

    return run_async(
        args,
        lambda config: reflect_command(
            config, args.query, banks=args.bank, profile=args.profile, budget=args.budget, as_json=args.json
        ),
    )


def _retain_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("text", help="the memory to store")
    parser.add_argument("--bank", required=True, metavar="A", help="a writable bank alias")
    _profile_option(parser, "write as this profile (its policy applies)")
    parser.add_argument("--context", metavar="C", help="where the memory comes from")
    parser.add_argument("--tag", action="append", default=[], metavar="T", help="a tag (repeatable)")
    parser.add_argument(
        "--scope",
        metavar="S",
        help="the memory holds only within S (a host, environment or project): tagged scope:S; "
        "letters, digits, '.', '_', '-', at most 64",
    )
    parser.add_argument("--json", action="store_true", help="print the result as JSON")


@COMMANDS.subcommand(
    "retain",
    help="store a memory in a writable bank",
    description=(
        "Store TEXT in the bank --bank names. Refused, before anything is sent, for read-only "
        "banks, disabled or unknown aliases, and the global roll-up bank (cards arrive there only "
        "through the roll-up). With --scope S the memory is tagged scope:S; the roll-up carries the "
        "tag up to its card, and a conflict of a scoped card is kept beside the other, not superseding it."
    ),
    arguments=_retain_arguments,
    examples=[
        "dreamer retain 'This repository uses pnpm.' --bank coder --context 'repo convention'",
        "dreamer retain 'Nextcloud runs version 29.0 on host atlas.' --bank homelab --scope staging",
    ],
)
def _retain(args: argparse.Namespace) -> int:
    from dreamer.commands.banks import retain_command

    return run_async(
        args,
        lambda config: retain_command(
            config,
            args.text,
            bank=args.bank,
            profile=args.profile,
            context=args.context,
            tags=args.tag,
            as_json=args.json,
            scope=args.scope,
        ),
    )


def _tool_schemas_arguments(parser: argparse.ArgumentParser) -> None:
    _profile_option(parser, "the profile whose policy decides the bank enums")
    parser.add_argument("--strict", action="store_true", help="OpenAI strict mode (all fields required)")


@COMMANDS.subcommand(
    "tool-schemas",
    help="JSON tool definitions (memory_recall/retain/reflect) for an agent framework",
    description=(
        "Print OpenAI-style function tools whose `bank` parameter is an enum of the aliases the "
        "profile may use for each operation, with each alias's description, so a model can pick "
        "the right domain and cannot invent a bank."
    ),
    arguments=_tool_schemas_arguments,
    examples=["dreamer tool-schemas --profile research > tools.json"],
)
def _tool_schemas(args: argparse.Namespace) -> int:
    from dreamer.readside.tools import tool_schemas

    return _print_rendered(
        args, lambda config: json.dumps(tool_schemas(config, args.profile, args.strict), indent=2)
    )


def _prelude_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--profile", metavar="P", required=True, help="the profile")


@COMMANDS.subcommand(
    "prelude",
    help="a short system-prompt text explaining a profile's memory tiers",
    description=(
        "Print a stable text for the profile's system prompt: its own bank, the global roll-up and "
        "shared, what belongs where, and which aliases it may read and write. Generated from the "
        "configuration, so it never goes stale."
    ),
    arguments=_prelude_arguments,
    examples=["dreamer prelude --profile research >> SOUL.md"],
)
def _prelude(args: argparse.Namespace) -> int:
    from dreamer.readside.prelude import prelude

    return _print_rendered(args, lambda config: prelude(config, args.profile).rstrip("\n"))


def _print_rendered(args: argparse.Namespace, render: Callable[[Config], str]) -> int:
    """Print the text ``render`` makes from the configuration alone (no backend, no state)."""

    def body(config: Config) -> int:
        print(render(config))
        return 0

    return run_sync(args, body)
