"""When two texts count as the same card: the dedup thresholds and the two rules built on them.

Pure. The thresholds are measured (docs/design/dedup.md); the lexical rule and the conflict rule
read a `Comparison` (`dreamer.rollup.similarity`) against them. They live apart from the judge
(`dreamer.rollup.dedup`) because grounding and the extractive summariser apply the same rules to
their own pairs of texts, and must agree with the judge about what a repeat or a conflict is.
"""

from __future__ import annotations

from dataclasses import dataclass

from dreamer.details import VALUE_DETAILS, Detail
from dreamer.rollup.similarity import Comparison

__all__ = ["DedupThresholds", "InvalidThresholdsError", "is_conflict", "lexical_duplicate", "lexical_gate"]


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
    #: Share of the new card's content words a stored text must say, with every protected detail
    #: of the new card, its names and negations and no role swapped (`similarity.covered_by`),
    #: for the new card to repeat it whatever their overlap: the stored text tells the new fact
    #: and more (a fuller telling of it, or one sentence of it among others).
    said_by: float = 1.0
    #: Content-word Jaccard at or above which two tellings of one stance are duplicates: a word of
    #: one stance family in both (gratitude, support: `similarity.STANCE_FAMILIES`), the same
    #: subject, no protected detail changed and `reinforce_containment` of the new card's words in
    #: the stored card (`dedup`). On the labelled pairs 0.5 adds 7 true duplicates and no false one
    #: on the lexical route, 0.4 one false one and no true one (docs/benchmarks.md, section 6).
    stance_jaccard: float = 0.5
    #: Share of the new card's content words a stored card of several sentences must hold for its
    #: sentences to be weighed one by one (a sentence repeating the new card holds most of its words
    #: too). Above `reinforce_containment`: the word index reads every card holding it whatever its
    #: length, and at 0.6 two words of a three-word card let in every card sharing two common words
    #: (bench.scale: 119,152 gate passers at 100k synthetic cards instead of 2,504).
    sentence_holding: float = 0.8

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
            "said_by",
            "sentence_holding",
            "stance_jaccard",
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


def lexical_gate(thresholds: DedupThresholds) -> float:
    """The content-word Jaccard below which no lexical rule, the stance rule included, can call
    two cards the same (the cheap gate of the judge and of the word index)."""
    return min(
        thresholds.lexical_jaccard,
        thresholds.containment_jaccard,
        thresholds.shingle_jaccard,
        thresholds.stance_jaccard,
    )


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
