"""What one audit leaves behind besides the memory files: its ledger block and the first-seen state.

Neither write may fail the audit: a failure becomes a note in the report and an error in the log.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

import structlog

from dreamer.hermes.audit.ledger import LedgerRecord, append_record, one_line
from dreamer.hermes.audit.report import ActionRecord, AuditStatus, Utilisation
from dreamer.hermes.audit.settings import AgentFiles
from dreamer.hermes.audit.state import AuditState, save_state

__all__ = ["LedgerFacts", "append_ledger_block", "ledger_record", "save_audit_state"]

log = structlog.get_logger("dreamer.hermes.audit")


@dataclass(frozen=True)
class LedgerFacts:
    """What an audit found and did, as its ledger block records it."""

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
    warnings: tuple[str, ...] = ()
    temp_files_removed: tuple[str, ...] = ()
    canary_memory: str = ""
    canary_user: str = ""
    soul: str = ""


def ledger_record(now: datetime, facts: LedgerFacts) -> LedgerRecord:
    """The ledger block of an audit at `now`."""
    counts = facts.counts
    return LedgerRecord(
        timestamp=now,
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
        warnings=facts.warnings,
        temp_files_removed=facts.temp_files_removed,
        canary_memory=facts.canary_memory,
        canary_user=facts.canary_user,
        compressions=counts.get("compressions", 0),
        soul=facts.soul,
    )


def _ledger_line(record: ActionRecord) -> str:
    where = record.file + (f" → {record.destination}" if record.destination else "")
    line = f"{record.kind} {where} [{record.outcome}]: {one_line(record.entry, 80)!r} ({record.reason})"
    if record.kind == "COMPRESS" and record.new_text is not None:
        line += f" → {one_line(record.new_text, 160)!r}"
    return f"{line}; {record.detail}" if record.detail else line


def append_ledger_block(agent: AgentFiles, now: datetime, facts: LedgerFacts, notes: list[str]) -> bool:
    """Append the ledger block; False (with a note and an error log) if the ledger cannot be written."""
    try:
        append_record(agent.ledger_path, ledger_record(now, facts))
    except OSError as exc:
        notes.append(
            f"ledger not updated: {exc}; fix the file's permissions, the audit is recorded only here"
        )
        log.error("hermes_audit_ledger_not_written", agent=agent.name, error=str(exc))
        return False
    return True


def save_audit_state(agent: AgentFiles, state: AuditState, notes: list[str]) -> None:
    """Save the first-seen state; on failure add a note and log an error instead of raising."""
    try:
        save_state(agent.state_path, state)
    except OSError as exc:
        # Only first-seen times are lost: undated entries then age from a later audit.
        notes.append(f"audit state not saved ({exc}); undated entries will age from a later audit")
        log.error("hermes_audit_state_not_saved", agent=agent.name, error=str(exc))
