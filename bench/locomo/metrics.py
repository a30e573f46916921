"""What the benchmark scores on a global bank: near-duplicate pairs, coverage of evidence, hit@5.

A card's provenance is the dialogue ids of its source units (see ``docs/benchmarks.md``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from bench._common import Embedder, similar_pair_indices
from bench.locomo.data import ANSWER_BEARING, Question
from dreamer.rollup import similarity
from dreamer.text import STOPWORDS

#: A dialogue id within its conversation: (conversation id, "D3:12").
Evidence = tuple[str, str]


@dataclass
class Card:
    """A card in a global bank, as the metrics see it."""

    document_id: str
    text: str
    profile: str
    source_ids: tuple[str, ...]


def provenance(
    source_ids: Iterable[str], unit_evidence: Mapping[str, frozenset[Evidence]]
) -> frozenset[Evidence]:
    """The dialogue ids of a card's source units."""
    found: set[Evidence] = set()
    for unit_id in source_ids:
        found |= unit_evidence.get(unit_id, frozenset())
    return frozenset(found)


def evidence_of(conversation: str, question: Question) -> frozenset[Evidence]:
    return frozenset((conversation, d) for d in question.evidence)


def coverage(
    questions: Sequence[tuple[str, Question]], covered: frozenset[Evidence] | set[Evidence]
) -> tuple[float, float]:
    """Share of non-adversarial questions with (any, all) of their evidence in ``covered``."""
    scored = [(c, q) for c, q in questions if not q.adversarial and q.evidence]
    if not scored:
        return 0.0, 0.0
    any_hits = sum(1 for c, q in scored if evidence_of(c, q) & covered)
    all_hits = sum(1 for c, q in scored if evidence_of(c, q) <= covered)
    return any_hits / len(scored), all_hits / len(scored)


def near_duplicate_pairs(cards: Sequence[Card], embedder: Embedder, threshold: float) -> int:
    """Pairs of cards of the same profile at cosine ≥ ``threshold``."""
    return len(near_duplicate_texts(cards, embedder, threshold))


def near_duplicate_texts(
    cards: Sequence[Card], embedder: Embedder, threshold: float
) -> list[tuple[str, str]]:
    """The texts of each pair of cards of the same profile at cosine ≥ ``threshold``, older first."""
    by_profile: dict[str, list[str]] = {}
    for card in cards:
        by_profile.setdefault(card.profile, []).append(card.text)
    pairs: list[tuple[str, str]] = []
    for texts in by_profile.values():
        pairs += [(texts[i], texts[j]) for i, j in similar_pair_indices(embedder.embed(texts), threshold)]
    return pairs


def differs_in_detail(older: str, newer: str) -> bool:
    """Whether Dreamer's dedup sees a protected detail (number, date, role, negation, name...) change.

    Used only to break the near-duplicate count down: by Dreamer's own rule such a pair states two
    facts, whatever the embedding says. It is Dreamer's judgement, so it is reported beside the
    count, never instead of it.
    """
    return bool(similarity.compare(similarity.profile_text(newer), similarity.profile_text(older)).changed)


def per_100(count: int, cards: int) -> float:
    return 100.0 * count / cards if cards else 0.0


def is_hit(ranked: Sequence[frozenset[Evidence]], evidence: frozenset[Evidence], k: int = 5) -> bool:
    """Whether any of the top ``k`` results holds any of the evidence."""
    return any(found & evidence for found in ranked[:k])


_ANSWER_WORD = re.compile(r"[^\W_]+")


def answer_words(text: str) -> frozenset[str]:
    """The content words of an answer or a card: lowercased words, stopwords left out.

    Plain words, not Dreamer's normalisation (no stemming, no protected details), so the measure
    does not share Dreamer's blind spots.
    """
    return frozenset(w for w in _ANSWER_WORD.findall(text.casefold()) if w not in STOPWORDS)


def answer_bearing(question: Question) -> bool:
    """Whether a question counts for answer-bearing hit@5: category 1 or 4, with answer words."""
    return question.category in ANSWER_BEARING and bool(answer_words(question.answer))


def bears_answer(texts: Sequence[str], answer: str, share: float = 0.5) -> bool:
    """Whether the texts together hold at least ``share`` of the answer's content words."""
    wanted = answer_words(answer)
    if not wanted:
        return False
    held = set().union(*(answer_words(t) for t in texts)) if texts else set()
    return len(wanted & held) >= share * len(wanted)
