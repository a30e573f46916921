"""Which ledger cards a new card must be compared with: the words to index, the ranges of the index
to read, and the exact gate the cards read must pass.

The dedup's cheap gate lets a ledger card through when its content words share a Jaccard of at
least the lowest lexical threshold with the new card's, or its residual words (outside protected
details) the conflict threshold. The state file keeps an inverted index (word -> card, with each
card's word-set sizes, and how many cards hold each word); a new card reads, for each of its two
word sets, the cards of a length-aware prefix of its rarest words, and only those cards are checked
by the gate. Every card the full gate would let through is among them, so verdicts do not change.
Why and how: docs/design/dedup.md ("The word index"). Pure: sketches in, words and ranges out.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Literal

from dreamer.rollup.dedup import DedupThresholds
from dreamer.rollup.dedup_rules import lexical_gate
from dreamer.rollup.similarity import Sketch, jaccard_index
from dreamer.state import WordScan

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
    common = len(new.content & old.content)
    return (
        jaccard_index(new.content, old.content) >= lexical_gate(thresholds)
        or jaccard_index(new.residual, old.residual) >= thresholds.conflict
        or (bool(new.content) and common / len(new.content) >= holding_share(thresholds))
    )


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
