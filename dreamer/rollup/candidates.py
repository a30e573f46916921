"""Which ledger cards a new card must be compared with: the words to index, and the probe.

The dedup's cheap gate lets a ledger card through when its content words share a Jaccard of at
least the lowest lexical threshold with the new card's, or its residual words (outside protected
details) the conflict threshold. Instead of testing every card, the state file keeps an inverted
index (word -> card, with each card's word-set sizes) and counts, for a probe, how many words each
card shares with the new one: ``J(A, B) >= t`` needs ``|A & B| (1 + t) >= t (|A| + |B|)``, so the
cards it returns include every card the full gate would pass (and some more, which the gate then
rules out); verdicts do not change. Pure: sketches in, words and probes out.
"""

from __future__ import annotations

from dreamer.rollup.dedup import DedupThresholds
from dreamer.rollup.similarity import Sketch
from dreamer.state import WordProbe

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


def word_sizes(sketch: Sketch) -> tuple[int, int]:
    """How many content and residual words a card has (the index keeps them with its words)."""
    return len(sketch.content), len(sketch.residual)


def probe(sketch: Sketch, thresholds: DedupThresholds) -> WordProbe:
    """The question a new card with this sketch asks the index: every ledger card whose content
    Jaccard may reach the lowest lexical threshold, or whose residual Jaccard the conflict one."""
    lexical = min(thresholds.lexical_jaccard, thresholds.containment_jaccard, thresholds.shingle_jaccard)
    return WordProbe(
        content=tuple(sorted(sketch.content)) or (NO_CONTENT,),
        residual=tuple(sorted(sketch.residual)) or (NO_RESIDUAL,),
        content_size=len(sketch.content),
        residual_size=len(sketch.residual),
        content_threshold=lexical,
        residual_threshold=thresholds.conflict,
    )
