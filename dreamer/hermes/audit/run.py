"""The memory audit of one Hermes agent, and the cheap check of whether one is due.

`needs_audit` decides from the two files' sizes and the ledger alone (no model, no network), so a
daemon can call it every cycle. An audit is due when forced, when the agent has never been
audited, when the last audit is `interval_days` old, or when a file is above `threshold_pct` and
has changed since the last audit (without that last condition a file that the audit cannot shrink
would be re-audited every cycle).

`audit_agent` runs the contract's phases for one agent, touching only that agent's files:
canaries (missing → CRITICAL, nothing changed), the skip rule, the writer registry (not registered
→ dry run), categorisation, URL and model checks, planning, drift alerts, applying the plan through
the store, the post-audit canary check, the first-seen state, and one appended ledger block.
A requested dry run writes nothing at all; a dry run forced by the writer registry records its
findings in the ledger so the audit interval still advances. Audits of one agent are serialised by
a lock on its state file.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

import structlog

from dreamer.hermes.audit.age import entry_age
from dreamer.hermes.audit.apply import apply_plan
from dreamer.hermes.audit.canary import CANARY_MARKER, canary_lines, is_canary_entry
from dreamer.hermes.audit.classify import Classification, EntryClassifier, RuleBasedClassifier
from dreamer.hermes.audit.config_yaml import ConfigYamlError, read_model_name
from dreamer.hermes.audit.drift import drift_alerts
from dreamer.hermes.audit.ledger import (
    LedgerEntry,
    LedgerReadError,
    LedgerRecord,
    append_record,
    one_line,
    read_ledger,
)
from dreamer.hermes.audit.planner import (
    UNVERIFIED_MARK,
    ActionKind,
    Entry,
    Plan,
    PlanContext,
    PlannedAction,
    UnresolvedEntry,
    collect_entries,
    plan_audit,
    urls_to_verify,
)
from dreamer.hermes.audit.probe import HttpUrlProbe, UrlProbe, probe_urls
from dreamer.hermes.audit.report import ActionRecord, AuditReport, AuditStatus, Utilisation
from dreamer.hermes.audit.settings import AgentFiles, AuditSettings
from dreamer.hermes.audit.state import AuditState, AuditStateError, load_state, save_state, with_entries_seen
from dreamer.hermes.audit.writers import WriterRegistryError, is_registered_writer
from dreamer.hermes.memory.entries import dedupe, joined_length, parse_entries
from dreamer.hermes.memory.locking import exclusive_lock
from dreamer.hermes.memory.store import MemoryStore, StoreReadError

__all__ = ["NaiveTimestampError", "audit_agent", "needs_audit", "read_utilisation"]

log = structlog.get_logger("dreamer.hermes.audit")

_COUNT_NAMES = {
    ActionKind.DELETE: "deletions",
    ActionKind.MOVE: "moves",
    ActionKind.CORRECT: "corrections",
    ActionKind.MARK_UNVERIFIED: "unverified",
    ActionKind.CLEAR_UNVERIFIED: "reverified",
}


class NaiveTimestampError(ValueError):
    """`now` has no time zone; pass an aware datetime such as datetime.now(UTC)."""


@dataclass(frozen=True)
class _Files:
    memory_raw: str
    user_raw: str

    @property
    def memory_entries(self) -> list[str]:
        return dedupe(parse_entries(self.memory_raw))

    @property
    def user_entries(self) -> list[str]:
        return dedupe(parse_entries(self.user_raw))


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return ""
    except (OSError, UnicodeDecodeError) as exc:
        raise StoreReadError(f"cannot read {path}: {exc}; fix its permissions or encoding (UTF-8)") from exc


def _read_files(agent: AgentFiles) -> _Files:
    return _Files(_read_text(agent.memory_path), _read_text(agent.user_path))


def _utilisation(memory: Sequence[str], user: Sequence[str], settings: AuditSettings) -> Utilisation:
    return Utilisation(
        joined_length(memory), settings.max_memory_chars, joined_length(user), settings.max_user_chars
    )


def read_utilisation(agent: AgentFiles, settings: AuditSettings) -> Utilisation:
    """How full the agent's two memory files are now, by the store's measure."""
    files = _read_files(agent)
    return _utilisation(files.memory_entries, files.user_entries, settings)


def _require_aware(now: datetime) -> None:
    if now.tzinfo is None:
        raise NaiveTimestampError("now must carry a time zone, e.g. datetime.now(UTC)")


def needs_audit(agent: AgentFiles, settings: AuditSettings, now: datetime) -> tuple[bool, str]:
    """Whether an audit of `agent` is due at `now`, and why; reads only file sizes and the ledger."""
    _require_aware(now)
    if settings.force:
        return True, "audit requested"
    if not agent.memories_dir.is_dir():
        return False, f"memories directory {agent.memories_dir} does not exist"
    try:
        usage = read_utilisation(agent, settings)
        entries = read_ledger(agent.ledger_path)
    except (StoreReadError, LedgerReadError) as exc:
        # Due, so that the audit runs and reports the problem as an ERROR.
        return True, f"cannot read the agent's files: {exc}"
    if not entries:
        return True, "no audit recorded in the ledger yet"
    last = entries[-1]
    age = now - last.timestamp
    if age >= timedelta(days=settings.interval_days):
        return True, f"last audit {age.days} days ago (interval {settings.interval_days} days)"
    for name, pct, chars, key in (
        ("MEMORY.md", usage.memory_pct, usage.memory_chars, "memory_chars_after"),
        ("USER.md", usage.user_pct, usage.user_chars, "user_chars_after"),
    ):
        if pct > settings.threshold_pct and last.integer(key) != chars:
            return (
                True,
                f"{name} at {pct:.1f}% (above {settings.threshold_pct:g}%) and changed since the last audit",
            )
    return False, (
        f"last audit {age.days} days ago; MEMORY.md {usage.memory_pct:.1f}%, USER.md {usage.user_pct:.1f}%"
    )


def audit_agent(
    agent: AgentFiles,
    settings: AuditSettings,
    now: datetime,
    *,
    probe: UrlProbe | None = None,
    classifier: EntryClassifier | None = None,
) -> AuditReport:
    """Audit the memory of `agent` at `now` (see the module docstring); never raises for file problems."""
    _require_aware(now)
    if not agent.memories_dir.is_dir():
        return AuditReport(
            agent.name,
            AuditStatus.ERROR,
            now,
            reason=f"memory directory {agent.memories_dir} of agent {agent.name} not found; check the config",
        )
    run = _AuditRun(agent, settings, now, probe or HttpUrlProbe(settings.url_timeout_s), classifier)
    try:
        if settings.dry_run:
            return run.execute()
        with exclusive_lock(agent.state_path):
            return run.execute()
    except (StoreReadError, LedgerReadError, WriterRegistryError, OSError) as exc:
        log.error("hermes_audit_failed", agent=agent.name, error=str(exc))
        return AuditReport(agent.name, AuditStatus.ERROR, now, reason=str(exc))


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

    def execute(self) -> AuditReport:
        agent, settings, now = self.agent, self.settings, self.now
        files = _read_files(agent)
        before = _utilisation(files.memory_entries, files.user_entries, settings)
        canaries = {
            "MEMORY.md": bool(canary_lines(files.memory_raw)),
            "USER.md": bool(canary_lines(files.user_raw)),
        }
        if not all(canaries.values()):
            return self._critical(canaries, before)

        ledger = read_ledger(agent.ledger_path)
        previous = ledger[-1] if ledger else None
        skip = self._skip_reason(previous, before)
        if skip:
            return AuditReport(agent.name, AuditStatus.SKIP, now, reason=skip, utilisation_before=before)

        registered, registry_reason = is_registered_writer(agent.writers_path, settings.writer_name)
        state = self._load_state()
        entries = collect_entries(files.memory_entries, files.user_entries)
        classifications: dict[int, Classification] = {
            entry.id: self.classifier.classify(entry.text)
            for entry in entries
            if not is_canary_entry(entry.text)
        }
        urls = urls_to_verify(entries, classifications)
        context = PlanContext(
            settings=settings,
            ages={entry.id: entry_age(entry.text, state.first_seen_of(entry.text), now) for entry in entries},
            url_answers=probe_urls(urls, self.probe) if urls else {},
            configured_model=self._configured_model(),
            skill_available=self._skill_available(),
        )
        plan = plan_audit(entries, classifications, context)
        alerts = drift_alerts(
            previous,
            now=now,
            deletions=plan.count(ActionKind.DELETE),
            unverified_total=plan.unverified_total,
        )

        if settings.dry_run or not registered:
            reason = "dry run requested; nothing was changed" if settings.dry_run else registry_reason
            return self._dry_run(plan, entries, state, before, canaries, alerts, registered, reason)
        return self._apply(plan, entries, state, before, files, canaries, alerts)

    # --- phases -------------------------------------------------------------------------------

    def _critical(self, canaries: Mapping[str, bool], before: Utilisation) -> AuditReport:
        missing = [name for name, present in canaries.items() if not present]
        reason = (
            f"CANARY BREACH — memory integrity compromised: no line containing '{CANARY_MARKER}' in "
            f"{' and '.join(missing)}. Nothing was changed; restore the canary line, then rerun the audit."
        )
        log.error(
            "hermes_audit_canary_breach",
            agent=self.agent.name,
            memory_canary_intact=canaries["MEMORY.md"],
            user_canary_intact=canaries["USER.md"],
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

    def _skip_reason(self, previous: LedgerEntry | None, before: Utilisation) -> str:
        settings = self.settings
        if settings.force or previous is None:
            return ""
        age = self.now - previous.timestamp
        young = age < timedelta(days=settings.interval_days)
        roomy = before.memory_pct < settings.skip_below_pct and before.user_pct < settings.skip_below_pct
        if young and roomy:
            return (
                f"no audit needed: last audit {age.days} days ago and both files below "
                f"{settings.skip_below_pct:g}% "
                f"(MEMORY.md {before.memory_pct:.1f}%, USER.md {before.user_pct:.1f}%)"
            )
        return ""

    def _load_state(self) -> AuditState:
        try:
            return load_state(self.agent.state_path)
        except AuditStateError as exc:
            # Ages then count from today: nothing becomes old enough to delete because of this.
            self.notes.append(f"{exc}; entry ages without a date count from this audit")
            return AuditState()

    def _configured_model(self) -> str | None:
        if self.agent.config_yaml is None:
            return None
        try:
            return read_model_name(self.agent.config_yaml)
        except ConfigYamlError as exc:
            self.notes.append(f"model entries not checked: {exc}")
            return None

    def _skill_available(self) -> bool:
        skills_dir = self.agent.skills_dir
        if skills_dir is None:
            return False
        if not skills_dir.is_dir():
            self.notes.append(f"skills directory {skills_dir} does not exist; operating rules stay in place")
            return False
        return True

    def _dry_run(
        self,
        plan: Plan,
        entries: Sequence[Entry],
        state: AuditState,
        before: Utilisation,
        canaries: Mapping[str, bool],
        alerts: tuple[str, ...],
        registered: bool,
        reason: str,
    ) -> AuditReport:
        counts = _counts(plan.actions)
        records = tuple(_record(action, "planned") for action in plan.actions)
        ledger_updated = False
        if not self.settings.dry_run:
            # Not a registered writer: memory stays untouched, but the findings are recorded so the
            # interval advances and the operator sees why nothing was applied.
            self._save_state(with_entries_seen(state, [e.text for e in entries], self.now))
            unverified_now = sum(UNVERIFIED_MARK in entry.text for entry in entries)
            ledger_updated = self._append_ledger(
                _LedgerFacts(
                    status=AuditStatus.DRY_RUN,
                    mode="dry-run",
                    before=before,
                    after=before,
                    counts=counts,
                    unverified_total=unverified_now,
                    unresolved=len(plan.unresolved),
                    alerts=alerts,
                    canary_intact=True,
                    writer_registered=registered,
                    note=reason,
                    records=records,
                )
            )
        return AuditReport(
            self.agent.name,
            AuditStatus.DRY_RUN,
            self.now,
            reason=reason,
            dry_run=True,
            writer_registered=registered,
            utilisation_before=before,
            utilisation_after=_utilisation(plan.final_memory, plan.final_user, self.settings),
            counts=counts,
            actions=records,
            unresolved=plan.unresolved,
            drift_alerts=alerts,
            notes=tuple(self.notes),
            canaries=dict(canaries),
            canary_intact=True,
            ledger_updated=ledger_updated,
            summary=_summary(counts, len(plan.unresolved), alerts, planned=True),
        )

    def _apply(
        self,
        plan: Plan,
        entries: Sequence[Entry],
        state: AuditState,
        before: Utilisation,
        files: _Files,
        canaries: Mapping[str, bool],
        alerts: tuple[str, ...],
    ) -> AuditReport:
        settings = self.settings
        store = MemoryStore(
            self.agent.memories_dir,
            memory_char_limit=settings.max_memory_chars,
            user_char_limit=settings.max_user_chars,
        )
        outcomes = apply_plan(plan, entries, store, self.agent.rules_skill_path)

        after_files = _read_files(self.agent)
        after = _utilisation(after_files.memory_entries, after_files.user_entries, settings)
        canary_intact = canary_lines(after_files.memory_raw) == canary_lines(
            files.memory_raw
        ) and canary_lines(after_files.user_raw) == canary_lines(files.user_raw)
        if not canary_intact:
            alerts = (*alerts, "CRITICAL: Canary destroyed during audit — memory integrity compromised")
            log.error("hermes_audit_canary_changed", agent=self.agent.name)

        unresolved = (
            *plan.unresolved,
            *(
                UnresolvedEntry(o.action.source.filename, o.action.entry, f"{o.action.kind}: {o.detail}")
                for o in outcomes
                if not o.applied
            ),
        )
        applied = [o.action for o in outcomes if o.applied]
        counts = _counts(applied)
        records = tuple(_record(o.action, "applied" if o.applied else "skipped", o.detail) for o in outcomes)
        remaining = [*after_files.memory_entries, *after_files.user_entries]
        self._save_state(with_entries_seen(state, remaining, self.now))
        status = AuditStatus.COMPLETE if canary_intact else AuditStatus.CRITICAL
        ledger_updated = self._append_ledger(
            _LedgerFacts(
                status=status,
                mode="apply",
                before=before,
                after=after,
                counts=counts,
                unverified_total=sum(UNVERIFIED_MARK in text for text in remaining),
                unresolved=len(unresolved),
                alerts=alerts,
                canary_intact=canary_intact,
                writer_registered=True,
                note="",
                records=records,
            )
        )
        log.info(
            "hermes_audit_complete",
            agent=self.agent.name,
            status=str(status),
            memory_pct_before=before.memory_pct,
            memory_pct_after=after.memory_pct,
            user_pct_before=before.user_pct,
            user_pct_after=after.user_pct,
            unresolved=len(unresolved),
            drift_alerts=len(alerts),
            **counts,
        )
        return AuditReport(
            self.agent.name,
            status,
            self.now,
            reason="" if canary_intact else "a canary line changed during the audit",
            dry_run=False,
            writer_registered=True,
            utilisation_before=before,
            utilisation_after=after,
            counts=counts,
            actions=records,
            unresolved=unresolved,
            drift_alerts=alerts,
            notes=tuple(self.notes),
            canaries=dict(canaries),
            canary_intact=canary_intact,
            ledger_updated=ledger_updated,
            summary=_summary(counts, len(unresolved), alerts, planned=False),
        )

    def _save_state(self, state: AuditState) -> None:
        try:
            save_state(self.agent.state_path, state)
        except OSError as exc:
            # Only first-seen times are lost: undated entries then age from a later audit.
            self.notes.append(f"audit state not saved ({exc}); undated entries will age from a later audit")
            log.error("hermes_audit_state_not_saved", agent=self.agent.name, error=str(exc))

    def _append_ledger(self, facts: _LedgerFacts) -> bool:
        """Append the ledger block; False (with a note and an error log) if the ledger cannot be written."""
        try:
            self._write_ledger(facts)
        except OSError as exc:
            self.notes.append(
                f"ledger not updated: {exc}; fix the file's permissions, the audit is recorded only here"
            )
            log.error("hermes_audit_ledger_not_written", agent=self.agent.name, error=str(exc))
            return False
        return True

    def _write_ledger(self, facts: _LedgerFacts) -> None:
        counts = facts.counts
        append_record(
            self.agent.ledger_path,
            LedgerRecord(
                timestamp=self.now,
                status=str(facts.status),
                mode=facts.mode,
                memory_util_before=facts.before.memory_pct,
                memory_util_after=facts.after.memory_pct,
                user_util_before=facts.before.user_pct,
                user_util_after=facts.after.user_pct,
                memory_chars_after=facts.after.memory_chars,
                user_chars_after=facts.after.user_chars,
                deletions=counts["deletions"],
                moves=counts["moves"],
                corrections=counts["corrections"],
                unverified=counts["unverified"],
                reverified=counts["reverified"],
                unverified_total=facts.unverified_total,
                unresolved=facts.unresolved,
                canary_intact=facts.canary_intact,
                writer_registered=facts.writer_registered,
                note=facts.note,
                drift_alerts=facts.alerts,
                actions=tuple(_ledger_line(record) for record in facts.records),
            ),
        )


@dataclass(frozen=True)
class _LedgerFacts:
    status: AuditStatus
    mode: str
    before: Utilisation
    after: Utilisation
    counts: Mapping[str, int]
    unverified_total: int
    unresolved: int
    alerts: tuple[str, ...]
    canary_intact: bool
    writer_registered: bool
    note: str
    records: tuple[ActionRecord, ...]


def _counts(actions: Sequence[PlannedAction]) -> dict[str, int]:
    counts = dict.fromkeys(_COUNT_NAMES.values(), 0)
    for action in actions:
        counts[_COUNT_NAMES[action.kind]] += 1
    return counts


def _record(action: PlannedAction, outcome: str, detail: str = "") -> ActionRecord:
    return ActionRecord(
        kind=str(action.kind),
        file=action.source.filename,
        entry=action.entry,
        reason=action.reason,
        outcome=outcome,
        destination=action.destination,
        new_text=action.new_text,
        detail=detail,
    )


def _ledger_line(record: ActionRecord) -> str:
    where = record.file + (f" → {record.destination}" if record.destination else "")
    line = f"{record.kind} {where} [{record.outcome}]: {one_line(record.entry, 80)!r} ({record.reason})"
    return f"{line}; {record.detail}" if record.detail else line


def _summary(counts: Mapping[str, int], unresolved: int, alerts: Sequence[str], *, planned: bool) -> str:
    verbs = "would delete" if planned else "deleted"
    text = (
        f"{verbs.capitalize()} {counts['deletions']}, "
        f"{'would move' if planned else 'moved'} {counts['moves']}, "
        f"{'would correct' if planned else 'corrected'} {counts['corrections']}, "
        f"{'would mark' if planned else 'marked'} {counts['unverified']} [UNVERIFIED], "
        f"{'would clear' if planned else 'cleared'} {counts['reverified']} marks; "
        f"{unresolved} unresolved; {len(alerts)} drift alert(s)."
    )
    return text
