"""The ``dreamer`` command: one entry point, one subcommand per task.

Adding a subcommand takes one function and one decorator::

    def _status_arguments(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--json", action="store_true", help="machine-readable output")

    @subcommand(
        "status",
        help="what ran, what happened, what is next",
        arguments=_status_arguments,
        examples=["dreamer status", "dreamer status --json | jq .profiles"],
    )
    def _status(args: argparse.Namespace) -> int:
        from dreamer.status import show_status  # heavy imports stay inside the command

        return show_status(_config_path(args), as_json=args.json)

The function gets the parsed arguments (``args.config``, ``args.log_format``, ``args.log_level``
are always there) and returns the exit status. Logging is already set up (to stderr, so stdout is
the command's output); ``_load_config(args)`` loads ``--config`` and adds its level and secrets to
the log setup; a :class:`~dreamer.errors.ConfigError` is reported with ``_print_problems``.
Keep the body a few lines that call into the module doing the work; import that module inside
the function so ``dreamer --help`` stays fast.
Subcommands appear in ``--help`` in the order they are registered.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import textwrap
from collections.abc import Callable, Coroutine, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dreamer import __version__
from dreamer.config import Config, default_config_path, load_config
from dreamer.errors import ConfigError, DreamerError, ExitCode, UnknownAgentError
from dreamer.log import LOG_FORMATS, LOG_LEVELS, LogFormat, LogLevel, configure_logging

Handler = Callable[[argparse.Namespace], int]
ArgumentAdder = Callable[[argparse.ArgumentParser], None]


@dataclass(frozen=True, slots=True)
class Subcommand:
    name: str
    help: str
    description: str
    handler: Handler
    arguments: ArgumentAdder | None = None
    examples: tuple[str, ...] = ()


SUBCOMMANDS: dict[str, Subcommand] = {}


def subcommand(
    name: str,
    *,
    help: str,
    description: str = "",
    arguments: ArgumentAdder | None = None,
    examples: Sequence[str] = (),
) -> Callable[[Handler], Handler]:
    """Register ``handler`` as ``dreamer NAME``. ``description`` defaults to ``help``."""

    def register(handler: Handler) -> Handler:
        if name in SUBCOMMANDS:
            raise ValueError(f"subcommand {name!r} is registered twice")
        SUBCOMMANDS[name] = Subcommand(
            name=name,
            help=help,
            description=description or help,
            handler=handler,
            arguments=arguments,
            examples=tuple(examples),
        )
        return handler

    return register


# --- shared helpers for subcommands ----------------------------------------------------------------


def _config_path(args: argparse.Namespace) -> Path:
    path: Path = args.config
    return path


def _log_format(args: argparse.Namespace) -> LogFormat:
    fmt: LogFormat = args.log_format
    return fmt


def _log_level(args: argparse.Namespace) -> LogLevel | None:
    level: LogLevel | None = args.log_level
    return level


def _load_config(args: argparse.Namespace) -> Config:
    """Load ``--config`` and set up logging with its secrets; raises :class:`ConfigError`.

    Commands print their own report on stdout, so they log only warnings and errors to stderr
    unless ``--log-level`` asks for more (``log.level`` is the daemon's level).
    """
    config = load_config(_config_path(args))
    key = config.backend.hindsight.api_key
    configure_logging(
        log_format=_log_format(args),
        level=_log_level(args) or "warning",
        secrets=[key.get_secret_value()] if key is not None else [],
        stream=sys.stderr,
    )
    return config


def _print_problems(exc: ConfigError) -> int:
    for problem in exc.problems:
        print(problem, file=sys.stderr)
    return ExitCode.CONFIG


def flatten(data: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """``{"a": {"b": 1}}`` -> ``("a.b", 1)``; empty tables are kept as ``{}``."""
    if isinstance(data, dict) and data:
        for key, value in data.items():
            yield from flatten(value, f"{prefix}.{key}" if prefix else str(key))
    else:
        yield prefix, data


# --- check-config ------------------------------------------------------------------------------------


def _check_config_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print the configuration as one JSON document")


@subcommand(
    "check-config",
    help="validate the configuration and print it normalised, secrets redacted",
    description=(
        "Read and validate the configuration file. On success print every setting, with defaults "
        "filled in, paths resolved and secrets redacted, and exit 0. On failure print one line per "
        f"problem (file: key: what is wrong) to stderr and exit {ExitCode.CONFIG:d}."
    ),
    arguments=_check_config_arguments,
    examples=[
        "dreamer check-config --config /etc/dreamer/config.toml",
        "dreamer check-config --json | jq .profiles",
    ],
)
def _check_config(args: argparse.Namespace) -> int:
    try:
        config = _load_config(args)
    except ConfigError as exc:
        return _print_problems(exc)
    data = config.redacted()
    if args.json:
        print(json.dumps(data, indent=2))
    else:
        for key, value in flatten(data):
            print(f"{key} = {json.dumps(value)}")
    return 0


# --- run -------------------------------------------------------------------------------------------


@subcommand(
    "run",
    help="run the scheduling daemon (what systemd starts)",
    description=(
        "Run the daemon in the foreground: one scheduled job per enabled profile. It talks to "
        "systemd (READY, STATUS, WATCHDOG), reloads its configuration on SIGHUP (keeping the old one "
        "if the new file is invalid), and on SIGTERM lets running jobs finish before it exits. "
        f"An invalid configuration at start exits {ExitCode.CONFIG:d}."
    ),
    examples=[
        "dreamer run --config ./config.toml --log-format console",
        "kill -HUP $(pidof -s dreamer)    # reload the configuration",
    ],
)
def _run(args: argparse.Namespace) -> int:
    from dreamer.service.daemon import run_daemon

    return run_daemon(_config_path(args), log_format=_log_format(args), log_level=_log_level(args))


# --- rollup / status / demo --------------------------------------------------------------------------


def _command(args: argparse.Namespace, body: Callable[[Config], Coroutine[Any, Any, int]]) -> int:
    """Load the config and run an async command body. An error Dreamer reports is one line on
    stderr and its exit code (:func:`dreamer.outcomes.classify`): 2 bad usage or a refused bank,
    75 try again later, 1 failed, 78 bad configuration."""
    try:
        config = _load_config(args)
    except ConfigError as exc:
        return _print_problems(exc)
    try:
        return asyncio.run(body(config))
    except ConfigError as exc:
        return _print_problems(exc)
    except DreamerError as exc:
        return _report_error(args, exc)


def _report_error(args: argparse.Namespace, exc: DreamerError) -> int:
    from dreamer.outcomes import classify, describe

    option = "--agent: " if isinstance(exc, UnknownAgentError) else ""
    print(f"dreamer {args.command}: {option}{describe(exc)}", file=sys.stderr)
    _outcome, code = classify(exc) or (None, ExitCode.FAILED)
    return int(code)


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


@subcommand(
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

    return _command(args, body)


def _status_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print the status as JSON")


@subcommand(
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

    return _command(args, lambda config: status_command(config, as_json=args.json))


def _demo_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--dir",
        type=Path,
        metavar="D",
        help="directory for the demo's store and state (default: a new temporary directory)",
    )


@subcommand(
    "demo",
    help="a complete roll-up on the embedded store, in a fresh directory",
    description=(
        "Create an embedded store in a fresh directory, fill three profile banks with a small "
        "sample of memories (paraphrases, a changed version number, an idle profile), run two "
        "roll-up cycles for every profile, and print what was promoted, reinforced and skipped, "
        "and why. Needs no configuration file and no server."
    ),
    arguments=_demo_arguments,
    examples=["dreamer demo", "dreamer demo --dir /tmp/dreamer-demo --log-level info"],
)
def _demo(args: argparse.Namespace) -> int:
    from dreamer.commands.demo import run_demo

    configure_logging(log_format=_log_format(args), level=_log_level(args) or "warning", stream=sys.stderr)
    asyncio.run(run_demo(args.dir))
    return 0


# --- the read side: banks / recall / reflect / retain / tool-schemas / prelude / card -----------------


def _profile_option(parser: argparse.ArgumentParser, help: str) -> None:
    parser.add_argument("--profile", metavar="P", help=help)


def _banks_arguments(parser: argparse.ArgumentParser) -> None:
    _profile_option(parser, "show what this profile may read and write")
    parser.add_argument("--json", action="store_true", help="print the banks as JSON")


@subcommand(
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

    return _command(args, lambda config: banks_command(config, args.profile, as_json=args.json))


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


@subcommand(
    "recall",
    help="search one or more banks; every result labelled with its bank",
    description=(
        "Recall QUERY from the named banks (--bank, repeatable), or from a profile's read-union "
        "{own bank, global roll-up, shared}, or from the default bank. Results from several banks "
        "are merged and ranked; the same memory found in two banks is shown once with both labels. "
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

    return _command(
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


@subcommand(
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

    return _command(
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
    parser.add_argument("--json", action="store_true", help="print the result as JSON")


@subcommand(
    "retain",
    help="store a memory in a writable bank",
    description=(
        "Store TEXT in the bank --bank names. Refused, before anything is sent, for read-only "
        "banks, disabled or unknown aliases, and the global roll-up bank (cards arrive there only "
        "through the roll-up)."
    ),
    arguments=_retain_arguments,
    examples=["dreamer retain 'This repository uses pnpm.' --bank coder --context 'repo convention'"],
)
def _retain(args: argparse.Namespace) -> int:
    from dreamer.commands.banks import retain_command

    return _command(
        args,
        lambda config: retain_command(
            config,
            args.text,
            bank=args.bank,
            profile=args.profile,
            context=args.context,
            tags=args.tag,
            as_json=args.json,
        ),
    )


def _tool_schemas_arguments(parser: argparse.ArgumentParser) -> None:
    _profile_option(parser, "the profile whose policy decides the bank enums")
    parser.add_argument("--strict", action="store_true", help="OpenAI strict mode (all fields required)")


@subcommand(
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

    return _policy_sync(
        args, lambda config: json.dumps(tool_schemas(config, args.profile, args.strict), indent=2)
    )


def _prelude_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--profile", metavar="P", required=True, help="the profile")


@subcommand(
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

    return _policy_sync(args, lambda config: prelude(config, args.profile).rstrip("\n"))


def _card_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--profile", action="append", default=[], metavar="P", help="this profile's card (repeatable)"
    )
    parser.add_argument(
        "--write", action="store_true", help="also write the cards to their configured paths (atomic)"
    )
    parser.add_argument("--json", action="store_true", help="print the cards as JSON")


@subcommand(
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

    return _command(
        args, lambda config: card_command(config, args.profile, write=args.write, as_json=args.json)
    )


def _policy_sync(args: argparse.Namespace, render: Callable[[Config], str]) -> int:
    try:
        config = _load_config(args)
    except ConfigError as exc:
        return _print_problems(exc)
    try:
        print(render(config))
    except DreamerError as exc:
        return _report_error(args, exc)
    return 0


# --- agents' memory files: audit / memory -------------------------------------------------------------


def _audit_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--agent",
        action="append",
        default=[],
        metavar="A",
        help="audit this agent (repeatable; default: all)",
    )
    parser.add_argument("--dry-run", action="store_true", help="change nothing; print the planned actions")
    parser.add_argument("--force", action="store_true", help="audit now even if no audit is due")
    parser.add_argument("--json", action="store_true", help="print the reports as JSON")


@subcommand(
    "audit",
    help="audit agents' MEMORY.md / USER.md (canaries, stale entries, moves, duplicates)",
    description=(
        "Run the memory audit of each configured agent when it is due (every audit.interval_days, "
        "or at once above audit.threshold_pct of a file's limit), or now with --force. Each agent "
        "is audited in isolation; changes are patch-level edits through the store and only when "
        "Dreamer is a registered writer in the agent's MEMORY_WRITERS.md; every audit appends to "
        "the agent's MEMORY_AUDIT_LEDGER.md. Exit 1 when an agent is CRITICAL (missing canary) or "
        "its files cannot be read."
    ),
    arguments=_audit_arguments,
    examples=["dreamer audit --agent mumuni --dry-run --force", "dreamer audit --json | jq '.agents'"],
)
def _audit(args: argparse.Namespace) -> int:
    from dreamer.commands.audit import audit_command

    return _command(
        args,
        lambda config: audit_command(
            config, args.agent, dry_run=args.dry_run, force=args.force, as_json=args.json
        ),
    )


def _memory_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=["list", "stats", "add", "replace", "remove", "render"])
    parser.add_argument("text", nargs="?", help="the entry's text (add, replace)")
    parser.add_argument("--agent", required=True, metavar="NAME", help="an agent under [agents]")
    parser.add_argument("--target", choices=["memory", "user"], default="memory", help="MEMORY.md or USER.md")
    parser.add_argument("--old", metavar="TEXT", help="a unique piece of the entry to replace or remove")


@subcommand(
    "memory",
    help="read or edit an agent's MEMORY.md / USER.md with Hermes' store semantics",
    description=(
        "Entries are separated by a line holding only §; MEMORY.md holds at most 2,200 characters "
        "and USER.md 1,375. add refuses exact duplicates and, over the limit, prints the current "
        "entries; replace and remove find the entry by a unique piece of its text. Writes take the "
        "sidecar .lock file and replace the file atomically."
    ),
    arguments=_memory_arguments,
    examples=[
        "dreamer memory stats --agent mumuni --target user",
        "dreamer memory add 'Deploys go through the staging host first.' --agent mumuni",
        "dreamer memory replace 'Prefers metric units.' --old 'imperial' --agent mumuni --target user",
        "dreamer memory render --agent mumuni",
    ],
)
def _memory(args: argparse.Namespace) -> int:
    from dreamer.commands.audit import memory_command

    try:
        config = _load_config(args)
    except ConfigError as exc:
        return _print_problems(exc)
    try:
        return memory_command(config, args.action, args.agent, args.target, text=args.text, old=args.old)
    except DreamerError as exc:
        return _report_error(args, exc)


# --- the parser ------------------------------------------------------------------------------------

_DESCRIPTION = """\
Dreamer consolidates agent memory: on a schedule it rolls up what is new in each profile's memory
bank into one global bank, as deduplicated summary cards with provenance, append-only.
"""

_EPILOG_HEAD = """\
examples:
  dreamer check-config                 validate the configuration file
  dreamer demo                         see a roll-up on a throwaway embedded store
  dreamer run --log-format console     run the daemon in the foreground, readable logs
  dreamer rollup --dry-run             what the next roll-up would promote, and why
  dreamer status                       watermarks, last runs, pending units
  dreamer COMMAND --help               options and examples of one command

configuration: --config, else $DREAMER_CONFIG, else $CONFIGURATION_DIRECTORY/config.toml,
else /etc/dreamer/config.toml. Exit status 78 means the configuration is wrong.
"""


_HELP_WIDTH = 100


def _add_global_options(parser: argparse.ArgumentParser, *, top_level: bool) -> None:
    # On subcommand parsers the defaults are suppressed, so an option given before the subcommand
    # is not overwritten by the subparser's default: `dreamer --config F run` == `dreamer run --config F`.
    def default(value: Any) -> Any:
        return value if top_level else argparse.SUPPRESS

    group = parser.add_argument_group("global options")
    group.add_argument(
        "--config",
        type=Path,
        metavar="FILE",
        default=default(default_config_path()),
        help=f"configuration file (default: {default_config_path()})",
    )
    group.add_argument(
        "--log-format",
        choices=LOG_FORMATS,
        default=default("auto"),
        help="auto: JSON lines under systemd or in a pipe, readable on a terminal (default: auto)",
    )
    group.add_argument(
        "--log-level",
        choices=LOG_LEVELS,
        default=default(None),
        help="log level (default: warning for commands; log.level from the configuration for run)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dreamer",
        description=_DESCRIPTION,
        epilog=_EPILOG_HEAD,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"dreamer {__version__}")
    _add_global_options(parser, top_level=True)
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", title="commands")
    for command in SUBCOMMANDS.values():
        epilog = None
        if command.examples:
            epilog = "examples:\n" + "\n".join(f"  {line}" for line in command.examples)
        sub = subparsers.add_parser(
            command.name,
            help=command.help,
            description=textwrap.fill(command.description, width=_HELP_WIDTH),
            epilog=epilog,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        if command.arguments is not None:
            command.arguments(sub)
        _add_global_options(sub, top_level=False)
        sub.set_defaults(handler=command.handler)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``dreamer`` console script and ``python -m dreamer``."""
    parser = build_parser()
    args = parser.parse_args(argv)
    handler: Handler | None = getattr(args, "handler", None)
    if handler is None:
        parser.print_help(sys.stderr)
        return 2
    # Commands log to stderr so their stdout stays clean output; the daemon moves its logs to stdout.
    configure_logging(log_format=_log_format(args), level=_log_level(args) or "info", stream=sys.stderr)
    try:
        return handler(args)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # `dreamer check-config | head`: the reader left; stop quietly, as other tools do.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141
