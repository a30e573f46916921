"""The subcommands over agents' own memory files (MEMORY.md / USER.md), done in
:mod:`dreamer.commands.audit`: ``audit`` checks and tidies them, ``memory`` reads and edits them as
Hermes' store does."""

from __future__ import annotations

import argparse

from dreamer.cli.base import run_async, run_sync
from dreamer.cli.registry import CommandGroup

COMMANDS = CommandGroup()


def _audit_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--agent",
        action="append",
        default=[],
        metavar="A",
        help="audit this agent (repeatable; default: all)",
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="change nothing and send no request (no URL is checked); print the planned actions",
    )
    parser.add_argument(
        "--verify-urls",
        action="store_true",
        help=(
            "with --dry-run, still check the URLs of the hosts listed in audit.verify_hosts (one HEAD "
            "each, to the host's root); an audit that applies its plan checks them anyway"
        ),
    )
    parser.add_argument("--force", action="store_true", help="audit now even if no audit is due")
    parser.add_argument("--json", action="store_true", help="print the reports as JSON")
    parser.add_argument(
        "--rotate-canary",
        action="store_true",
        help=(
            "instead of auditing, give both canary lines a new token now, in one locked step recorded "
            "in the ledger (a stale copy of a file put back then fails the next audit); refused when a "
            "canary already disagrees with the ledger. audit.canary_rotation_days rotates on a schedule"
        ),
    )
    parser.add_argument(
        "--init",
        action="store_true",
        help=(
            "instead of auditing, set the agents named by --agent up for the audit: append a canary line "
            "to MEMORY.md and USER.md where there is none and the line '- dreamer' to MEMORY_WRITERS.md "
            "where Dreamer is not registered; nothing else changes, a second run changes nothing. With "
            "--dry-run it prints what it would write; --json prints it as JSON"
        ),
    )


@COMMANDS.subcommand(
    "audit",
    help="audit agents' MEMORY.md / USER.md / SOUL.md (canaries, stale entries, moves, duplicates)",
    description=(
        "Run the memory audit of each configured agent when it is due (every audit.interval_days, "
        "or at once above audit.threshold_pct of a file's limit), or now with --force. Each agent "
        "is audited in isolation; changes are patch-level edits through the store and only when "
        "Dreamer is a registered writer in the agent's MEMORY_WRITERS.md (--init sets a new agent up: "
        "a canary line in each memory file and that entry); every audit appends to "
        "the agent's MEMORY_AUDIT_LEDGER.md. A URL in a technical-config entry is checked only when "
        "its host is listed in audit.verify_hosts (default: none), with one HEAD to the root of its "
        "host and port, never its path or query string; one that does not answer is marked [UNVERIFIED], one "
        "not checked is left as it is. Long entries are reworded shorter, keeping every number, "
        "name, path and URL (audit.compress_entries). SOUL.md is reported when stale (a copy of the "
        "default profile's, or older than config.yaml and the memory files); persona entries move into "
        "it. Exit 1 when an agent is CRITICAL (a canary missing, or changed outside a rotation) or its "
        "files cannot be read."
    ),
    arguments=_audit_arguments,
    examples=[
        "dreamer audit --agent mumuni --dry-run --force",
        "dreamer audit --json | jq '.agents'",
        "dreamer audit --rotate-canary --agent mumuni",
        "dreamer audit --init --agent mumuni --dry-run",
    ],
)
def _audit(args: argparse.Namespace) -> int:
    from dreamer.commands.audit import audit_command, init_command, rotate_command

    if args.init:
        return run_sync(
            args,
            lambda config: init_command(
                config,
                args.agent,
                dry_run=args.dry_run,
                as_json=args.json,
                combined_with_audit=args.rotate_canary or args.force or args.verify_urls,
            ),
        )
    if args.rotate_canary:
        return run_async(
            args,
            lambda config: rotate_command(
                config, args.agent, combined_with_dry_run=args.dry_run or args.json
            ),
        )
    return run_async(
        args,
        lambda config: audit_command(
            config,
            args.agent,
            dry_run=args.dry_run,
            force=args.force,
            as_json=args.json,
            verify_urls=args.verify_urls,
        ),
    )


def _memory_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=["list", "stats", "add", "replace", "remove", "render"])
    parser.add_argument("text", nargs="?", help="the entry's text (add, replace)")
    parser.add_argument("--agent", required=True, metavar="NAME", help="an agent under [agents]")
    parser.add_argument("--target", choices=["memory", "user"], default="memory", help="MEMORY.md or USER.md")
    parser.add_argument("--old", metavar="TEXT", help="a unique piece of the entry to replace or remove")
    parser.add_argument("--json", action="store_true", help="list, stats: print JSON")
    parser.set_defaults(late_positional="text")


@COMMANDS.subcommand(
    "memory",
    help="read or edit an agent's MEMORY.md / USER.md with Hermes' store semantics",
    description=(
        "Entries are separated by a line holding only §; MEMORY.md holds at most 2,200 characters "
        "and USER.md 1,375, or what memory.memory_char_limit / user_char_limit in the agent's Hermes "
        "config.yaml say. add refuses exact duplicates and, over the limit, prints the current "
        "entries; add and replace refuse what Hermes' threat scan blocks; replace and remove find "
        "the entry by a unique piece of its text. Writes take the sidecar .lock file and replace "
        "the file atomically (mode 0600), through a symbolic link only to a file the folder's owner "
        "owns. render prints the block exactly as Hermes injects it."
    ),
    arguments=_memory_arguments,
    examples=[
        "dreamer memory stats --agent mumuni --target user",
        "dreamer memory add 'Deploys go through the staging host first.' --agent mumuni",
        "dreamer memory replace 'Prefers metric units.' --old 'imperial' --agent mumuni --target user",
        "dreamer memory render --agent mumuni",
        "dreamer memory list --agent mumuni --json | jq '.entries'",
    ],
)
def _memory(args: argparse.Namespace) -> int:
    from dreamer.commands.audit import memory_command

    return run_sync(
        args,
        lambda config: memory_command(
            config, args.action, args.agent, args.target, text=args.text, old=args.old, as_json=args.json
        ),
    )
