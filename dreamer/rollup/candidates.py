"""Which ledger cards a new card must be compared with: the words to index, the ranges of the index
to read, and the exact gate the cards read must pass.

The dedup's cheap gate lets a ledger card through when its content words share a Jaccard of at
least the lowest lexical threshold with the new card's, or its residual words (outside protected
details) the conflict threshold. The state file keeps an inverted index (word -> card, with each
card's word-set sizes, and how many cards hold each word); a new card reads, for each of its two
word sets, the cards of a length-aware prefix of its rarest words, and only those cards are checked
by the gate. Every card the full gate would let through is among them, so verdicts do not change.
Before a card found there is read, its gate row (its word-set sizes and word signature,
`dreamer.state.signature`) rules it out when even the words its signature may hold cannot pass the
gate (:class:`GateProbe`): a signature over-counts the shared words, never under-counts them, so a
card the gate lets through is never ruled out. Why and how: docs/design/dedup.md ("The word
index"). Pure: sketches in, words and ranges out.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from dreamer.rollup.dedup import DedupThresholds
from dreamer.rollup.dedup_rules import lexical_gate
from dreamer.rollup.similarity import Sketch, jaccard_of_counts
from dreamer.state import WordScan
from dreamer.state.signature import word_bit

# Stand-ins for an empty word set: the Jaccard of two empty sets is 1, so a card without content
# (or residual) words must find the ledger cards without any either.
NO_CONTENT = "\x00no-content"
NO_RESIDUAL = "\x00no-residual"

# Slack for the float arithmetic of the bounds, always towards reading more cards, never fewer.
_SLACK = 1e-9


def index_words(sketch: Sketch) -> frozenset[str]:
    """The words a ledger card is found by: its content and residual words (or the stand-ins)."""
    words = set(sketch.content | sketch.residual)
    if not sketch.content:
        words.add(NO_CONTENT)
    if not sketch.residual:
        words.add(NO_RESIDUAL)
    return frozenset(words)


def word_sizes(sketch: Sketch) -> tuple[int, int]:
    """How many content and residual words a card has (the index keeps them with its words)."""
    return len(sketch.content), len(sketch.residual)


def holding_share(thresholds: DedupThresholds) -> float:
    """The share of a new card's content words below which a stored card can neither say it
    (`said_by`) nor have its sentences weighed one by one (`sentence_holding`)."""
    return min(thresholds.said_by, thresholds.sentence_holding)


def passes_gate(new: Sketch, old: Sketch, thresholds: DedupThresholds) -> bool:
    """The dedup's cheap gate: whether ``old`` is close enough to ``new`` to be compared in full:
    their Jaccard may reach a lexical rule or the conflict rule, or ``old`` holds enough of
    ``new``'s words to say it, or one of its sentences to repeat it."""
    return _gate_by_counts(
        (len(new.content), len(old.content), len(new.content & old.content)),
        (len(new.residual), len(old.residual), len(new.residual & old.residual)),
        thresholds,
    )


def _gate_by_counts(
    content: tuple[int, int, int], residual: tuple[int, int, int], thresholds: DedupThresholds
) -> bool:
    """:func:`passes_gate` from the sizes of the two word sets of each side and the words they
    share (new, old, shared). It only grows with the shared counts, which is why a bound on
    them rules out what the gate would (:class:`GateProbe`)."""
    new_n, old_n, common = content
    return (
        jaccard_of_counts(common, new_n, old_n) >= lexical_gate(thresholds)
        or jaccard_of_counts(residual[2], residual[0], residual[1]) >= thresholds.conflict
        or (new_n > 0 and common / new_n >= holding_share(thresholds))
    )


@dataclass(frozen=True, slots=True)
class GateProbe:
    """A new card's side of the gate against stored cards known only by their gate rows: the
    signature bits of its content and residual words, each side as one mask and, for a bit two of
    its words share, how many words more that bit stands for."""

    content: tuple[int, int, tuple[tuple[int, int], ...]]
    residual: tuple[int, int, tuple[tuple[int, int], ...]]
    thresholds: DedupThresholds
    #: The gate's answer for each (sizes, bounds) met: a handful of distinct ones per new card.
    _answers: dict[tuple[int, int, int, int], bool] = field(default_factory=dict, compare=False)

    @classmethod
    def of(cls, sketch: Sketch, thresholds: DedupThresholds) -> GateProbe:
        return cls(_side(sketch.content), _side(sketch.residual), thresholds)

    def may_pass(self, content_n: int, residual_n: int, signature: int) -> bool:
        """Whether a stored card of ``content_n`` content and ``residual_n`` residual words whose
        words have ``signature`` may pass the gate: each side's shared words counted as the new
        card's words whose bit the signature has (at most the card's own count), which is never
        fewer than the words the two cards share."""
        content = min(_held(self.content, signature), content_n)
        residual = min(_held(self.residual, signature), residual_n)
        key = (content_n, residual_n, content, residual)
        answer = self._answers.get(key)
        if answer is None:
            answer = self._answers[key] = _gate_by_counts(
                (self.content[0], content_n, content),
                (self.residual[0], residual_n, residual),
                self.thresholds,
            )
        return answer

    def passing(self, found: Mapping[str, tuple[int, int, int] | None]) -> set[str]:
        """The ids of ``found`` (id -> gate row, None for a card without one) whose card may pass
        the gate: :meth:`may_pass` of each row, the loop kept tight, as it meets every card the word
        index names (about 13,000 a card at a million cards)."""
        _, content_mask, content_shared = self.content
        _, residual_mask, residual_shared = self.residual
        answers, may_pass = self._answers, self.may_pass
        out = set()
        for doc, row in found.items():
            if row is None:
                out.add(doc)
                continue
            content_n, residual_n, signature = row
            content = (signature & content_mask).bit_count()
            for bit, more in content_shared:
                if signature & bit:
                    content += more
            residual = (signature & residual_mask).bit_count()
            for bit, more in residual_shared:
                if signature & bit:
                    residual += more
            key = (
                content_n,
                residual_n,
                content if content < content_n else content_n,
                residual if residual < residual_n else residual_n,
            )
            answer = answers.get(key)
            if answer is None:
                answer = may_pass(content_n, residual_n, signature)
            if answer:
                out.add(doc)
        return out


def _side(words: frozenset[str]) -> tuple[int, int, tuple[tuple[int, int], ...]]:
    """One side of a probe: how many words, the mask of their bits, and each bit more than one of
    them has with the count of words past the first."""
    bits = Counter(word_bit(word) for word in words)
    mask = 0
    for bit in bits:
        mask |= bit
    return len(words), mask, tuple((bit, n - 1) for bit, n in sorted(bits.items()) if n > 1)


def _held(side: tuple[int, int, tuple[tuple[int, int], ...]], signature: int) -> int:
    """How many of a side's words have their bit in ``signature``."""
    _, mask, shared = side
    return (signature & mask).bit_count() + sum(more for bit, more in shared if signature & bit)


def probe_words(sketch: Sketch) -> frozenset[str]:
    """The words whose card counts order a new card's probe."""
    return index_words(sketch)


def side_scans(
    words: Iterable[str],
    threshold: float,
    side: Literal["content", "residual"],
    counts: Mapping[str, int],
) -> list[WordScan]:
    """The index ranges that hold every card whose ``side`` words reach a Jaccard of ``threshold``
    (> 0) with ``words`` (a new card's set, not empty).

    With ``n = |A|`` and a card ``B`` of ``L`` words, ``J(A, B) >= t`` needs ``t n <= L <= n / t``
    and ``|A & B| >= a(L) = ceil(t (n + L) / (1 + t))``; then ``B`` holds at least one of any
    ``n - a(L) + 1`` words of ``A``. So the word of rank ``i`` (rarest first, by ``counts``) is
    read only for the cards with ``L <= (n - i)(1 + t)/t - n``: the common words of a card are
    read for short cards only, or not at all.
    """
    ordered = sorted(set(words), key=lambda w: (counts.get(w, 0), w))
    n = len(ordered)
    shortest = max(0, math.ceil(threshold * n - _SLACK))
    longest = math.floor(n / threshold + _SLACK)
    scans = []
    for rank, word in enumerate(ordered):
        upto = min(longest, math.floor((n - rank) * (1 + threshold) / threshold - n + _SLACK))
        if upto < shortest:
            break
        scans.append(WordScan(word, side, shortest, upto))
    return scans


#: The longest word set a holding scan reads up to: longer than any card (the card cap is 400
#: characters), so the scan has no upper bound in practice.
_LONGEST = 10_000


def holding_scans(words: Iterable[str], share: float, counts: Mapping[str, int]) -> list[WordScan]:
    """The index ranges that hold every card with at least ``share`` (> 0) of ``words`` (a new
    card's content words, not empty), whatever its length: such a card holds ``a = ceil(share n)``
    of the ``n`` words, so at least one of the ``n - a + 1`` rarest, and has ``a`` words or more."""
    ordered = sorted(set(words), key=lambda w: (counts.get(w, 0), w))
    n = len(ordered)
    held = max(1, math.ceil(share * n - _SLACK))
    return [WordScan(word, "content", held, _LONGEST) for word in ordered[: n - held + 1]]


def scans(sketch: Sketch, thresholds: DedupThresholds, counts: Mapping[str, int]) -> list[WordScan] | None:
    """The index ranges a new card with this sketch reads: every ledger card whose content Jaccard
    may reach the lexical gate, or whose residual Jaccard the conflict threshold, is in one of
    them, and every card that holds enough of its words to say it or a sentence it repeats
    (:func:`holding_scans`). None when a threshold of 0 lets every card through (then every card
    is read)."""
    lexical, conflict = lexical_gate(thresholds), thresholds.conflict
    if lexical <= 0 or conflict <= 0 or holding_share(thresholds) <= 0:
        return None
    # An empty set reaches a Jaccard above 0 only with another empty set: the stand-in, 0 words.
    content = (
        side_scans(sketch.content, lexical, "content", counts)
        if sketch.content
        else [WordScan(NO_CONTENT, "content", 0, 0)]
    )
    residual = (
        side_scans(sketch.residual, conflict, "residual", counts)
        if sketch.residual
        else [WordScan(NO_RESIDUAL, "residual", 0, 0)]
    )
    holding = holding_scans(sketch.content, holding_share(thresholds), counts) if sketch.content else []
    return content + residual + holding
