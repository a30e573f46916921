"""One audit of one Hermes agent's memory files: its phases in order, touching only that agent's files.

Refuse planted links, read, canary check, skip rule, writer registry, classify, plan, drift alerts,
then either a dry run or applying the plan (``changes.py``: after removing temp files a crashed writer
left), the post-audit canary check, over-limit warnings, the first-seen state and the ledger block.
The phases and why they are what they are: ``docs/design/hermes-audit.md``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime

import structlog

from dreamer.hermes.audit.canary import (
    CANARY_MARKER,
    canary_breach,
    canary_fingerprint,
    canary_lines,
    is_canary_entry,
    last_canary_block,
)
from dreamer.hermes.audit.changes import Changes, make_changes
from dreamer.hermes.audit.classify import Classification, EntryClassifier, RuleBasedClassifier
from dreamer.hermes.audit.compress import Compressor, RuleCompressor
from dreamer.hermes.audit.context import load_first_seen, plan_context
from dreamer.hermes.audit.drift import drift_alerts
from dreamer.hermes.audit.files import MemoryFiles, read_memory_files, utilisation
from dreamer.hermes.audit.init import init_hint, new_agent_fix
from dreamer.hermes.audit.ledger import LedgerEntry, LedgerReadError, last_audit, read_ledger
from dreamer.hermes.audit.planner import (
    UNVERIFIED_MARK,
    ActionKind,
    Entry,
    Plan,
    UnresolvedEntry,
    collect_entries,
    plan_audit,
)
from dreamer.hermes.audit.probe import HttpUrlProbe, UrlProbe
from dreamer.hermes.audit.record import LedgerFacts, append_ledger_block, save_audit_state
from dreamer.hermes.audit.report import (
    AuditReport,
    AuditStatus,
    Utilisation,
    action_record,
    count_actions,
    over_limit_warnings,
    summary_line,
)
from dreamer.hermes.audit.rotation import (
    CanaryRotation,
    RotationRefusedError,
    memory_files_locked,
    rotate_canaries,
    rotation_due,
    waiting_for_writers,
)
from dreamer.hermes.audit.settings import AgentFiles, AuditSettings, with_hermes_limits
from dreamer.hermes.audit.soul import SoulMove, plan_soul_moves
from dreamer.hermes.audit.soul_audit import SoulFindings, inspect_soul, soul_move_record
from dreamer.hermes.audit.state import AuditState, with_entries_seen
from dreamer.hermes.audit.trigger import require_aware, skip_reason
from dreamer.hermes.audit.writers import WriterRegistryError, is_registered_writer
from dreamer.hermes.memory.limits import MemoryLimitsError
from dreamer.hermes.memory.locking import exclusive_lock, refuse_symlink
from dreamer.hermes.memory.store import StoreReadError

__all__ = ["audit_agent"]

log = structlog.get_logger("dreamer.hermes.audit")


def audit_agent(
    agent: AgentFiles,
    settings: AuditSettings,
    now: datetime,
    *,
    probe: UrlProbe | None = None,
    classifier: EntryClassifier | None = None,
    compressor: Compressor | None = None,
) -> AuditReport:
    """Audit the memory of `agent` at `now`; never raises for file problems (a symbolic link in place
    of a file the audit writes is one: ERROR, nothing changed).

    A requested dry run writes nothing; audits of one agent are serialised by a lock on its state file.
    """
    require_aware(now)
    if not agent.memories_dir.is_dir():
        return AuditReport(
            agent.name,
            AuditStatus.ERROR,
            now,
            reason=f"memory directory {agent.memories_dir} of agent {agent.name} not found; check the config",
        )
    try:  # the limits Hermes enforces on the files, never the defaults in their place
        settings = with_hermes_limits(settings, agent)
    except MemoryLimitsError as exc:
        return AuditReport(agent.name, AuditStatus.ERROR, now, reason=str(exc))
    probe = probe or HttpUrlProbe(settings.url_timeout_s, settings.allowed_hosts)
    run = _AuditRun(agent, settings, now, probe, classifier)
    run.compressor = compressor or RuleCompressor(settings.compress_min_chars)
    try:
        if settings.dry_run:
            return run.execute()
        with exclusive_lock(agent.state_path):
            return run.execute()
    except (StoreReadError, LedgerReadError, WriterRegistryError, OSError) as exc:
        log.error("hermes_audit_failed", agent=agent.name, error=str(exc))
        # LLM tokens a compression reflect used before the failure were spent all the same.
        llm = dict(run.compressor.llm_counts())
        return AuditReport(agent.name, AuditStatus.ERROR, now, reason=str(exc), counts=llm)


@dataclass(frozen=True)
class _Findings:
    """What an audit found before it changes anything: the plan and what it was made from."""

    plan: Plan
    entries: Sequence[Entry]
    state: AuditState
    before: Utilisation
    canaries: Mapping[str, bool]
    alerts: tuple[str, ...]


class _AuditRun:
    """One audit of one agent; `execute` runs the phases in order."""

    def __init__(
        self,
        agent: AgentFiles,
        settings: AuditSettings,
        now: datetime,
        probe: UrlProbe,
        classifier: EntryClassifier | None,
    ) -> None:
        self.agent = agent
        self.settings = settings
        self.now = now
        self.probe = probe
        self.classifier = classifier or RuleBasedClassifier()
        self.notes: list[str] = []
        self.compressor: Compressor = RuleCompressor(settings.compress_min_chars)
        self.ledger: tuple[LedgerEntry, ...] = ()
        self.fingerprints = ("", "")
        self.soul = SoulFindings(None, "not configured")
        self.soul_moves: list[SoulMove] = []

    def execute(self) -> AuditReport:
        """The phases in order; a missing or changed canary, or the skip rule, ends the audit early."""
        agent, settings, now = self.agent, self.settings, self.now
        for path in agent.written_paths():
            # Before anything changes: a planted link would carry a later write outside the folder.
            refuse_symlink(path)
        # The files and the ledger are read together under the file locks, so a rotation in
        # progress (which holds both) is seen whole, never half done.
        with waiting_for_writers(agent) if settings.dry_run else memory_files_locked(agent):
            files = read_memory_files(agent)
            ledger = read_ledger(agent.ledger_path)
        before = utilisation(files.memory_entries, files.user_entries, settings)
        canaries = {
            "MEMORY.md": bool(canary_lines(files.memory_raw)),
            "USER.md": bool(canary_lines(files.user_raw)),
        }
        if not all(canaries.values()):
            return self._critical(canaries, before, new_agent=last_canary_block(ledger) is None)
        breach = canary_breach(*_fingerprints(files.memory_raw, files.user_raw), ledger)
        if breach:
            return self._critical(canaries, before, breach)
        self.ledger = ledger
        self.fingerprints = _fingerprints(files.memory_raw, files.user_raw)

        previous = last_audit(ledger)
        skip = skip_reason(settings, now, previous, before)
        if skip:
            return AuditReport(agent.name, AuditStatus.SKIP, now, reason=skip, utilisation_before=before)

        registered, registry_reason = is_registered_writer(agent.writers_path, settings.writer_name)
        if not registered:
            registry_reason += f" (`{init_hint(agent.name)}` adds it)"
        state = load_first_seen(agent, self.notes)
        entries = collect_entries(files.memory_entries, files.user_entries)
        plan = self._plan(entries, state)
        alerts = drift_alerts(
            previous,
            now=now,
            deletions=plan.count(ActionKind.DELETE),
            unverified_total=plan.unverified_total,
        )
        found = _Findings(plan, entries, state, before, canaries, alerts)
        if settings.dry_run or not registered:
            reason = "dry run requested; nothing was changed" if settings.dry_run else registry_reason
            return self._dry_run(found, registered, reason)
        return self._apply(found, files)

    # --- phases -------------------------------------------------------------------------------

    def _plan(self, entries: Sequence[Entry], state: AuditState) -> Plan:
        """Classify the entries (canaries never), gather what the planner is told besides them
        (ages, URL answers, the model, compressions, SOUL.md), and plan."""
        classifications: dict[int, Classification] = {
            entry.id: self.classifier.classify(entry.text)
            for entry in entries
            if not is_canary_entry(entry.text)
        }
        context = plan_context(
            self.agent, self.settings, self.now, entries, classifications, state, self.probe, self.notes
        )
        self.soul = inspect_soul(self.agent, self.settings, self.classifier, self.notes)
        context = replace(
            context, compressions=self._compressions(entries), soul_unavailable=self.soul.unavailable
        )
        return self._plan_soul(plan_audit(entries, classifications, context))

    def _plan_soul(self, plan: Plan) -> Plan:
        """Plan the moves out of SOUL.md after the memory files' plan (MEMORY.md's room is known then)."""
        if self.soul.unavailable or not self.soul.blocks:
            return plan
        moves, left = plan_soul_moves(
            self.soul.blocks, self.soul.classifications, plan.final_memory, self.settings.max_memory_chars
        )
        self.soul_moves = moves
        unresolved = tuple(UnresolvedEntry("SOUL.md", block.text, reason) for block, reason in left)
        final_memory = (*plan.final_memory, *(move.block.text for move in moves))
        return replace(plan, unresolved=(*plan.unresolved, *unresolved), final_memory=final_memory)

    def _compressions(self, entries: Sequence[Entry]) -> dict[str, tuple[str, str]]:
        """Shorter wordings of the long entries (compress_entries), each gated; canaries never."""
        if not self.settings.compress_entries:
            return {}
        texts = list(dict.fromkeys(e.text for e in entries if not is_canary_entry(e.text)))
        found = self.compressor.rewrite(texts)
        self.notes.extend(self.compressor.notes)
        return {text: (rewrite.text, rewrite.method) for text, rewrite in found.items()}

    def _scheduled_rotation(self) -> CanaryRotation | None:
        """Rotate the canaries when `canary_rotation_days` passed; a refusal becomes a note."""
        try:
            ledger = read_ledger(self.agent.ledger_path)
            if not rotation_due(self.settings, ledger, self.now):
                return None
            rotation = rotate_canaries(
                self.agent, self.settings, self.now, trigger="scheduled", holding_audit_lock=True
            )
        except (RotationRefusedError, OSError) as exc:
            self.notes.append(f"canaries not rotated: {exc}")
            log.error("hermes_canary_rotation_failed", agent=self.agent.name, error=str(exc))
            return None
        log.info("hermes_canaries_rotated", agent=self.agent.name, trigger="scheduled")
        return rotation

    def _critical(
        self, canaries: Mapping[str, bool], before: Utilisation, breach: str = "", *, new_agent: bool = False
    ) -> AuditReport:
        """The CRITICAL report of a missing canary line (`new_agent`: no ledger block recorded
        canaries yet) or of one that disagrees with the ledger."""
        missing = [name for name, present in canaries.items() if not present]
        fix = new_agent_fix(self.agent.name) if new_agent else "restore the canary line, then rerun the audit"
        reason = (
            f"CANARY BREACH — memory integrity compromised: {breach}"
            if breach
            else f"CANARY BREACH — memory integrity compromised: no line containing '{CANARY_MARKER}' in "
            f"{' and '.join(missing)}. Nothing was changed; {fix}."
        )
        log.error(
            "hermes_audit_canary_breach",
            agent=self.agent.name,
            memory_canary_intact=canaries["MEMORY.md"],
            user_canary_intact=canaries["USER.md"],
            reason=reason,
        )
        return AuditReport(
            self.agent.name,
            AuditStatus.CRITICAL,
            self.now,
            reason=reason,
            utilisation_before=before,
            canaries=dict(canaries),
            canary_intact=False,
        )

    # --- a dry run ----------------------------------------------------------------------------

    def _dry_run(self, found: _Findings, registered: bool, reason: str) -> AuditReport:
        """The plan reported, nothing changed. Not a registered writer (no dry run requested): the
        findings are recorded too, so the interval advances and the operator sees why."""
        plan = found.plan
        counts = count_actions(plan.actions)
        counts["moves"] += len(self.soul_moves)
        counts.update(self.compressor.llm_counts())
        records = (
            *(action_record(action, "planned") for action in plan.actions),
            *(soul_move_record(move, "planned") for move in self.soul_moves),
        )
        after = utilisation(plan.final_memory, plan.final_user, self.settings)
        warnings = (*over_limit_warnings(after, planned=True), *self.soul.warnings())
        ledger_updated = False
        if not self.settings.dry_run:
            facts = LedgerFacts(
                status=AuditStatus.DRY_RUN,
                mode="dry-run",
                before=found.before,
                after=found.before,
                counts=counts,
                unverified_total=sum(UNVERIFIED_MARK in entry.text for entry in found.entries),
                unresolved=len(plan.unresolved),
                alerts=found.alerts,
                canary_intact=True,
                writer_registered=registered,
                note=reason,
                records=records,
                warnings=warnings,
                canary_memory=self.fingerprints[0],
                canary_user=self.fingerprints[1],
                soul=self.soul.state,
            )
            ledger_updated = self._record(found.state, [e.text for e in found.entries], facts)
        return AuditReport(
            self.agent.name,
            AuditStatus.DRY_RUN,
            self.now,
            reason=reason,
            dry_run=True,
            writer_registered=registered,
            utilisation_before=found.before,
            utilisation_after=after,
            counts=counts,
            actions=records,
            unresolved=plan.unresolved,
            drift_alerts=found.alerts,
            notes=tuple(self.notes),
            canaries=dict(found.canaries),
            canary_intact=True,
            ledger_updated=ledger_updated,
            summary=summary_line(counts, len(plan.unresolved), found.alerts, planned=True),
            warnings=warnings,
            soul=self.soul.to_dict(),
        )

    def _record(self, state: AuditState, seen: Sequence[str], facts: LedgerFacts) -> bool:
        """Save the first-seen state with the entries `seen` now, then append the ledger block of
        `facts`; whether the block was written (a failure of either is a note, never the audit's)."""
        save_audit_state(self.agent, with_entries_seen(state, seen, self.now), self.notes)
        return append_ledger_block(self.agent, self.now, facts, self.notes)

    # --- applying the plan --------------------------------------------------------------------

    def _apply(self, found: _Findings, files: MemoryFiles) -> AuditReport:
        """Apply the plan, check the canaries survived, record the audit, rotate the canaries when
        that is due, and report. A changed canary makes the audit CRITICAL and is never recorded as
        the new baseline."""
        changes = make_changes(
            self.agent, self.settings, found.plan, found.entries, self.soul_moves, files, self.notes
        )
        alerts = found.alerts
        if not changes.canary_intact:
            alerts = (*alerts, "CRITICAL: Canary destroyed during audit — memory integrity compromised")
            log.error("hermes_audit_canary_changed", agent=self.agent.name)
        counts = dict(changes.counts)
        counts.update(self.compressor.llm_counts())
        status = AuditStatus.COMPLETE if changes.canary_intact else AuditStatus.CRITICAL
        warnings = (*over_limit_warnings(changes.after, planned=False), *self.soul.warnings())
        ledger_updated = self._record_applied(found, changes, status, counts, alerts, warnings)
        rotation = self._scheduled_rotation() if changes.canary_intact else None
        log.info(
            "hermes_audit_complete",
            agent=self.agent.name,
            status=str(status),
            memory_pct_before=found.before.memory_pct,
            memory_pct_after=changes.after.memory_pct,
            user_pct_before=found.before.user_pct,
            user_pct_after=changes.after.user_pct,
            unresolved=len(changes.unresolved),
            drift_alerts=len(alerts),
            warnings=list(warnings),
            temp_files_removed=list(changes.temp_files_removed),
            **counts,
        )
        return AuditReport(
            self.agent.name,
            status,
            self.now,
            reason="" if changes.canary_intact else "a canary line changed during the audit",
            dry_run=False,
            writer_registered=True,
            utilisation_before=found.before,
            utilisation_after=changes.after,
            counts=counts,
            actions=changes.records,
            unresolved=changes.unresolved,
            drift_alerts=alerts,
            notes=tuple(self.notes),
            canaries=dict(found.canaries),
            canary_intact=changes.canary_intact,
            ledger_updated=ledger_updated,
            summary=summary_line(counts, len(changes.unresolved), alerts, planned=False),
            warnings=warnings,
            soul=self.soul.to_dict(),
            temp_files_removed=changes.temp_files_removed,
            canary_rotation=rotation.canary_memory + "/" + rotation.canary_user if rotation else "",
        )

    def _record_applied(
        self,
        found: _Findings,
        changes: Changes,
        status: AuditStatus,
        counts: Mapping[str, int],
        alerts: tuple[str, ...],
        warnings: tuple[str, ...],
    ) -> bool:
        """Record an applied audit: the entries left as seen, the canaries as they are now (only when
        they held: a changed one is recorded as the alarm alone), and the ledger block."""
        intact = changes.canary_intact
        remaining = changes.remaining
        if intact:
            self.fingerprints = _fingerprints(changes.files_after.memory_raw, changes.files_after.user_raw)
        facts = LedgerFacts(
            status=status,
            mode="apply",
            before=found.before,
            after=changes.after,
            counts=counts,
            unverified_total=sum(UNVERIFIED_MARK in text for text in remaining),
            unresolved=len(changes.unresolved),
            alerts=alerts,
            canary_intact=intact,
            writer_registered=True,
            note="",
            records=changes.records,
            warnings=warnings,
            temp_files_removed=changes.temp_files_removed,
            canary_memory=self.fingerprints[0] if intact else "",
            canary_user=self.fingerprints[1] if intact else "",
            soul=self.soul.state,
        )
        return self._record(found.state, remaining, facts)


def _fingerprints(memory_raw: str, user_raw: str) -> tuple[str, str]:
    return canary_fingerprint(canary_lines(memory_raw)), canary_fingerprint(canary_lines(user_raw))
