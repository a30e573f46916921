"""The result of auditing one agent, as a value and as JSON.

Status is one of COMPLETE (changes applied), DRY_RUN (planned only: requested, or Dreamer is not a
registered writer), SKIP (no audit due), CRITICAL (a canary is missing; nothing changed) and ERROR
(the agent's files could not be read). Counts use the contract's names: deletions, moves,
corrections, unverified (marks added) and reverified (marks cleared); for a dry run they count
planned actions, otherwise applied ones. An audit that compressed by an LLM reflect also counts its
tokens, under the roll-up run record's names: ``llm_calls``, ``llm_calls_estimated`` (usage the server
did not report, estimated), ``llm_prompt_tokens``, ``llm_completion_tokens`` and ``llm_tokens``; the
daemon's audit run record keeps them, so the daily token total counts them too.

`warnings` are about the files rather than the audit: a file still over its limit after the audit
(or, for a dry run, after the planned actions) leaves the status COMPLETE or DRY_RUN, since the
audit did all it could, and adds a warning the CLI, the daemon's log and the ledger show.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from dreamer.hermes.audit.planner import ActionKind, PlannedAction, UnresolvedEntry

__all__ = [
    "ActionRecord",
    "AuditReport",
    "AuditStatus",
    "Utilisation",
    "action_record",
    "count_actions",
    "over_limit_warnings",
    "summary_line",
]

_COUNT_NAMES = {
    ActionKind.DELETE: "deletions",
    ActionKind.MOVE: "moves",
    ActionKind.CORRECT: "corrections",
    ActionKind.MARK_UNVERIFIED: "unverified",
    ActionKind.CLEAR_UNVERIFIED: "reverified",
    ActionKind.COMPRESS: "compressions",
}


class AuditStatus(StrEnum):
    """How an audit ended."""

    COMPLETE = "COMPLETE"
    DRY_RUN = "DRY_RUN"
    SKIP = "SKIP"
    CRITICAL = "CRITICAL"
    ERROR = "ERROR"


@dataclass(frozen=True)
class Utilisation:
    """Characters used and allowed in both memory files."""

    memory_chars: int
    memory_limit: int
    user_chars: int
    user_limit: int

    @property
    def memory_pct(self) -> float:
        """MEMORY.md usage in percent, one decimal."""
        return round(self.memory_chars / self.memory_limit * 100, 1)

    @property
    def user_pct(self) -> float:
        """USER.md usage in percent, one decimal."""
        return round(self.user_chars / self.user_limit * 100, 1)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "memory_pct": self.memory_pct,
            "memory_chars": self.memory_chars,
            "memory_limit": self.memory_limit,
            "user_pct": self.user_pct,
            "user_chars": self.user_chars,
            "user_limit": self.user_limit,
        }


@dataclass(frozen=True)
class ActionRecord:
    """One action of the audit and what became of it (planned, applied or skipped)."""

    kind: str
    file: str
    entry: str
    reason: str
    outcome: str
    destination: str | None = None
    new_text: str | None = None
    detail: str = ""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        data: dict[str, Any] = {
            "kind": self.kind,
            "file": self.file,
            "entry": self.entry,
            "reason": self.reason,
            "outcome": self.outcome,
        }
        if self.destination is not None:
            data["destination"] = self.destination
        if self.new_text is not None:
            data["new_text"] = self.new_text
        if self.detail:
            data["detail"] = self.detail
        return data


@dataclass(frozen=True)
class AuditReport:
    """Everything one audit of one agent found and did."""

    agent: str
    status: AuditStatus
    at: datetime
    reason: str = ""
    dry_run: bool = False
    writer_registered: bool | None = None
    utilisation_before: Utilisation | None = None
    utilisation_after: Utilisation | None = None
    counts: dict[str, int] = field(default_factory=dict)
    actions: tuple[ActionRecord, ...] = ()
    unresolved: tuple[UnresolvedEntry, ...] = ()
    drift_alerts: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    canaries: dict[str, bool] = field(default_factory=dict)
    canary_intact: bool | None = None
    ledger_updated: bool = False
    summary: str = ""
    warnings: tuple[str, ...] = ()
    temp_files_removed: tuple[str, ...] = ()
    #: The new canary fingerprints (MEMORY.md/USER.md) when this audit rotated the canaries.
    canary_rotation: str = ""
    #: SOUL.md: its path, state (fresh, stale, missing, unreadable, not configured) and why.
    soul: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "agent": self.agent,
            "status": str(self.status),
            "at": self.at.isoformat(timespec="seconds"),
            "reason": self.reason,
            "dry_run": self.dry_run,
            "writer_registered": self.writer_registered,
            "utilisation_before": self.utilisation_before.to_dict() if self.utilisation_before else None,
            "utilisation_after": self.utilisation_after.to_dict() if self.utilisation_after else None,
            "counts": dict(self.counts),
            "actions": [action.to_dict() for action in self.actions],
            "unresolved": [
                {"file": item.file, "entry": item.entry, "reason": item.reason} for item in self.unresolved
            ],
            "drift_alerts": list(self.drift_alerts),
            "notes": list(self.notes),
            "canaries": dict(self.canaries),
            "canary_intact": self.canary_intact,
            "ledger_updated": self.ledger_updated,
            "summary": self.summary,
            "warnings": list(self.warnings),
            "temp_files_removed": list(self.temp_files_removed),
            "canary_rotation": self.canary_rotation or None,
            "soul": self.soul,
        }

    def to_json(self, *, indent: int | None = 2) -> str:
        """The report as JSON text (UTF-8 characters kept as they are)."""
        return json.dumps(self.to_dict(), ensure_ascii=False, indent=indent)


def count_actions(actions: Sequence[PlannedAction]) -> dict[str, int]:
    """How many actions of each kind, under the contract's count names (every name present)."""
    counts = dict.fromkeys(_COUNT_NAMES.values(), 0)
    for action in actions:
        counts[_COUNT_NAMES[action.kind]] += 1
    return counts


def over_limit_warnings(after: Utilisation, *, planned: bool) -> tuple[str, ...]:
    """One warning per file that `after` leaves over its limit; `planned` words it for a dry run."""
    state = "would still be over its limit after this audit" if planned else "is still over its limit"
    files = (
        ("MEMORY.md", after.memory_chars, after.memory_limit, after.memory_pct),
        ("USER.md", after.user_chars, after.user_limit, after.user_pct),
    )
    return tuple(
        f"{name} {state}: {chars:,}/{limit:,} chars ({pct}%); remove or shorten entries by hand, "
        f"Hermes refuses every add until it is below {limit:,}"
        for name, chars, limit, pct in files
        if chars > limit
    )


def action_record(action: PlannedAction, outcome: str, detail: str = "") -> ActionRecord:
    """The report's record of `action` and its outcome (planned, applied or skipped)."""
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


def summary_line(counts: Mapping[str, int], unresolved: int, alerts: Sequence[str], *, planned: bool) -> str:
    """The report's one-sentence summary; `planned` words it as what a dry run would do."""
    verbs = "would delete" if planned else "deleted"
    text = (
        f"{verbs.capitalize()} {counts['deletions']}, "
        f"{'would move' if planned else 'moved'} {counts['moves']}, "
        f"{'would correct' if planned else 'corrected'} {counts['corrections']}, "
        f"{'would mark' if planned else 'marked'} {counts['unverified']} [UNVERIFIED], "
        f"{'would clear' if planned else 'cleared'} {counts['reverified']} marks, "
        f"{'would shorten' if planned else 'shortened'} {counts['compressions']}; "
        f"{unresolved} unresolved; {len(alerts)} drift alert(s)."
    )
    return text
