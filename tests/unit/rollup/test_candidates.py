"""The index ranges a new card reads (`candidates.scans`): every word set that reaches the gate's
Jaccard lies in one of them, whatever the word counts, and common words are read for short sets
only; every card holding enough of the new card's words lies in a holding range."""

from __future__ import annotations

import random

import pytest

from dreamer.rollup.candidates import (
    NO_CONTENT,
    NO_RESIDUAL,
    GateProbe,
    holding_scans,
    index_words,
    passes_gate,
    scans,
    side_scans,
    word_sizes,
)
from dreamer.rollup.dedup import DedupThresholds
from dreamer.rollup.similarity import Sketch, jaccard_index
from dreamer.state import WordScan
from dreamer.state.signature import word_bit, word_signature


def covered(found: list[WordScan], other: frozenset[str]) -> bool:
    return any(s.word in other and s.shortest <= len(other) <= s.longest for s in found)


@pytest.mark.parametrize("threshold", [0.5, 0.75, 0.3, 1.0, 0.01])
def test_every_set_reaching_the_threshold_is_in_a_range(threshold: float) -> None:
    """Random sets over a small vocabulary and near variants of them, random word counts: a set
    with a Jaccard of at least the threshold holds a scanned word, at a size inside its range."""
    rng = random.Random(int(threshold * 1000))
    vocabulary = [f"w{i}" for i in range(14)]
    reached = 0
    for _ in range(3000):
        a = frozenset(rng.sample(vocabulary, rng.randint(1, 12)))
        # Mostly a's words with a few dropped and a few added, so every threshold is reached often.
        kept = rng.sample(sorted(a), len(a) - rng.randint(0, min(3, len(a) - 1)))
        b = frozenset(kept + rng.sample(vocabulary, rng.randint(0, 3)))
        counts = {w: rng.choice([0, 1, 5, 1000]) for w in vocabulary}
        if jaccard_index(a, b) >= threshold:
            reached += 1
            assert covered(side_scans(a, threshold, "content", counts), b), (a, b, counts)
    assert reached > 100


def test_common_words_are_read_for_short_sets_only() -> None:
    """A 12-word set with 5 rare and 7 common words at 0.5: the rare words are read for every size
    that can pass (6 to 24), the first common ones only up to 9 and 6 words, the rest never."""
    rare = [f"r{i}" for i in range(5)]
    common = [f"c{i}" for i in range(7)]
    counts = {**{w: 3 for w in rare}, **{w: 100_000 for w in common}}
    found = side_scans([*rare, *common], 0.5, "content", counts)
    assert [(s.word, s.shortest, s.longest) for s in found] == [
        ("r0", 6, 24),
        ("r1", 6, 21),
        ("r2", 6, 18),
        ("r3", 6, 15),
        ("r4", 6, 12),
        ("c0", 6, 9),
        ("c1", 6, 6),
    ]


def test_empty_sets_read_their_stand_in_and_a_zero_threshold_reads_everything() -> None:
    """An empty word set matches only another empty one (its stand-in word, size 0); a threshold of
    0 passes every card, which no range can express."""
    empty = Sketch("", frozenset(), frozenset())
    found = scans(empty, DedupThresholds(), {})
    assert found == [WordScan(NO_CONTENT, "content", 0, 0), WordScan(NO_RESIDUAL, "residual", 0, 0)]
    loose = DedupThresholds(lexical_jaccard=0.0, containment_jaccard=0.0, shingle_jaccard=0.0)
    assert scans(Sketch("a", frozenset({"a"}), frozenset({"a"})), loose, {}) is None


@pytest.mark.parametrize("share", [0.6, 1.0, 0.3])
def test_every_card_holding_the_share_is_in_a_holding_range(share: float) -> None:
    """Random sets and longer sets holding most of their words, random word counts: a set that
    holds at least ``share`` of the new card's words is in a holding range, however long it is
    (its Jaccard with the new card may be far below every gate)."""
    rng = random.Random(int(share * 1000))
    vocabulary = [f"w{i}" for i in range(40)]
    reached = 0
    for _ in range(3000):
        a = frozenset(rng.sample(vocabulary, rng.randint(1, 10)))
        kept = rng.sample(sorted(a), len(a) - rng.randint(0, min(4, len(a) - 1)))
        b = frozenset(kept + rng.sample(vocabulary, rng.randint(0, 25)))
        counts = {w: rng.choice([0, 1, 5, 1000]) for w in vocabulary}
        if len(a & b) / len(a) >= share:
            reached += 1
            assert covered(holding_scans(a, share, counts), b), (a, b, counts)
    assert reached > 100


def test_a_long_card_holding_a_short_one_is_scanned_and_passes_the_gate() -> None:
    """A one-sentence card whose every word a three-sentence card holds: their Jaccard is below
    every gate, yet the holding range reads the long card and the gate lets it through."""
    short = Sketch(
        "s", frozenset({"sam", "adopt", "beagl", "max"}), frozenset({"sam", "adopt", "beagl", "max"})
    )
    words = {"sam", "adopt", "beagl", "max", "walk", "river", "volunt", "shelter", "weekend", "cook"}
    long = Sketch("l", frozenset(words), frozenset(words))
    assert jaccard_index(short.content, long.content) < 0.5
    found = scans(short, DedupThresholds(), {w: 1 for w in words})
    assert found is not None and covered(found, long.content)
    assert passes_gate(short, long, DedupThresholds())


def test_the_gate_opens_as_low_as_the_stance_rule() -> None:
    """A pair sharing a Jaccard of 1/3 is below every default rule; with `stance_jaccard` at 0.3
    the gate lets it through, so the index never hides a pair the stance rule would merge."""
    new = Sketch("a", frozenset({"gina", "support", "jon", "keep"}), frozenset({"jon", "keep"}))
    old = Sketch("b", frozenset({"gina", "support", "motivat", "stay"}), frozenset({"motivat", "stay"}))
    assert jaccard_index(new.content, old.content) == pytest.approx(1 / 3)
    assert not passes_gate(new, old, DedupThresholds())
    assert passes_gate(new, old, DedupThresholds(stance_jaccard=0.3))


def _probe_allows(new: Sketch, old: Sketch, thresholds: DedupThresholds) -> bool:
    """The gate row's verdict on ``old``, as the judge reads it: its sizes and signature only."""
    return GateProbe.of(new, thresholds).may_pass(*word_sizes(old), word_signature(index_words(old)))


@pytest.mark.parametrize(
    "thresholds",
    [
        DedupThresholds(),
        DedupThresholds(stance_jaccard=0.2, conflict=0.3),
        DedupThresholds(sentence_holding=0.3),
    ],
)
def test_a_gate_row_never_rules_out_a_card_the_gate_lets_through(thresholds: DedupThresholds) -> None:
    """Random pairs over a small vocabulary (so they share many words, and 63 bits collide), empty
    sides included: whatever the gate lets through, the signature bound lets through too; and it
    rules out most of the pairs the gate turns away, or it would save no read."""
    rng = random.Random(7)
    vocabulary = [f"w{i}" for i in range(40)]
    passed = ruled_out = turned_away = 0
    for _ in range(4000):

        def side(most: int) -> frozenset[str]:
            return frozenset(rng.sample(vocabulary, rng.randint(0, most)))

        new, old = Sketch("n", side(12), side(8)), Sketch("o", side(14), side(9))
        allowed = _probe_allows(new, old, thresholds)
        if passes_gate(new, old, thresholds):
            passed += 1
            assert allowed, (new, old)
        else:
            turned_away += 1
            ruled_out += not allowed
    assert passed > 100 and turned_away > 1000
    assert ruled_out > turned_away / 3


def test_two_words_of_the_new_card_on_one_bit_both_count() -> None:
    """Two words of a new card sharing a bit are two shared words when a stored card holds that bit:
    counting the bit once would rule out a card saying exactly the same two words."""
    first = "w0"
    second = next(f"w{i}" for i in range(1, 10_000) if word_bit(f"w{i}") == word_bit(first))
    card = Sketch("n", frozenset({first, second}), frozenset({first, second}))
    assert passes_gate(card, card, DedupThresholds())
    assert _probe_allows(card, card, DedupThresholds())


def test_a_card_sharing_one_word_of_ten_is_ruled_out_by_its_gate_row() -> None:
    new = Sketch("n", frozenset(f"new{i}" for i in range(10)), frozenset(f"new{i}" for i in range(6)))
    old = Sketch(
        "o", frozenset({"new0", *(f"old{i}" for i in range(9))}), frozenset(f"old{i}" for i in range(5))
    )
    assert not passes_gate(new, old, DedupThresholds())
    assert not _probe_allows(new, old, DedupThresholds())


def test_passing_is_may_pass_row_by_row() -> None:
    """The judge's loop over the word index's rows (`GateProbe.passing`) lets through exactly the
    rows `may_pass` does, and every card without a gate row; for new cards with words sharing a
    bit and without, over random rows (sizes past the shared counts and below them)."""
    rng = random.Random(11)
    vocabulary = [f"w{i}" for i in range(40)]
    kinds = set()
    for _ in range(300):
        new = Sketch(
            "n",
            frozenset(rng.sample(vocabulary, rng.randint(0, 12))),
            frozenset(rng.sample(vocabulary, rng.randint(0, 8))),
        )
        probe = GateProbe.of(new, DedupThresholds())
        kinds.add(bool(probe.content[2] or probe.residual[2]))
        found: dict[str, tuple[int, int, int] | None] = {
            f"d{i}": (rng.randint(0, 15), rng.randint(0, 10), rng.getrandbits(63)) for i in range(60)
        }
        found.update({f"none{i}": None for i in range(3)})
        expected = {d for d, row in found.items() if row is None or probe.may_pass(*row)}
        assert probe.passing(found) == expected
        assert {f"none{i}" for i in range(3)} <= expected
    assert kinds == {True, False}, "both kinds of probe must be met"
