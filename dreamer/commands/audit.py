"""The bodies of ``dreamer audit`` and ``dreamer memory``: the configured agents' memory files,
audited or edited with Hermes' store semantics (:mod:`dreamer.jobs.audit` maps the
configuration)."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import TextIO

import structlog

from dreamer.config import Config
from dreamer.errors import AuditError, MemoryFileError, MemoryTextError, UsageError
from dreamer.hermes.audit.canary import CANARY_MARKER
from dreamer.hermes.audit.init import AgentInit, init_agent
from dreamer.hermes.memory.entries import Target
from dreamer.hermes.memory.store import AmbiguousMatchError, MemoryStore, MemoryStoreError, OverBudgetError
from dreamer.jobs.audit import ALARMING, agent_files, audit_once, audit_settings, rotate_once
from dreamer.outcomes import Outcome, ending, exit_code

log = structlog.get_logger("dreamer.audit")


async def audit_command(
    config: Config,
    agents: Sequence[str],
    *,
    dry_run: bool,
    force: bool,
    as_json: bool,
    verify_urls: bool = False,
    out: TextIO = sys.stdout,
) -> int:
    """Audit the named agents (default: every enabled one). Exit 1 when any is CRITICAL/ERROR.
    A dry run sends no request unless ``verify_urls`` (and then only to ``audit.verify_hosts``)."""
    names = list(agents) or sorted(n for n, a in config.agents.items() if a.enabled)
    for name in names:
        agent_files(config, name)  # unknown names fail before anything runs
    reports: dict[str, dict[str, object] | None] = {}
    warnings: dict[str, tuple[str, ...]] = {}
    worst = 0
    for name in names:
        report = await audit_once(config, name, dry_run=dry_run, force=force, verify_urls=verify_urls)
        reports[name] = None if report is None else report.to_dict()
        warnings[name] = () if report is None else report.warnings
        if report is not None and str(report.status) in ALARMING:
            worst = 1
    if as_json:
        json.dump({"agents": reports}, out, indent=2)
        out.write("\n")
    elif not names:
        out.write("no agents configured (add [agents.NAME] tables with memories_dir)\n")
    else:
        for name, doc in reports.items():
            if doc is None:
                out.write(f"{name}: not due (use --force to audit now)\n")
            else:
                for warning in warnings[name]:
                    out.write(f"{name}: WARNING: {warning}\n")
                out.write(f"{name}: {json.dumps(doc, indent=2, ensure_ascii=False)}\n")
    return worst


async def rotate_command(
    config: Config, agents: Sequence[str], *, combined_with_dry_run: bool = False, out: TextIO = sys.stdout
) -> int:
    """Give the named agents' canaries (default: every enabled agent's) a new token. Exit 1 when
    any rotation was refused or failed; the others still run."""
    if combined_with_dry_run:
        raise UsageError("--rotate-canary changes the files; it cannot be combined with --dry-run or --json")
    names = list(agents) or sorted(n for n, a in config.agents.items() if a.enabled)
    for name in names:
        agent_files(config, name)  # unknown names fail before anything runs
    failed: list[Outcome] = []
    for name in names:
        try:
            rotation = await rotate_once(config, name)
        except (AuditError, OSError) as exc:  # a refusal (RotationRefusedError) or a file that failed
            out.write(f"{name}: canaries NOT rotated: {exc}\n")
            failed.append(ending(exc)[0])
            continue
        finished = " (finished an interrupted rotation)" if rotation.finished_interrupted else ""
        out.write(
            f"{name}: canaries rotated{finished}; fingerprints MEMORY.md {rotation.canary_memory}, "
            f"USER.md {rotation.canary_user}, recorded in the ledger\n"
        )
    return exit_code(failed)


def init_command(
    config: Config,
    agents: Sequence[str],
    *,
    dry_run: bool,
    as_json: bool,
    combined_with_audit: bool = False,
    out: TextIO = sys.stdout,
    err: TextIO = sys.stderr,
) -> int:
    """Set the named agents up for the audit: a canary line in MEMORY.md and USER.md where there is
    none, Dreamer in MEMORY_WRITERS.md. Exit 1 when any was refused; the others still run."""
    if combined_with_audit:
        raise UsageError(
            "--init sets agents up; it cannot be combined with --rotate-canary, --force or --verify-urls"
        )
    if not agents:
        raise UsageError("--init needs --agent A, the agent to set up (repeatable)")
    for name in agents:
        agent_files(config, name)  # unknown names fail before anything runs
    settings = audit_settings(config)
    docs: dict[str, dict[str, object]] = {}
    failed: list[Outcome] = []
    for name in dict.fromkeys(agents):
        try:
            done = init_agent(agent_files(config, name), settings, dry_run=dry_run)
        except (AuditError, OSError) as exc:  # a refusal (InitRefusedError), a lock or write that failed
            err.write(f"{name}: not set up for the audit: {exc}\n")
            docs[name] = {"agent": name, "dry_run": dry_run, "error": str(exc)}
            failed.append(ending(exc)[0])
            continue
        docs[name] = done.to_dict()
        if not as_json:
            _print_init(done, out)
    if as_json:
        json.dump({"agents": docs}, out, indent=2, ensure_ascii=False)
        out.write("\n")
    return exit_code(failed)


def _print_init(done: AgentInit, out: TextIO) -> None:
    name = done.agent
    for step in done.steps:
        if step.line:
            verb = "would add" if done.dry_run else "added"
            out.write(f"{name}: {step.path}: {verb} the line '{step.line}'\n")
        else:
            out.write(f"{name}: {step.path}: {step.unchanged}; unchanged\n")
    if done.dry_run:
        would = (
            "nothing was written" if done.changed else "already set up for the audit; nothing would change"
        )
        out.write(f"{name}: dry run; {would}\n")
    elif done.changed:
        out.write(f"{name}: set up for the audit; `dreamer audit --agent {name} --force` audits it now\n")
    else:
        out.write(f"{name}: already set up for the audit; nothing changed\n")


def memory_command(
    config: Config,
    action: str,
    agent: str,
    target_name: str,
    *,
    text: str | None,
    old: str | None,
    as_json: bool = False,
    out: TextIO = sys.stdout,
    err: TextIO = sys.stderr,
) -> int:
    """``dreamer memory ACTION``: Hermes' MemoryStore semantics, and its config.yaml limits, on one
    agent's files."""
    files = agent_files(config, agent)
    if as_json and action not in ("list", "stats"):
        raise UsageError(f"--json applies to list and stats, not to {action}")
    # A bad limit in config.yaml raises MemoryLimitsError, a ConfigError: the file is to be fixed.
    store = MemoryStore.for_config(files.memories_dir, files.config_yaml)
    target = Target.USER if target_name == "user" else Target.MEMORY
    if action in ("add", "replace") and text is not None and CANARY_MARKER in text:
        # A second canary line would let a rewritten file pass the audit's canary check.
        raise UsageError(
            f"TEXT holds the canary marker {CANARY_MARKER!r}; canary lines are written by "
            "`dreamer audit --init` (or by hand), never added as an entry"
        )
    try:
        if action == "list":
            _list(store, target, agent, as_json, out)
        elif action == "stats":
            _stats(store, target, agent, as_json, out, err)
        elif action == "render":
            out.write(store.render(target))  # as Hermes injects it: no newline after the last entry
            _warn_over_limit(store, target, err)
        elif action == "add":
            out.write(store.add(target, _required(text, "TEXT")).message + "\n")
        elif action == "replace":
            out.write(store.replace(target, _required(old, "--old"), _required(text, "TEXT")).message + "\n")
        elif action == "remove":
            out.write(store.remove(target, _required(old or text, "--old")).message + "\n")
        else:  # argparse restricts the choices
            raise ValueError(f"unknown action {action!r}")
    except MemoryTextError:
        raise  # the text given on the command line cannot be stored: reported as bad usage
    except MemoryFileError as exc:
        _explain_refusal(exc, err)
        return ending(exc)[1]
    return 0


def _explain_refusal(exc: MemoryFileError, err: TextIO) -> None:
    """The store's refusal on stderr, with the entries it concerns when it names them."""
    err.write(f"{exc}\n")
    if isinstance(exc, OverBudgetError):
        err.write(f"current entries ({exc.usage}):\n")
        for i, entry in enumerate(exc.current_entries, 1):
            err.write(f"  {i}. {entry}\n")
    elif isinstance(exc, AmbiguousMatchError):
        err.write("matching entries:\n")
        for entry in exc.matches:
            err.write(f"  - {entry}\n")


def _usage_doc(store: MemoryStore, target: Target, agent: str) -> dict[str, object]:
    usage = store.stats(target)
    return {
        "agent": agent,
        "target": str(target),
        "path": str(store.path_for(target)),
        "chars": usage.chars,
        "limit": usage.limit,
        "percent": usage.percent,
        "over_limit": usage.chars > usage.limit,
    }


def _list(store: MemoryStore, target: Target, agent: str, as_json: bool, out: TextIO) -> None:
    entries = store.list(target)
    if as_json:
        json.dump({**_usage_doc(store, target, agent), "entries": list(entries)}, out, ensure_ascii=False)
        out.write("\n")
        return
    for i, entry in enumerate(entries, 1):
        out.write(f"{i}. {entry}\n")


def _stats(store: MemoryStore, target: Target, agent: str, as_json: bool, out: TextIO, err: TextIO) -> None:
    if as_json:
        json.dump(_usage_doc(store, target, agent), out, ensure_ascii=False)
        out.write("\n")
    else:
        out.write(f"{target}: {store.stats(target)}\n")
    _warn_over_limit(store, target, err)


def _warn_over_limit(store: MemoryStore, target: Target, err: TextIO) -> None:
    """The over-limit warning Hermes' render does not carry, kept out of the rendered block."""
    usage = store.stats(target)
    if usage.chars > usage.limit:
        err.write(
            f"warning: {target.filename} is over its limit ({usage.chars:,}/{usage.limit:,} chars): "
            f"Hermes refuses every add until entries are removed or shortened by "
            f"{usage.chars - usage.limit:,} chars\n"
        )


def _required(value: str | None, name: str) -> str:
    if not value:
        raise MemoryStoreError(f"{name} is required for this action")
    return value
