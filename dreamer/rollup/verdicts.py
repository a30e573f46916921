"""From the nearest existing card of each outcome to the verdict, with a reason fit for a log line.

Pure. The judge (`dreamer.rollup.dedup`) keeps, while it weighs a card against the existing ones,
the most similar card that would make it a duplicate, a conflict, a detail-blocked repeat, an
unheld repeat, or only the nearest (`Outcomes`); this module decides between them in that order
and words the verdict. Kept apart from the weighing so that the wording of a reason (which the
run's report and logs show) can be read and changed without the rules that lead to it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from dreamer.rollup.dedup_values import Verdict, VerdictKind
from dreamer.rollup.similarity import Comparison

__all__ = ["Best", "Matched", "Outcomes", "describe", "duplicate_verdict", "format_scores", "scores_of"]


class Matched(Protocol):
    """What a verdict tells of the existing card it names."""

    @property
    def card_id(self) -> str: ...

    @property
    def origin(self) -> str:
        """Where the card comes from: "promoted", "earlier batch" or "upstream"."""
        ...

    @property
    def repeats(self) -> str | None:
        """For an earlier batch card that was itself a duplicate: the card it repeats."""
        ...

    @property
    def part(self) -> int | None:
        """For one sentence of a card: its place in the card, from 0; None for a whole card."""
        ...


def describe(existing: Matched) -> str:
    """How a reason names an existing card (where it comes from and its id), or one of its sentences."""
    card = f"{existing.origin} card {existing.card_id!r}"
    return card if existing.part is None else f"sentence {existing.part + 1} of {card}"


def duplicate_verdict(existing: Matched, verb: str, scores: dict[str, float], how: str = "") -> Verdict:
    """A duplicate of ``existing``, or of the card it repeats: a card is never a repeat of a repeat."""
    reason = f"{verb} {describe(existing)}"
    matched_id = existing.card_id
    if existing.repeats is not None:
        reason += f", which itself repeats {existing.repeats!r}"
        matched_id = existing.repeats
    if how:
        reason += f" ({how})"
    return Verdict(kind=VerdictKind.DUPLICATE, reason=reason, matched_id=matched_id, scores=scores)


def format_scores(scores: Mapping[str, float]) -> str:
    """The scores as a reason shows them, two decimals each."""
    return ", ".join(f"{name} {value:.2f}" for name, value in scores.items())


def scores_of(comparison: Comparison, semantic: float | None, name: str) -> dict[str, float]:
    """The comparison's scores, with the semantic one under ``name`` ("semantic" or "cosine")."""
    scores = comparison.scores()
    if semantic is not None:
        scores[name] = round(semantic, 3)
    return scores


@dataclass(slots=True)
class Best:
    """The most similar existing card seen so far for one outcome."""

    similarity: float = -1.0
    existing: Matched | None = None
    comparison: Comparison | None = None
    how: str = ""
    semantic: float | None = None

    def offer(
        self,
        similarity: float,
        existing: Matched,
        comparison: Comparison,
        how: str = "",
        semantic: float | None = None,
    ) -> None:
        if similarity > self.similarity:
            self.similarity, self.existing, self.comparison = similarity, existing, comparison
            self.how, self.semantic = how, semantic


@dataclass(slots=True)
class Outcomes:
    """The best existing card for each outcome a card can meet, over the existing cards weighed so far.

    A duplicate wins over a conflict, a conflict over a detail-blocked repeat, that over a repeat
    that would drop the card's words (``unheld``), that over a card only near in meaning
    (``related``: the embedder finds them near, the words do not make them one fact); the nearest
    card only explains a new card. Every outcome but the nearest names its card (``matched_id``).
    """

    duplicate: Best = field(default_factory=Best)
    conflict: Best = field(default_factory=Best)
    blocked: Best = field(default_factory=Best)
    nearest: Best = field(default_factory=Best)
    unheld: Best = field(default_factory=Best)
    related: Best = field(default_factory=Best)

    def decided(self, name: str) -> Verdict | None:
        """The verdict of the first outcome met, or None when the card only has a nearest card."""
        for word, best in (
            (_as_duplicate, self.duplicate),
            (_as_conflict, self.conflict),
            (_as_blocked, self.blocked),
            (_as_unheld, self.unheld),
            (_as_related, self.related),
        ):
            verdict = word(best, name)
            if verdict is not None:
                return verdict
        return None

    def nearest_verdict(self, name: str) -> Verdict:
        """A new card, with the nearest existing card named in its reason (if there is one)."""
        nearest = self.nearest
        if nearest.existing is not None and nearest.comparison is not None:
            scores = scores_of(nearest.comparison, nearest.semantic, name)
            return Verdict(
                kind=VerdictKind.NEW,
                reason=f"nearest is {describe(nearest.existing)} ({format_scores(scores)}), not a duplicate",
                scores=scores,
            )
        return Verdict(kind=VerdictKind.NEW, reason="no existing card shares a content word with it")


def _as_duplicate(duplicate: Best, name: str) -> Verdict | None:
    """A duplicate, its reason saying how it repeats ("rewords", "means the same as")."""
    if duplicate.existing is None or duplicate.comparison is None:
        return None
    scores = scores_of(duplicate.comparison, duplicate.semantic, name)
    verb, _, how = duplicate.how.partition("|")
    detail = f"{how}: {format_scores(scores)}" if how else format_scores(scores)
    return duplicate_verdict(duplicate.existing, verb, scores, detail)


def _as_conflict(conflict: Best, name: str) -> Verdict | None:
    """A conflict: the card supersedes the one it restates with a changed value."""
    if conflict.existing is None or conflict.comparison is None:
        return None
    scores = scores_of(conflict.comparison, conflict.semantic, name)
    changed = tuple(str(kind) for kind in conflict.comparison.changed)
    return Verdict(
        kind=VerdictKind.CONFLICT,
        reason=(
            f"restates {describe(conflict.existing)} about the same subject with a changed "
            f"{', '.join(changed)} ({format_scores(scores)}): supersedes it"
        ),
        matched_id=conflict.existing.repeats or conflict.existing.card_id,
        scores=scores,
        changed=changed,
    )


def _as_blocked(blocked: Best, name: str) -> Verdict | None:
    """A new card that would be a repeat but for a protected detail: the reason names the details."""
    if blocked.existing is None or blocked.comparison is None:
        return None
    scores = scores_of(blocked.comparison, blocked.semantic, name)
    changed = tuple(str(kind) for kind in blocked.comparison.changed)
    return Verdict(
        kind=VerdictKind.NEW,
        reason=(
            f"similar to {describe(blocked.existing)} ({format_scores(scores)}) but differs in "
            f"{', '.join(changed)}, so it is another fact: promoted beside it, linked"
        ),
        # Another instance of the same kind of fact (a second checkup): kept, and named as related.
        matched_id=blocked.existing.repeats or blocked.existing.card_id,
        scores=scores,
        changed=changed,
    )


def _as_unheld(unheld: Best, name: str) -> Verdict | None:
    """A new card near one that does not hold its words: promoted beside it, naming it as matched."""
    if unheld.comparison is None:
        return None
    why = f"which says only {unheld.comparison.containment:.0%} of its content words"
    return _linked(unheld, name, why, "promoted beside it, so no new fact is dropped")


def _as_related(related: Best, name: str) -> Verdict | None:
    """A new card near one that is another fact (another instance of an event, or near in meaning
    only): promoted beside it, naming it as matched, so the two are linked. ``how`` says why."""
    why = related.how or f"near by {name}, but not the same fact by its words"
    return _linked(related, name, why, "promoted beside it, linked")


def _linked(best: Best, name: str, why: str, then: str) -> Verdict | None:
    """A new card kept beside the existing card ``best`` names, which it names as matched."""
    if best.existing is None or best.comparison is None:
        return None
    scores = scores_of(best.comparison, best.semantic, name)
    return Verdict(
        kind=VerdictKind.NEW,
        reason=f"near {describe(best.existing)} ({format_scores(scores)}), {why}: {then}",
        matched_id=best.existing.repeats or best.existing.card_id,
        scores=scores,
    )
