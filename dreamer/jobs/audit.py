"""The audit job: the agents Dreamer is configured to look after (``[agents.*]`` and ``[audit]``)
mapped onto the memory-file audit, and one audit of a configured agent when it is due.

The audit itself (:mod:`dreamer.hermes.audit`) knows nothing of Dreamer's configuration; this is
the one place that translates. Used by the daemon's audit job (:func:`run_audit_job`) and by
``dreamer audit`` / ``dreamer memory``.
"""

from __future__ import annotations

import contextlib
from datetime import UTC, datetime

import anyio
import structlog

from dreamer.backends import MemoryBackend
from dreamer.config import Config
from dreamer.errors import UnknownAgentError
from dreamer.hermes.audit.compress import Compressor
from dreamer.hermes.audit.compress_reflect import ReflectCompressor, reflect_compress
from dreamer.hermes.audit.report import AuditReport
from dreamer.hermes.audit.rotation import CanaryRotation, rotate_canaries
from dreamer.hermes.audit.run import audit_agent
from dreamer.hermes.audit.settings import AgentFiles, AuditSettings, with_hermes_limits
from dreamer.hermes.audit.trigger import needs_audit
from dreamer.hermes.memory.limits import MemoryLimitsError
from dreamer.jobs.open import open_for
from dreamer.jobs.spec import JobOutcome, JobSpec
from dreamer.outcomes import Outcome
from dreamer.retry import RetryPolicy
from dreamer.slot import SlotLock

log = structlog.get_logger("dreamer.audit")

#: Report statuses that mean the agent needs a person's attention.
ALARMING = frozenset({"CRITICAL", "ERROR"})


def agent_files(config: Config, name: str) -> AgentFiles:
    """The files of one configured agent."""
    if name not in config.agents:
        known = ", ".join(sorted(config.agents)) or "none; add an [agents.NAME] table"
        raise UnknownAgentError(f"unknown agent {name!r} (known: {known})")
    agent = config.agents[name]
    home = agent.memories_dir.parent  # Hermes keeps memories/ and SOUL.md side by side in its home
    default_soul = agent.default_soul_md
    if default_soul is None and home.parent.name == "profiles":
        default_soul = home.parent.parent / "SOUL.md"  # ~/.hermes/profiles/<name>/ → ~/.hermes/SOUL.md
    return AgentFiles(
        name,
        agent.memories_dir,
        agent.config_yaml,
        agent.skills_dir,
        soul_path=agent.soul_md or home / "SOUL.md",
        default_soul_path=default_soul,
    )


def audit_settings(
    config: Config, *, dry_run: bool = False, force: bool = False, verify_urls: bool = False
) -> AuditSettings:
    """The audit's settings from ``[audit]``; ``verify_urls``: check the listed hosts' URLs in a
    dry run too."""
    a = config.audit
    return AuditSettings(
        interval_days=a.interval_days,
        threshold_pct=a.threshold_pct,
        skip_below_pct=a.skip_below_pct,
        stale_days=a.stale_days,
        url_timeout_s=a.url_timeout_s,
        verify_hosts=a.verify_hosts,
        verify_urls=verify_urls,
        canary_rotation_days=a.canary_rotation_days or None,
        compress_entries=a.compress_entries,
        compress_min_chars=a.compress_min_chars,
        dry_run=dry_run,
        force=force,
    )


async def audit_once(
    config: Config, name: str, *, dry_run: bool = False, force: bool = False, verify_urls: bool = False
) -> AuditReport | None:
    """Audit one agent if it is due (or forced); ``None`` when it was not due.

    The due check reads only file sizes and the ledger; the audit runs in a worker thread (file
    locks and URL checks block). URLs are checked only on the hosts ``audit.verify_hosts`` lists,
    and in a dry run only with ``verify_urls``.
    """
    files = agent_files(config, name)
    settings = audit_settings(config, dry_run=dry_run, force=force, verify_urls=verify_urls)
    with contextlib.suppress(MemoryLimitsError):  # the audit itself reports it as an ERROR
        settings = with_hermes_limits(settings, files)
    now = datetime.now(UTC)
    due, why = needs_audit(files, settings, now)
    if not due:
        log.info("audit not due", agent=name, reason=why)
        return None
    log.info("audit started", agent=name, reason=why, dry_run=dry_run)
    compresses = bool(settings.compress_entries and config.audit.compress_bank)
    async with open_for(config, backend=compresses) as opened:
        compressor = _compressor(config, opened.opened_backend, settings)
        report = await anyio.to_thread.run_sync(
            lambda: audit_agent(files, settings, now, compressor=compressor)
        )
    level = "error" if str(report.status) in ALARMING else "warning" if report.warnings else "info"
    fields = {k: v for k, v in report.to_dict().items() if k != "agent"}
    getattr(log, level)("audit finished", agent=name, **fields)
    return report


def _compressor(config: Config, backend: MemoryBackend | None, settings: AuditSettings) -> Compressor | None:
    """The reflect compressor when ``audit.compress_bank`` names a bank of an LLM-backed backend;
    None (the rules) otherwise."""
    bank = config.audit.compress_bank
    if backend is None or bank is None:
        return None
    if not backend.reflect_uses_llm:
        reason = f"the {backend.name} backend's reflect does not use an LLM"
        log.info("audit compresses by rules", reason=reason)
        return None
    slot = SlotLock.from_config(config.slot)
    policy = RetryPolicy.from_config(config.retry)
    bank_id, budget = config.bank_id(bank), config.audit.compress_budget
    return ReflectCompressor(
        lambda entries: reflect_compress(backend, bank_id, entries, budget=budget, policy=policy, slot=slot),
        anyio.from_thread.run,
        settings.compress_min_chars,
    )


async def rotate_once(config: Config, name: str) -> CanaryRotation:
    """Rotate the canaries of one configured agent now; raises `RotationRefusedError` or `OSError`."""
    files = agent_files(config, name)
    settings = audit_settings(config)
    now = datetime.now(UTC)
    rotation = await anyio.to_thread.run_sync(lambda: rotate_canaries(files, settings, now))
    log.info("canaries rotated", agent=name, finished_interrupted=rotation.finished_interrupted)
    return rotation


async def run_audit_job(config: Config, job: JobSpec, run_id: str) -> JobOutcome:
    """The audit job's body: audit one agent's MEMORY.md / USER.md when due (interval or
    utilisation threshold)."""
    report = await audit_once(config, job.key)
    if report is None:
        return JobOutcome(Outcome.NOT_DUE, "no audit due")
    doc = report.to_dict()
    counts = {k: v for k, v in doc.get("counts", {}).items() if isinstance(v, int)}
    return JobOutcome(str(report.status).lower(), f"audit {report.status}", counts)
