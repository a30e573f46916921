"""Duplicate, conflict or new: the verdict on each card before it is promoted.

Checks run cheapest first (exact text, then lexical overlap, then a semantic score: the cosine of
Dreamer's own embedder when the caller supplies one, else the backend's recall score on the upstream
candidates) and a duplicate found by any of them wins. Two texts that differ in a
protected detail (`dreamer.details`) are never duplicates; when such a pair is otherwise the
same statement about the same subject, the new card is a `conflict` and supersedes the old one.
Ledger cards are met by their stored `Sketch` (`dreamer.rollup.similarity`) first and analysed in
full only when it passes a Jaccard gate. Every verdict carries a reason fit for a log line.

The thresholds and the lexical and conflict rules are in `dreamer.rollup.dedup_rules`, the values
in and out in `dreamer.rollup.dedup_values`, the wording of each verdict in
`dreamer.rollup.verdicts`; they are re-exported here. Why the rules and thresholds are what
they are: docs/design/dedup.md.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from dreamer.details import VALUE_DETAILS
from dreamer.rollup.cards import sentences
from dreamer.rollup.dedup_rules import (
    DedupThresholds,
    InvalidThresholdsError,
    is_conflict,
    lexical_duplicate,
    lexical_gate,
)
from dreamer.rollup.dedup_values import CardText, SemanticSimilarity, UpstreamCandidate, Verdict, VerdictKind
from dreamer.rollup.existing import Existing
from dreamer.rollup.similarity import (
    STANCE_FAMILIES,
    Comparison,
    TextProfile,
    compare,
    compare_figures,
    covered_by,
    jaccard_index,
    profile_text,
    same_doer,
    stance_topic,
)
from dreamer.rollup.verdicts import Outcomes, duplicate_verdict

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


# --- judging a batch ------------------------------------------------------------------------------


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

    def score(self, card: TextProfile, existing: Existing) -> float | None:
        """The embedder's cosine when there is an embedder, else the backend's score (if any)."""
        if self.similarity is None:
            return existing.semantic_score
        cosine = self.similarity(card.text, existing.text)
        # NaN or an infinity is a broken vector, not a similarity: judge the pair without it.
        return cosine if cosine is not None and math.isfinite(cosine) else None


def _judge_one(
    card: TextProfile,
    exact_index: Mapping[str, Existing],
    pool: Sequence[Existing],
    thresholds: DedupThresholds,
    rule: _SemanticRule,
) -> Verdict:
    """The verdict of one card: an exact repeat at once, else the pool weighed card by card."""
    exact = exact_index.get(card.normalized)
    if exact is not None and not compare(card, exact.profile).changed:
        return duplicate_verdict(exact, "same text, once normalised, as", {"exact": 1.0})
    judgement = _Judgement(card, thresholds, rule)
    for existing in pool:
        judgement.weigh(existing)
    return judgement.verdict()


#: Words that tell of another instance of an event ("another checkup", "won again"): a card with
#: one, near a stored card, is a later instance, not a repeat (the labelled pairs' recurring events).
RECURRENCE_WORDS = frozenset({"another", "again"})


class _Judgement:
    """One card weighed against existing cards, cheapest check first, keeping the best of each outcome.

    Most pairs are turned away by the lexical gate or judged on their figures (`compare_figures`):
    only a pair that could be a duplicate, a conflict or a detail-blocked repeat is compared in full.
    """

    __slots__ = (
        "card",
        "lexical_gate",
        "limits",
        "nearest_unscored",
        "outcomes",
        "residual",
        "rule",
        "sentences",
    )

    def __init__(
        self, card: TextProfile, thresholds: DedupThresholds, rule: _SemanticRule, *, whole: bool = True
    ) -> None:
        self.card = card
        self.limits = thresholds
        self.rule = rule
        self.outcomes = Outcomes()
        # Below every Jaccard gate a text can be neither duplicate nor conflict: skip the full comparison.
        self.lexical_gate = lexical_gate(thresholds)
        self.residual = frozenset(card.details.residual_tokens)
        #: The card sharing most content words among those the gate turned away (nearest, unscored).
        self.nearest_unscored: tuple[float, Existing] | None = None
        #: A card of several sentences: each sentence's analysis (it repeats a card that says each).
        said = sentences(card.text) if whole else []
        self.sentences = [profile_text(text) for text in said] if len(said) > 1 else []

    def weigh(self, existing: Existing) -> None:
        """Offer ``existing`` to the outcome it may be: as a whole, then (a card of several
        sentences that holds most of this card's words) sentence by sentence, as a new card may
        repeat one sentence of it; and, for a new card of several sentences, whether it says each."""
        self._weigh(existing)
        # The cheap check first: a stored card's sentences are analysed only when it may hold this card.
        if not self._may_hold(existing) or not (existing.parts or self.sentences):
            return
        for part in existing.parts:
            self._weigh(part)
        if self.sentences:
            self._weigh_sentences(existing)

    def _may_hold(self, existing: Existing) -> bool:
        """Whether ``existing`` holds enough of this card's content words for its sentences to be
        weighed one by one (`sentence_holding`; a sentence repeating this card, or restating it with
        a changed value, holds most of them). The word index finds every such card (`candidates`)."""
        content = self.card.content_set
        held = len(content & existing.sketch.content) / len(content) if content else 1.0
        return held >= self.limits.sentence_holding

    def _weigh_sentences(self, existing: Existing) -> None:
        """A new card of several sentences repeats ``existing`` when each of its sentences repeats
        it (the whole text or one of its sentences): every fact it tells is told there already."""
        matched = []
        for sentence in self.sentences:
            judgement = _Judgement(sentence, self.limits, self.rule, whole=False)
            judgement.weigh(existing)
            best = judgement.outcomes.duplicate
            if best.existing is None or judgement.outcomes.conflict.existing is not None:
                return
            matched.append(best)
        comparison = compare(self.card, existing.profile)
        if comparison.changed:
            return
        similarity = min(best.similarity for best in matched)
        self.outcomes.duplicate.offer(
            similarity,
            existing,
            comparison,
            f"says each sentence of|{len(matched)} sentences, each told there",
        )

    def _weigh(self, existing: Existing) -> None:
        """Offer ``existing`` to the outcome it may be, after the cheapest check that settles it."""
        semantic = self.rule.score(self.card, existing)
        near = semantic is not None and semantic >= self.rule.threshold
        # A backend score is only given to the few upstream candidates: they are always compared.
        # An embedder scores every card, so a pair far apart in meaning faces the lexical gate.
        if (semantic is None or (self.rule.similarity is not None and not near)) and self._turned_away(
            existing
        ):
            return
        if not near and self._only_nearest(existing, semantic):
            return
        self._classify(existing, compare(self.card, existing.profile), semantic, near)

    def _turned_away(self, existing: Existing) -> bool:
        """True when the pair is below every lexical gate and the conflict's residual one, judged by
        the stored sketch alone; the most word-sharing such card is kept for the nearest verdict."""
        jaccard = jaccard_index(self.card.content_set, existing.sketch.content)
        if (
            jaccard < self.lexical_gate
            and jaccard_index(self.residual, existing.sketch.residual) < self.limits.conflict
            and not self._said_in(existing)
        ):
            if jaccard > 0 and (self.nearest_unscored is None or jaccard > self.nearest_unscored[0]):
                self.nearest_unscored = (jaccard, existing)
            return True
        return False

    def _said_in(self, existing: Existing) -> bool:
        """Whether ``existing`` holds `said_by` of this card's content words (by its sketch)."""
        content = self.card.content_set
        return bool(content) and len(content & existing.sketch.content) / len(content) >= self.limits.said_by

    def _only_nearest(self, existing: Existing, semantic: float | None) -> bool:
        """True when, without the semantic route, the pair's figures pass no lexical rule nor the
        conflict's residual Jaccard: then it can only be the nearest card, offered as such without
        an analysis of its details."""
        figures = compare_figures(self.card, existing.sketch, existing.shingles)
        if (
            not lexical_duplicate(figures, self.limits)
            and not self._may_restate_stance(existing, figures.jaccard)
            and figures.residual_jaccard < self.limits.conflict
            and figures.containment < self.limits.said_by
        ):
            self.outcomes.nearest.offer(
                max(figures.jaccard, semantic or 0.0), existing, figures, semantic=semantic
            )
            return True
        return False

    def _classify(
        self, existing: Existing, comparison: Comparison, semantic: float | None, near: bool
    ) -> None:
        """Offer a fully compared pair to the nearest card and to the one outcome its scores and
        protected details make it."""
        thresholds, rule, found = self.limits, self.rule, self.outcomes
        similarity = max(comparison.jaccard, semantic or 0.0)
        found.nearest.offer(similarity, existing, comparison, semantic=semantic)
        lexical = lexical_duplicate(comparison, thresholds) or self._restates_stance(existing, comparison)
        # A new card holding every word of the existing one and more says more: it is new.
        says_more = existing.sketch.content < self.card.content_set
        semantic_match = near and comparison.jaccard >= rule.lexical_floor and not says_more
        recurs = bool(self.card.words & RECURRENCE_WORDS) and existing.origin != "earlier batch"
        if not recurs and self._told_fuller(existing, comparison, says_more):
            # The stored text says every word and detail of this card, maybe with a value or a
            # negation more ("... last Tuesday", "... and not stop dreaming"): it tells its fact.
            # Not a name more: "Sam got an A in maths" lost its "A" as a stopword.
            how = "is said more fully by|" if comparison.changed else "is said by|"
            found.duplicate.offer(similarity, existing, comparison, how, semantic=semantic)
        elif comparison.changed:
            # A protected detail differs: never a duplicate, whatever the scores say.
            if is_conflict(comparison, thresholds, near=near and rule.similarity is not None):
                found.conflict.offer(similarity, existing, comparison, semantic=semantic)
            if lexical or semantic_match:
                found.blocked.offer(similarity, existing, comparison, semantic=semantic)
        elif (lexical or semantic_match) and comparison.containment < thresholds.reinforce_containment:
            # Near enough to be a duplicate, but the existing text would drop the new card's words.
            found.unheld.offer(similarity, existing, comparison, semantic=semantic)
        elif recurs:
            # "Nate wins another tournament" told in a later session than a card like it: another
            # instance of the event, kept beside that card and linked, never merged into it.
            how = "but says it is another time (another, again)"
            found.related.offer(similarity, existing, comparison, how, semantic=semantic)
        elif lexical and semantic_match:
            found.duplicate.offer(
                similarity, existing, comparison, f"rewords|the {rule.name} agrees", semantic=semantic
            )
        elif lexical:
            found.duplicate.offer(similarity, existing, comparison, "rewords|", semantic=semantic)
        elif semantic_match:
            found.duplicate.offer(
                similarity,
                existing,
                comparison,
                f"means the same as|by {rule.name}, with shared words",
                semantic=semantic,
            )
        elif near and rule.similarity is not None:
            # The embedder finds them near, the words do not: another fact of the same kind, linked.
            found.related.offer(similarity, existing, comparison, semantic=semantic)

    def _may_restate_stance(self, existing: Existing, jaccard: float) -> bool:
        """Whether the pair may be two tellings of one stance, by the stored sketch: a word of one
        stance family in both (`similarity.STANCE_FAMILIES`) and `stance_jaccard` shared."""
        shared = self.card.content_set & existing.sketch.content
        return jaccard >= self.limits.stance_jaccard and not shared.isdisjoint(STANCE_FAMILIES)

    def _restates_stance(self, existing: Existing, comparison: Comparison) -> bool:
        """One stance told again in other words ("Gina encouraged Jon to stay motivated and
        believe in himself" / "Gina encouraged Jon to keep persevering and believing in himself"):
        a word of one stance family in both, the same subject, no protected detail changed,
        `stance_jaccard` of their content words shared and `reinforce_containment` of the new
        card's words in the stored one, which keeps its text. A new card that says what the stance
        is about must share a word of it: "Gina encourages Jon to sing" is not "... to dance"."""
        if not (
            self._may_restate_stance(existing, comparison.jaccard)
            and not comparison.changed
            and (comparison.same_subject or same_doer(self.card, existing.profile))
            and comparison.containment >= self.limits.reinforce_containment
        ):
            return False
        topic = stance_topic(self.card)
        return not topic or not topic.isdisjoint(existing.profile.content_set)

    def _told_fuller(self, existing: Existing, comparison: Comparison, says_more: bool) -> bool:
        """Whether ``existing`` says every content word and protected detail of this card, with its
        names and negations, and no role swapped (`similarity.covered_by` at `said_by`, and never
        below `reinforce_containment`: the stored text it reinforces keeps its own words); it may
        add values and negations of its own."""
        share = max(self.limits.said_by, self.limits.reinforce_containment)
        # covered_by is never above the containment; a name or a role more is another fact.
        if says_more or comparison.containment < share or not set(comparison.changed) <= VALUE_DETAILS:
            return False
        return (covered_by(self.card, existing.profile) or 0.0) >= share

    def verdict(self) -> Verdict:
        """The verdict once every existing card is weighed. A card the gate turned away is compared
        in full only here, and only when it would be the nearest: it explains a new card."""
        decided = self.outcomes.decided(self.rule.name)
        if decided is not None:
            return decided
        nearest, unscored = self.outcomes.nearest, self.nearest_unscored
        if unscored is not None and unscored[0] > nearest.similarity:
            nearest.offer(
                unscored[0],
                unscored[1],
                compare(self.card, unscored[1].profile),
                semantic=self.rule.score(self.card, unscored[1]),
            )
        return self.outcomes.nearest_verdict(self.rule.name)


def _upstream(candidate: UpstreamCandidate, same_text: Existing | None) -> Existing:
    # An upstream candidate is mostly one of our own cards: share its analysis when the text matches.
    return Existing(
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
        self._earlier: list[Existing] = []
        self._earlier_exact: dict[str, Existing] = {}
        self._earlier_text: dict[str, Existing] = {}

    def judge(
        self,
        card: CardText,
        ledger_cards: Sequence[CardText] | Sequence[Existing],
        upstream_candidates: Sequence[UpstreamCandidate],
        profile: TextProfile | None = None,
    ) -> Verdict:
        """The verdict of the batch's next card; ``ledger_cards`` in ledger order. ``profile`` is
        the card's analysis when the caller made it already (``profile_text(card.text)``)."""
        ledger = [
            c if isinstance(c, Existing) else Existing(c.card_id, "promoted", c.text, sketch=c.sketch)
            for c in ledger_cards
        ]
        # Promoted cards come first in the index, so an exact repeat names the promoted card.
        exact_index: dict[str, Existing] = {}
        by_text: dict[str, Existing] = {}
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
        this = Existing(card.card_id, "earlier batch", card.text, profile=profile, repeats=repeats)
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
    ledger = [Existing(card.card_id, "promoted", card.text, sketch=card.sketch) for card in ledger_cards]
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
