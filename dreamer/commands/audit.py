"""The agents' memory-file audit as Dreamer runs it: configuration in, :mod:`dreamer.hermes` out.

The audit itself lives in :mod:`dreamer.hermes` and knows nothing of Dreamer's configuration;
this module maps ``[agents.*]`` and ``[audit]`` onto it and holds the bodies of the ``audit`` job
and of the ``dreamer audit`` / ``dreamer memory`` commands.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TextIO

import anyio
import structlog

from dreamer.config import Config
from dreamer.hermes import (
    AgentFiles,
    AuditReport,
    AuditSettings,
    MemoryStore,
    MemoryStoreError,
    Target,
    audit_agent,
    needs_audit,
)
from dreamer.hermes.memory.store import AmbiguousMatchError, OverBudgetError

log = structlog.get_logger("dreamer.audit")

#: Report statuses that mean the agent needs a person's attention.
ALARMING = frozenset({"CRITICAL", "ERROR"})


class UnknownAgentError(ValueError):
    """An agent name that is not under ``[agents]``; the message lists the known ones."""


def agent_files(config: Config, name: str) -> AgentFiles:
    """The files of one configured agent."""
    if name not in config.agents:
        known = ", ".join(sorted(config.agents)) or "none; add an [agents.NAME] table"
        raise UnknownAgentError(f"unknown agent {name!r} (known: {known})")
    agent = config.agents[name]
    return AgentFiles(name, agent.memories_dir, agent.config_yaml, agent.skills_dir)


def audit_settings(config: Config, *, dry_run: bool = False, force: bool = False) -> AuditSettings:
    a = config.audit
    return AuditSettings(
        interval_days=a.interval_days,
        threshold_pct=a.threshold_pct,
        skip_below_pct=a.skip_below_pct,
        stale_days=a.stale_days,
        url_timeout_s=a.url_timeout_s,
        dry_run=dry_run,
        force=force,
    )


async def audit_once(
    config: Config, name: str, *, dry_run: bool = False, force: bool = False
) -> AuditReport | None:
    """Audit one agent if it is due (or forced); ``None`` when it was not due.

    The due check reads only file sizes and the ledger; the audit runs in a worker thread (file
    locks and URL checks block).
    """
    files = agent_files(config, name)
    settings = audit_settings(config, dry_run=dry_run, force=force)
    now = datetime.now(UTC)
    due, why = needs_audit(files, settings, now)
    if not due:
        log.info("audit not due", agent=name, reason=why)
        return None
    log.info("audit started", agent=name, reason=why, dry_run=dry_run)
    report = await anyio.to_thread.run_sync(lambda: audit_agent(files, settings, now))
    level = "error" if str(report.status) in ALARMING else "info"
    fields = {k: v for k, v in report.to_dict().items() if k != "agent"}
    getattr(log, level)("audit finished", agent=name, **fields)
    return report


async def audit_command(
    config: Config,
    agents: Sequence[str],
    *,
    dry_run: bool,
    force: bool,
    as_json: bool,
    out: TextIO = sys.stdout,
) -> int:
    """Audit the named agents (default: every enabled one). Exit 1 when any is CRITICAL/ERROR."""
    names = list(agents) or sorted(n for n, a in config.agents.items() if a.enabled)
    for name in names:
        agent_files(config, name)  # unknown names fail before anything runs
    reports: dict[str, dict[str, object] | None] = {}
    worst = 0
    for name in names:
        report = await audit_once(config, name, dry_run=dry_run, force=force)
        reports[name] = None if report is None else report.to_dict()
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
                out.write(f"{name}: {json.dumps(doc, indent=2, ensure_ascii=False)}\n")
    return worst


def memory_command(
    config: Config,
    action: str,
    agent: str,
    target_name: str,
    *,
    text: str | None,
    old: str | None,
    out: TextIO = sys.stdout,
    err: TextIO = sys.stderr,
) -> int:
    """``dreamer memory ACTION``: Hermes' MemoryStore semantics on one agent's files."""
    files = agent_files(config, agent)
    store = MemoryStore(files.memories_dir)
    target = Target.USER if target_name == "user" else Target.MEMORY
    try:
        if action == "list":
            for i, entry in enumerate(store.list(target), 1):
                out.write(f"{i}. {entry}\n")
        elif action == "stats":
            out.write(f"{target_name}: {store.stats(target)}\n")
        elif action == "render":
            out.write(store.render(target))
            out.write("\n")
        elif action == "add":
            out.write(store.add(target, _required(text, "TEXT")).message + "\n")
        elif action == "replace":
            out.write(store.replace(target, _required(old, "--old"), _required(text, "TEXT")).message + "\n")
        elif action == "remove":
            out.write(store.remove(target, _required(old or text, "--old")).message + "\n")
        else:  # argparse restricts the choices
            raise ValueError(f"unknown action {action!r}")
    except OverBudgetError as exc:
        err.write(f"{exc}\ncurrent entries ({exc.usage}):\n")
        for i, entry in enumerate(exc.current_entries, 1):
            err.write(f"  {i}. {entry}\n")
        return 1
    except AmbiguousMatchError as exc:
        err.write(f"{exc}\nmatching entries:\n")
        for entry in exc.matches:
            err.write(f"  - {entry}\n")
        return 1
    except MemoryStoreError as exc:
        err.write(f"{exc}\n")
        return 1
    return 0


def _required(value: str | None, name: str) -> str:
    if not value:
        raise MemoryStoreError(f"{name} is required for this action")
    return value
