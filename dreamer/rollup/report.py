"""The report of one roll-up run: the outcome, its counts, and each card with its verdict and why.

Printed by ``dreamer rollup`` (``--json`` too), written in short to the run record, and read by the
benchmarks. Plain values only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from dreamer.outcomes import Outcome


@dataclass(frozen=True, slots=True)
class CardPlan:
    """A card and what the run decided about it."""

    text: str
    kind: str
    source_ids: tuple[str, ...]
    document_id: str
    verdict: str
    reason: str
    matched_id: str | None = None
    scores: Mapping[str, float] = field(default_factory=dict)
    changed: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "kind": self.kind,
            "source_ids": list(self.source_ids),
            "document_id": self.document_id,
            "verdict": self.verdict,
            "reason": self.reason,
            "matched_id": self.matched_id,
            "scores": dict(self.scores),
            "changed": list(self.changed),
        }


@dataclass
class RollupReport:
    """What one run did: its :class:`~dreamer.outcomes.Outcome`, why, its counts and, per card, the
    verdict and why."""

    profile: str
    run_id: str
    outcome: str = Outcome.FAILED
    reason: str = ""
    units_seen: int = 0
    units_selected: int = 0
    cards: int = 0
    promoted: int = 0
    reinforced: int = 0
    conflicts: int = 0
    reflect_attempts: int = 0
    summariser: str = ""
    #: The embedder the judge decided with: "none (lexical dedup only)", "local all-MiniLM-L6-v2", ...
    embedder: str = ""
    #: Ledger cards given a vector of the current model by this run (lazy re-embedding).
    reembedded: int = 0
    slot_wait_s: float = 0.0
    slot_held_s: float = 0.0
    duration_s: float = 0.0
    dry_run: bool = False
    watermark_from: str | None = None
    watermark_to: str | None = None
    plan: list[CardPlan] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        return {
            "units_seen": self.units_seen,
            "units_selected": self.units_selected,
            "cards": self.cards,
            "promoted": self.promoted,
            "reinforced": self.reinforced,
            "conflicts": self.conflicts,
            "reflect_attempts": self.reflect_attempts,
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "profile": self.profile,
            "run_id": self.run_id,
            "outcome": self.outcome,
            "reason": self.reason,
            **self.counts(),
            "summariser": self.summariser,
            "embedder": self.embedder,
            "reembedded": self.reembedded,
            "slot_wait_s": round(self.slot_wait_s, 3),
            "slot_held_s": round(self.slot_held_s, 3),
            "duration_s": round(self.duration_s, 3),
            "dry_run": self.dry_run,
            "watermark_from": self.watermark_from,
            "watermark_to": self.watermark_to,
            "plan": [p.to_json() for p in self.plan],
        }
