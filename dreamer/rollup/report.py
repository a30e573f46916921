"""The report of one roll-up run: the outcome, its counts, and each card with its verdict and why.

Printed by ``dreamer rollup`` (``--json`` too), written in short to the run record, and read by the
benchmarks. Plain values only.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Set
from dataclasses import dataclass, field
from typing import Any

from dreamer.llm.usage import TokenUsage
from dreamer.outcomes import Outcome
from dreamer.rollup.grounding import GroundedBatch, Rejection

#: The reason counted for a unit no card cites.
LEFT_OUT = "not cited by any card"


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
    #: Units seen that carry the ``rollup`` tag without being Dreamer's cards (an agent set it):
    #: rolled up like the others, counted so the tag's misuse is visible.
    units_tagged_rollup: int = 0
    units_selected: int = 0
    #: What became of each unit seen: cited by a promoted card, merged into an existing card,
    #: dropped as chatter, left out by the summariser, or pending for a later batch or run.
    units_promoted: int = 0
    units_merged: int = 0
    units_chatter: int = 0
    units_left_out: int = 0
    units_pending: int = 0
    batches: int = 0
    cards: int = 0
    #: Cards drafted extractively (or of a unit's own text) for units no summariser card held.
    cards_uncited: int = 0
    #: Summariser cards that held what they cited (grounding, `dreamer.rollup.grounding`).
    cards_accepted: int = 0
    #: Summariser cards rejected, by reason (`grounding.RejectReason` names).
    cards_rejected: dict[str, int] = field(default_factory=dict)
    #: Units a summariser card cited without holding them, carded again.
    units_recarded: int = 0
    #: Citations grounding removed (a card cited a unit it did not hold) and added (a card held a
    #: unit it did not cite).
    claims_dropped: int = 0
    claims_added: int = 0
    #: Each rejected card with its reason (shown by a dry run).
    rejections: list[Rejection] = field(default_factory=list)
    #: LLM tokens of the run's reflects and completions (`dreamer.llm.usage`); calls whose usage
    #: the server did not report are estimated, and counted in ``llm_calls_estimated``.
    llm_prompt_tokens: int = 0
    llm_completion_tokens: int = 0
    llm_calls: int = 0
    llm_calls_estimated: int = 0
    #: Model answers cut at their token cap, and answers that held no readable cards.
    llm_truncated: int = 0
    llm_unreadable: int = 0
    #: "run" or "day" when a token cap made later batches extractive; "" otherwise.
    budget_reached: str = ""
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
    #: Units dropped, by reason ("filler", "contact record", "not cited by any card").
    dropped: dict[str, int] = field(default_factory=dict)

    def count_chatter(self, reasons: Iterable[str]) -> None:
        """Count units dropped as chatter, by reason."""
        for reason in reasons:
            self.dropped[reason] = self.dropped.get(reason, 0) + 1
            self.units_chatter += 1

    def count_fates(self, summarised: Set[str], *, promoted: Set[str], merged: Set[str]) -> None:
        """Count what became of the units a batch summarised: a source of a promoted card, else of
        a card that reinforced an existing one, else cited by no card."""
        left_out = len(summarised - promoted - merged)
        self.units_promoted += len(summarised & promoted)
        self.units_merged += len((summarised & merged) - promoted)
        self.units_left_out += left_out
        if left_out:
            self.dropped[LEFT_OUT] = self.dropped.get(LEFT_OUT, 0) + left_out

    @property
    def llm_tokens(self) -> int:
        return self.llm_prompt_tokens + self.llm_completion_tokens

    def count_tokens(self, usage: TokenUsage) -> None:
        """Count one LLM-backed call's tokens."""
        self.llm_prompt_tokens += usage.prompt
        self.llm_completion_tokens += usage.completion
        self.llm_calls += 1
        self.llm_calls_estimated += usage.estimated

    def count_grounding(self, grounded: GroundedBatch) -> None:
        """Count what grounding made of a batch's summariser cards."""
        grounding = grounded.first
        self.cards_accepted += len(grounding.cards)
        self.cards_uncited += len(grounded.fallback)
        self.units_recarded += len(grounded.recarded)
        self.claims_dropped += grounding.claims_dropped
        self.claims_added += grounding.claims_added
        for rejection in grounding.rejected:
            name = rejection.reason.name.lower()
            self.cards_rejected[name] = self.cards_rejected.get(name, 0) + 1
        self.rejections.extend(grounding.rejected)

    def counts(self) -> dict[str, int]:
        return {
            "units_seen": self.units_seen,
            "units_tagged_rollup": self.units_tagged_rollup,
            "units_selected": self.units_selected,
            "units_promoted": self.units_promoted,
            "units_merged": self.units_merged,
            "units_chatter": self.units_chatter,
            "units_left_out": self.units_left_out,
            "units_pending": self.units_pending,
            "batches": self.batches,
            "cards": self.cards,
            "cards_uncited": self.cards_uncited,
            "cards_accepted": self.cards_accepted,
            "cards_rejected": sum(self.cards_rejected.values()),
            **{f"cards_rejected_{name}": n for name, n in sorted(self.cards_rejected.items())},
            "units_recarded": self.units_recarded,
            "claims_dropped": self.claims_dropped,
            "claims_added": self.claims_added,
            "llm_calls": self.llm_calls,
            "llm_calls_estimated": self.llm_calls_estimated,
            "llm_prompt_tokens": self.llm_prompt_tokens,
            "llm_completion_tokens": self.llm_completion_tokens,
            "llm_tokens": self.llm_tokens,
            "llm_truncated": self.llm_truncated,
            "llm_unreadable": self.llm_unreadable,
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
            "dropped": dict(self.dropped),
            "budget_reached": self.budget_reached,
            "rejected": dict(self.cards_rejected),
            "rejections": [r.to_json() for r in self.rejections],
            "plan": [p.to_json() for p in self.plan],
        }
