"""Duplicate, conflict or new: the verdict on each card before it is promoted.

Checks run cheapest first (exact text, then lexical overlap, then a semantic score: the cosine of
Dreamer's own embedder when the caller supplies one, else the backend's recall score on the upstream
candidates) and a duplicate found by any of them wins. Two texts that differ in a
protected detail (`dreamer.details`) are never duplicates; when such a pair is otherwise the
same statement about the same subject, the new card is a `conflict` and supersedes the old one.
Ledger cards are met by their stored `Sketch` (`dreamer.rollup.similarity`) first and analysed in
full only when it passes a Jaccard gate. Every verdict carries a reason fit for a log line.

Why the rules and thresholds are what they are: docs/design/dedup.md.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from dreamer.details import VALUE_DETAILS, Detail
from dreamer.rollup.similarity import (
    Comparison,
    Sketch,
    TextProfile,
    compare,
    compare_figures,
    content_shingles,
    jaccard_index,
    profile_text,
    sketch_of,
)

__all__ = [
    "BatchJudge",
    "CardText",
    "DedupThresholds",
    "InvalidThresholdsError",
    "SemanticSimilarity",
    "UpstreamCandidate",
    "Verdict",
    "VerdictKind",
    "is_conflict",
    "judge_batch",
    "lexical_duplicate",
]


# --- values in and out ----------------------------------------------------------------------------


class InvalidThresholdsError(ValueError):
    """A dedup threshold is outside its range; the message names the field and the allowed range."""


@dataclass(frozen=True, slots=True)
class DedupThresholds:
    """When two texts count as the same card; the defaults are measured (docs/design/dedup.md).

    >>> DedupThresholds(semantic=0.92).semantic
    0.92
    """

    #: Content-word Jaccard at or above which two texts are lexical duplicates.
    lexical_jaccard: float = 0.65
    #: Fraction of the new card's content words found in the existing card, for the subset rule ...
    containment: float = 1.0
    #: ... which also needs this much Jaccard, so a short card is not swallowed by any long one.
    containment_jaccard: float = 0.5
    #: Character 3-gram Jaccard of the content words for the typo rule ("musuem") ...
    shingle: float = 0.7
    #: ... which also needs this much content-word Jaccard.
    shingle_jaccard: float = 0.5
    #: Backend semantic score at or above which an upstream candidate may be a duplicate ...
    semantic: float = 0.90
    #: ... when the texts also share at least this content-word Jaccard (the lexical evidence).
    semantic_lexical_floor: float = 0.3
    #: Cosine of Dreamer's own embedder (`SemanticSimilarity`) at or above which two texts may be
    #: duplicates; it replaces the backend's score when the caller supplies one ...
    embedding: float = 0.90
    #: ... when the texts also share at least this content-word Jaccard (the lexical evidence).
    embedding_lexical_floor: float = 0.2
    #: Jaccard of the words outside protected details above which a changed detail is a conflict ...
    conflict: float = 0.75
    #: ... or above which it is one when the embedder's cosine reaches `embedding` (a reworded restatement).
    conflict_near: float = 0.5
    #: How many upstream candidates the caller should recall per card (the top k, never just one).
    upstream_top_k: int = 8
    #: Share of the new card's content words the existing card must say for the new card to
    #: reinforce it: a reinforcement keeps the old text, so the old text must hold the new fact
    #: (the share grounding asks of a card for each unit, `grounding.HOLD_SHARE`).
    reinforce_containment: float = 0.6

    def __post_init__(self) -> None:
        for name in (
            "lexical_jaccard",
            "containment",
            "containment_jaccard",
            "shingle",
            "shingle_jaccard",
            "semantic",
            "semantic_lexical_floor",
            "embedding",
            "embedding_lexical_floor",
            "conflict",
            "conflict_near",
            "reinforce_containment",
        ):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise InvalidThresholdsError(
                    f"dedup threshold {name}={value} is outside 0..1: use a fraction"
                )
        if self.upstream_top_k < 5:
            raise InvalidThresholdsError(
                f"upstream_top_k={self.upstream_top_k} is too small: recall at least 5 candidates, "
                "the nearest one is often a changed-detail variant rather than the duplicate"
            )


#: The cosine similarity of two texts by the embedder Dreamer decides with: `(new card's text,
#: existing card's text) -> cosine`, or None when one of the texts has no vector (that pair is
#: then judged as without an embedder). Called for each card and each card it is compared with, so
#: a caller that embeds keeps the vectors (one per text) rather than embedding in the call.
SemanticSimilarity = Callable[[str, str], float | None]


@dataclass(frozen=True, slots=True)
class CardText:
    """A card by id and text: one of the batch being judged, or one already promoted (the ledger)."""

    card_id: str
    text: str
    #: The card's stored sketch, if the caller has one (ledger cards); computed from `text` if None.
    sketch: Sketch | None = None


@dataclass(frozen=True, slots=True)
class UpstreamCandidate:
    """One result of a recall on the upstream bank for a card, with the backend's semantic score if any."""

    card_id: str
    text: str
    semantic_score: float | None = None


class VerdictKind(StrEnum):
    """What to do with a card: promote it (`new`, `conflict`) or skip it (`duplicate`)."""

    NEW = "new"
    DUPLICATE = "duplicate"
    CONFLICT = "conflict"


@dataclass(frozen=True, slots=True)
class Verdict:
    """The decision on one card, with a reason fit for a log line.

    `matched_id` is the existing card a duplicate repeats or a conflict supersedes; `changed` lists
    the protected details that differ from it.
    """

    kind: VerdictKind
    reason: str
    matched_id: str | None = None
    scores: dict[str, float] = field(default_factory=dict, hash=False)
    changed: tuple[str, ...] = ()


# --- the rules ------------------------------------------------------------------------------------


def lexical_duplicate(comparison: Comparison, thresholds: DedupThresholds) -> bool:
    """The lexical rule alone, protected details aside: enough word overlap to be the same statement."""
    if comparison.jaccard >= thresholds.lexical_jaccard:
        return True
    if (
        comparison.containment >= thresholds.containment
        and comparison.jaccard >= thresholds.containment_jaccard
    ):
        return True
    return comparison.shingle >= thresholds.shingle and comparison.jaccard >= thresholds.shingle_jaccard


def is_conflict(comparison: Comparison, thresholds: DedupThresholds, *, near: bool = False) -> bool:
    """A changed value (not an added or dropped one) in the same statement about the same subject.

    The same statement: the words outside protected details overlap by `conflict`, or by
    `conflict_near` when the embedder finds the texts near (`near`: a reworded restatement) and
    the change is a value, not a negation.
    """
    changed = set(comparison.changed)
    # A reworded text may add a "not" of its own ("... and not give up"): near, only values count.
    same_statement = comparison.residual_jaccard >= thresholds.conflict or (
        near and Detail.NEGATION not in changed and comparison.residual_jaccard >= thresholds.conflict_near
    )
    return (
        bool(changed)
        and changed <= VALUE_DETAILS
        and not changed & set(comparison.added)
        and comparison.same_subject
        and same_statement
    )


# --- judging a batch ------------------------------------------------------------------------------


class _Existing:
    """Something a card can repeat: a ledger card, an earlier card of the batch, or an upstream candidate.

    Known by its sketch; the full profile is computed on first use and kept.
    """

    __slots__ = (
        "_profile",
        "_same_text",
        "_shingles",
        "card_id",
        "origin",
        "repeats",
        "semantic_score",
        "sketch",
        "text",
    )

    card_id: str
    origin: str
    text: str
    sketch: Sketch
    semantic_score: float | None
    repeats: str | None
    _profile: TextProfile | None
    _same_text: _Existing | None
    _shingles: frozenset[str] | None

    def __init__(
        self,
        card_id: str,
        origin: str,
        text: str,
        *,
        profile: TextProfile | None = None,
        sketch: Sketch | None = None,
        same_text: _Existing | None = None,
        semantic_score: float | None = None,
        repeats: str | None = None,
    ) -> None:
        self.card_id = card_id
        self.origin = origin
        self.text = text
        self._profile = profile
        self._shingles = None
        #: Another entry with this very text, whose analysis this one shares.
        self._same_text = same_text
        if sketch is None:
            sketch = same_text.sketch if same_text is not None else sketch_of(self.profile)
        self.sketch = sketch
        self.semantic_score = semantic_score
        #: For an earlier batch card that was itself a duplicate: the card it repeats.
        self.repeats = repeats

    @property
    def profile(self) -> TextProfile:
        if self._profile is None:
            self._profile = (
                self._same_text.profile if self._same_text is not None else profile_text(self.text)
            )
        return self._profile

    @property
    def shingles(self) -> frozenset[str]:
        """The character shingles of the content words, without analysing the whole text."""
        if self._profile is not None:
            return self._profile.shingles
        if self._same_text is not None:
            return self._same_text.shingles
        if self._shingles is None:
            self._shingles = content_shingles(self.text)
        return self._shingles


def _describe(existing: _Existing) -> str:
    return f"{existing.origin} card {existing.card_id!r}"


def _duplicate(existing: _Existing, verb: str, scores: dict[str, float], how: str = "") -> Verdict:
    reason = f"{verb} {_describe(existing)}"
    matched_id = existing.card_id
    if existing.repeats is not None:
        reason += f", which itself repeats {existing.repeats!r}"
        matched_id = existing.repeats
    if how:
        reason += f" ({how})"
    return Verdict(kind=VerdictKind.DUPLICATE, reason=reason, matched_id=matched_id, scores=scores)


def _format_scores(scores: Mapping[str, float]) -> str:
    return ", ".join(f"{name} {value:.2f}" for name, value in scores.items())


def _scores(comparison: Comparison, semantic: float | None, name: str) -> dict[str, float]:
    scores = comparison.scores()
    if semantic is not None:
        scores[name] = round(semantic, 3)
    return scores


@dataclass(slots=True)
class _Best:
    """The most similar existing card seen so far for one outcome."""

    similarity: float = -1.0
    existing: _Existing | None = None
    comparison: Comparison | None = None
    how: str = ""
    semantic: float | None = None

    def offer(
        self,
        similarity: float,
        existing: _Existing,
        comparison: Comparison,
        how: str = "",
        semantic: float | None = None,
    ) -> None:
        if similarity > self.similarity:
            self.similarity, self.existing, self.comparison = similarity, existing, comparison
            self.how, self.semantic = how, semantic


@dataclass(frozen=True, slots=True)
class _SemanticRule:
    """Where the semantic signal comes from for one batch, and the thresholds that apply to it."""

    similarity: SemanticSimilarity | None
    threshold: float
    lexical_floor: float
    #: The name of the score in a verdict's scores and reason.
    name: str

    @classmethod
    def of(cls, similarity: SemanticSimilarity | None, thresholds: DedupThresholds) -> _SemanticRule:
        if similarity is None:
            return cls(None, thresholds.semantic, thresholds.semantic_lexical_floor, "semantic")
        return cls(similarity, thresholds.embedding, thresholds.embedding_lexical_floor, "cosine")

    def score(self, card: TextProfile, existing: _Existing) -> float | None:
        """The embedder's cosine when there is an embedder, else the backend's score (if any)."""
        if self.similarity is None:
            return existing.semantic_score
        cosine = self.similarity(card.text, existing.text)
        # NaN or an infinity is a broken vector, not a similarity: judge the pair without it.
        return cosine if cosine is not None and math.isfinite(cosine) else None


def _judge_one(
    card: TextProfile,
    exact_index: Mapping[str, _Existing],
    pool: Sequence[_Existing],
    thresholds: DedupThresholds,
    rule: _SemanticRule,
) -> Verdict:
    exact = exact_index.get(card.normalized)
    if exact is not None and not compare(card, exact.profile).changed:
        return _duplicate(exact, "same text, once normalised, as", {"exact": 1.0})

    duplicate, conflict, blocked, nearest, unheld = _Best(), _Best(), _Best(), _Best(), _Best()
    # Below every Jaccard gate a text can be neither duplicate nor conflict: skip the full comparison.
    lexical_gate = min(thresholds.lexical_jaccard, thresholds.containment_jaccard, thresholds.shingle_jaccard)
    residual = frozenset(card.details.residual_tokens)
    nearest_unscored: tuple[float, _Existing] | None = None
    for existing in pool:
        semantic = rule.score(card, existing)
        near = semantic is not None and semantic >= rule.threshold
        # A backend score is only given to the few upstream candidates: they are always compared.
        # An embedder scores every card, so a pair far apart in meaning faces the lexical gate.
        if semantic is None or (rule.similarity is not None and not near):
            jaccard = jaccard_index(card.content_set, existing.sketch.content)
            if (
                jaccard < lexical_gate
                and jaccard_index(residual, existing.sketch.residual) < thresholds.conflict
            ):
                if jaccard > 0 and (nearest_unscored is None or jaccard > nearest_unscored[0]):
                    nearest_unscored = (jaccard, existing)
                continue
        if not near:
            # Without the semantic route a pair is a duplicate, a conflict or a detail-blocked
            # repeat only when its figures pass a lexical rule or the conflict's residual Jaccard;
            # else it can only be the nearest card, whose figures need no analysis of its details.
            figures = compare_figures(card, existing.sketch, existing.shingles)
            if not lexical_duplicate(figures, thresholds) and figures.residual_jaccard < thresholds.conflict:
                nearest.offer(max(figures.jaccard, semantic or 0.0), existing, figures, semantic=semantic)
                continue
        comparison = compare(card, existing.profile)
        similarity = max(comparison.jaccard, semantic or 0.0)
        nearest.offer(similarity, existing, comparison, semantic=semantic)
        lexical = lexical_duplicate(comparison, thresholds)
        # A new card holding every word of the existing one and more says more: it is new.
        says_more = existing.sketch.content < card.content_set
        semantic_match = near and comparison.jaccard >= rule.lexical_floor and not says_more
        if comparison.changed:
            # A protected detail differs: never a duplicate, whatever the scores say.
            if is_conflict(comparison, thresholds, near=near and rule.similarity is not None):
                conflict.offer(similarity, existing, comparison, semantic=semantic)
            if lexical or semantic_match:
                blocked.offer(similarity, existing, comparison, semantic=semantic)
        elif (lexical or semantic_match) and comparison.containment < thresholds.reinforce_containment:
            # Near enough to be a duplicate, but the existing text would drop the new card's words.
            unheld.offer(similarity, existing, comparison, semantic=semantic)
        elif lexical and semantic_match:
            duplicate.offer(
                similarity, existing, comparison, f"rewords|the {rule.name} agrees", semantic=semantic
            )
        elif lexical:
            duplicate.offer(similarity, existing, comparison, "rewords|", semantic=semantic)
        elif semantic_match:
            duplicate.offer(
                similarity,
                existing,
                comparison,
                f"means the same as|by {rule.name}, with shared words",
                semantic=semantic,
            )

    if duplicate.existing is not None and duplicate.comparison is not None:
        scores = _scores(duplicate.comparison, duplicate.semantic, rule.name)
        verb, _, how = duplicate.how.partition("|")
        detail = f"{how}: {_format_scores(scores)}" if how else _format_scores(scores)
        return _duplicate(duplicate.existing, verb, scores, detail)
    if conflict.existing is not None and conflict.comparison is not None:
        scores = _scores(conflict.comparison, conflict.semantic, rule.name)
        changed = tuple(str(kind) for kind in conflict.comparison.changed)
        return Verdict(
            kind=VerdictKind.CONFLICT,
            reason=(
                f"restates {_describe(conflict.existing)} about the same subject with a changed "
                f"{', '.join(changed)} ({_format_scores(scores)}): supersedes it"
            ),
            matched_id=conflict.existing.repeats or conflict.existing.card_id,
            scores=scores,
            changed=changed,
        )
    if blocked.existing is not None and blocked.comparison is not None:
        scores = _scores(blocked.comparison, blocked.semantic, rule.name)
        changed = tuple(str(kind) for kind in blocked.comparison.changed)
        return Verdict(
            kind=VerdictKind.NEW,
            reason=(
                f"similar to {_describe(blocked.existing)} ({_format_scores(scores)}) but differs in "
                f"{', '.join(changed)}, so it is another fact"
            ),
            scores=scores,
            changed=changed,
        )
    if unheld.existing is not None and unheld.comparison is not None:
        scores = _scores(unheld.comparison, unheld.semantic, rule.name)
        return Verdict(
            kind=VerdictKind.NEW,
            reason=(
                f"near {_describe(unheld.existing)} ({_format_scores(scores)}), which says only "
                f"{unheld.comparison.containment:.0%} of its content words: promoted beside it, so "
                "no new fact is dropped"
            ),
            matched_id=unheld.existing.repeats or unheld.existing.card_id,
            scores=scores,
        )
    if nearest_unscored is not None and nearest_unscored[0] > nearest.similarity:
        unscored = nearest_unscored[1]
        nearest.offer(
            nearest_unscored[0],
            unscored,
            compare(card, unscored.profile),
            semantic=rule.score(card, unscored),
        )
    if nearest.existing is not None and nearest.comparison is not None:
        scores = _scores(nearest.comparison, nearest.semantic, rule.name)
        return Verdict(
            kind=VerdictKind.NEW,
            reason=f"nearest is {_describe(nearest.existing)} ({_format_scores(scores)}), not a duplicate",
            scores=scores,
        )
    return Verdict(kind=VerdictKind.NEW, reason="no existing card shares a content word with it")


def _upstream(candidate: UpstreamCandidate, same_text: _Existing | None) -> _Existing:
    # An upstream candidate is mostly one of our own cards: share its analysis when the text matches.
    return _Existing(
        candidate.card_id,
        "upstream",
        candidate.text,
        same_text=same_text,
        semantic_score=candidate.semantic_score,
    )


class BatchJudge:
    """Judges a batch's cards in order, each against the ledger cards handed in with it, the
    batch's earlier cards and its upstream candidates (see :func:`judge_batch`).

    A caller that reads each card's own ledger candidates, judges the card and lets them go holds
    one card's candidates at a time, never the batch's.
    """

    def __init__(
        self, thresholds: DedupThresholds | None = None, *, semantic: SemanticSimilarity | None = None
    ):
        self.limits = thresholds if thresholds is not None else DedupThresholds()
        self.rule = _SemanticRule.of(semantic, self.limits)
        self._earlier: list[_Existing] = []
        self._earlier_exact: dict[str, _Existing] = {}
        self._earlier_text: dict[str, _Existing] = {}

    def judge(
        self,
        card: CardText,
        ledger_cards: Sequence[CardText] | Sequence[_Existing],
        upstream_candidates: Sequence[UpstreamCandidate],
        profile: TextProfile | None = None,
    ) -> Verdict:
        """The verdict of the batch's next card; ``ledger_cards`` in ledger order. ``profile`` is
        the card's analysis when the caller made it already (``profile_text(card.text)``)."""
        ledger = [
            c if isinstance(c, _Existing) else _Existing(c.card_id, "promoted", c.text, sketch=c.sketch)
            for c in ledger_cards
        ]
        # Promoted cards come first in the index, so an exact repeat names the promoted card.
        exact_index: dict[str, _Existing] = {}
        by_text: dict[str, _Existing] = {}
        for existing in ledger:
            exact_index.setdefault(existing.sketch.normalized, existing)
            by_text.setdefault(existing.text, existing)
        for normalized, existing in self._earlier_exact.items():
            exact_index.setdefault(normalized, existing)
        for text, existing in self._earlier_text.items():
            by_text.setdefault(text, existing)
        upstream = [_upstream(candidate, by_text.get(candidate.text)) for candidate in upstream_candidates]
        if profile is None:
            profile = profile_text(card.text)
        verdict = _judge_one(
            profile, exact_index, [*ledger, *self._earlier, *upstream], self.limits, self.rule
        )
        repeats = verdict.matched_id if verdict.kind is VerdictKind.DUPLICATE else None
        this = _Existing(card.card_id, "earlier batch", card.text, profile=profile, repeats=repeats)
        self._earlier.append(this)
        if card.text not in by_text:
            self._earlier_text.setdefault(card.text, this)
        if profile.normalized not in exact_index:
            self._earlier_exact.setdefault(profile.normalized, this)
        return verdict


def judge_batch(
    cards: Sequence[CardText],
    ledger_cards: Sequence[CardText],
    upstream_candidates_by_card: Mapping[str, Sequence[UpstreamCandidate]]
    | Sequence[Sequence[UpstreamCandidate]],
    thresholds: DedupThresholds | None = None,
    *,
    semantic: SemanticSimilarity | None = None,
) -> list[Verdict]:
    """Judge each card in order against the ledger, the batch's earlier cards and its upstream candidates.

    `upstream_candidates_by_card` maps a card id to its recalled candidates, or is a sequence
    parallel to `cards`. The earlier card of the batch wins: a later repeat is a duplicate of it
    (or of whatever it repeats). Returns one verdict per card, in the order of `cards`. Every card
    meets every ledger card; the run's judge step gives each card its own (:class:`BatchJudge`).

    `semantic`, when given, is the embedder's cosine of two texts (`SemanticSimilarity`): it is
    the semantic signal against ledger cards, earlier cards and upstream candidates alike, and the
    backend's `semantic_score` is ignored; a duplicate by it needs `thresholds.embedding` and
    `thresholds.embedding_lexical_floor`. Without it, only upstream candidates with a backend score
    have a semantic route (`thresholds.semantic`).
    """
    judge = BatchJudge(thresholds, semantic=semantic)
    # One analysis of each ledger card, shared by every card.
    ledger = [_Existing(card.card_id, "promoted", card.text, sketch=card.sketch) for card in ledger_cards]
    verdicts: list[Verdict] = []
    for position, card in enumerate(cards):
        if isinstance(upstream_candidates_by_card, Mapping):
            candidates = upstream_candidates_by_card.get(card.card_id, ())
        else:
            candidates = (
                upstream_candidates_by_card[position] if position < len(upstream_candidates_by_card) else ()
            )
        verdicts.append(judge.judge(card, ledger, candidates))
    return verdicts
