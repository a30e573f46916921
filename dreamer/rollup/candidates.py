"""Which ledger cards a new card must be compared with: the words to index and to probe.

The dedup's cheap gate lets a ledger card through when its content words share a Jaccard of at
least the lowest lexical threshold with the new card's, or its residual words (outside protected
details) the conflict threshold. Instead of testing every card, the state file keeps an inverted
index (word -> card) and a run probes it with a *prefix filter*: if ``J(A, B) >= t`` then
``|A & B| >= ceil(t * |A|)``, so B holds at least one of A's ``|A| - ceil(t * |A|) + 1`` rarest
words. Probing those words finds every card the full gate would pass (and some more, which the
gate then rules out), so verdicts do not change. Pure: sketches and word counts in, words out.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

from dreamer.rollup.dedup import DedupThresholds
from dreamer.rollup.similarity import Sketch

# Stand-ins for an empty word set: the Jaccard of two empty sets is 1, so a card without content
# (or residual) words must find the ledger cards without any either.
NO_CONTENT = "\x00no-content"
NO_RESIDUAL = "\x00no-residual"


def index_words(sketch: Sketch) -> frozenset[str]:
    """The words a ledger card is found by: its content and residual words (or the stand-ins)."""
    words = set(sketch.content | sketch.residual)
    if not sketch.content:
        words.add(NO_CONTENT)
    if not sketch.residual:
        words.add(NO_RESIDUAL)
    return frozenset(words)


def _prefix(words: frozenset[str], threshold: float, counts: Mapping[str, int]) -> list[str]:
    """The rarest ``|A| - ceil(t |A|) + 1`` words of ``words`` (ties broken by the word)."""
    if threshold <= 0:
        return sorted(words)  # every card passes a zero threshold: probe everything it has
    needed = math.ceil(threshold * len(words) - 1e-9)
    size = len(words) - needed + 1
    return sorted(words, key=lambda w: (counts.get(w, 0), w))[: max(size, 0)]


def probe_words(sketch: Sketch, counts: Mapping[str, int], thresholds: DedupThresholds) -> set[str]:
    """The words whose cards include every ledger card the dedup gate would let through for a card
    with this sketch; ``counts`` (word -> cards holding it) only orders them, rarest first."""
    lexical = min(thresholds.lexical_jaccard, thresholds.containment_jaccard, thresholds.shingle_jaccard)
    probes: set[str] = set()
    if sketch.content:
        probes.update(_prefix(sketch.content, lexical, counts))
    else:
        probes.add(NO_CONTENT)
    if sketch.residual:
        probes.update(_prefix(sketch.residual, thresholds.conflict, counts))
    else:
        probes.add(NO_RESIDUAL)
    return probes


def words_to_count(sketches: Iterable[Sketch]) -> set[str]:
    """Every word whose card count the probes of these sketches need."""
    words: set[str] = set()
    for sketch in sketches:
        words |= sketch.content | sketch.residual
    return words
