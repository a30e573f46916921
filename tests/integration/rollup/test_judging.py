"""The word index finds every ledger card the dedup's full scan would: indexed verdicts equal full-scan
verdicts, on generated cards that share words, numbers, dates and hosts in every degree."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from dreamer.rollup import dedup
from dreamer.rollup.candidates import NO_CONTENT, index_words, probe_words, scans
from dreamer.rollup.judging import card_candidates, judge_against_ledger
from dreamer.rollup.similarity import jaccard_index, profile_text, sketch_of
from dreamer.state import StateStore
from tests.support.ledger import commit_run, sketched_row

HOSTS = ["atlas", "hermes-mon", "nas01", "gpu-box"]
SERVICES = ["Grafana", "Nextcloud", "restic", "nginx", "Postgres", "Jellyfin"]
VERBS = ["runs", "listens", "backs up", "restarts", "upgrades"]
PEOPLE = ["Caroline", "Melanie", "John", "James"]
THINGS = ["painting", "pottery", "chess", "hiking", "the guitar", "Hawaiian pizza"]


def synthetic_cards(rng: random.Random, n: int) -> list[str]:
    """Short cards over a small vocabulary, so many pairs are near-duplicates, restatements with a
    changed number, date or host, or role swaps."""
    texts = []
    for _ in range(n):
        kind = rng.random()
        if kind < 0.5:
            texts.append(
                f"{rng.choice(SERVICES)} {rng.choice(VERBS)} on host {rng.choice(HOSTS)} "
                f"at port {rng.choice([80, 443, 3000, 8080])} "
                f"version {rng.choice(['27.1', '28.0', '1.2.3'])}."
            )
        elif kind < 0.85:
            a, b = rng.sample(PEOPLE, 2)
            texts.append(
                f"{a} {rng.choice(['enjoys', 'plans', 'talked about', 'recommended'])} "
                f"{rng.choice(THINGS)} with {b} on {rng.choice(['May 7', 'June 2', 'the weekend'])}."
            )
        elif kind < 0.95:
            texts.append(f"{rng.choice(PEOPLE)} likes {rng.choice(THINGS)}.")
        else:
            texts.append(rng.choice(["It is 42.", "Yes.", "On 2023-05-07.", "Version 2.0.", "As it was."]))
    return texts


def pseudo_words(rng: random.Random, n: int) -> list[str]:
    consonants, vowels = "bdfgklmnprtvz", "aeiou"
    words: set[str] = set()
    while len(words) < n:
        words.add("".join(rng.choice(consonants) + rng.choice(vowels) for _ in range(3)))
    return sorted(words)


def overlapping_cards(rng: random.Random, ledger: list[str], vocabulary: list[str], n: int) -> list[str]:
    """Cards that keep some of a ledger card's words and replace the rest, so their Jaccard with it
    lands on both sides of every gate threshold; some also change a version number."""
    texts = []
    for _ in range(n):
        words = ledger[rng.randrange(len(ledger))].rstrip(".").split()
        kept = rng.sample(words, rng.randint(0, len(words)))
        fresh = rng.sample(vocabulary, rng.randint(0, 4))
        body = " ".join(rng.sample(kept + fresh, len(kept + fresh))) or rng.choice(vocabulary)
        texts.append(body + (f" version {rng.choice(['1.2', '1.3'])}." if rng.random() < 0.3 else "."))
    return texts


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_indexed_verdicts_equal_full_scan_verdicts(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    vocabulary = pseudo_words(rng, 400)
    word_cards = [" ".join(rng.sample(vocabulary, rng.randint(3, 9))) + "." for _ in range(300)]
    ledger_texts = synthetic_cards(rng, 200) + word_cards
    rows = [sketched_row(text, i, suffix=f"-{i}") for i, text in enumerate(ledger_texts)]
    new_texts = synthetic_cards(rng, 60) + overlapping_cards(rng, word_cards, vocabulary, 200)
    rng.shuffle(new_texts)
    batches = [
        [dedup.CardText(f"new-{b}-{i}", text) for i, text in enumerate(new_texts[b : b + 5])]
        for b in range(0, len(new_texts), 5)
    ]
    thresholds = dedup.DedupThresholds()
    full_ledger = [dedup.CardText(r.document_id, r.text) for r in rows]
    kinds: set[str] = set()
    narrowed = 0
    with StateStore.open(tmp_path / "state.sqlite3") as state:
        commit_run(state, rows)
        for batch in batches:
            full = dedup.judge_batch(batch, full_ledger, [], thresholds)
            # The run's own judge step: each card's candidates read, judged and let go in turn.
            streamed = judge_against_ledger(state, "global", batch, [[] for _ in batch], None, dry_run=False)
            sketches = [sketch_of(profile_text(card.text)) for card in batch]
            counts = state.word_counts(set().union(*(probe_words(s) for s in sketches)))
            met = [card_candidates(state, "global", s, thresholds, counts) for s in sketches]
            narrowed += all(len(cards) < len(rows) for cards in met)
            for card, a, b in zip(batch, full, streamed, strict=True):
                kinds.add(a.kind)
                assert (a.kind, a.matched_id, a.changed) == (b.kind, b.matched_id, b.changed), card.text
                if a.kind is not dedup.VerdictKind.NEW or a.changed:
                    assert (a.reason, a.scores) == (b.reason, b.scores), card.text
    assert {"duplicate", "conflict", "new"} <= kinds
    assert narrowed > len(batches) // 2, "the index should narrow most cards' ledger"


def test_a_card_without_content_words_finds_the_others_without_any() -> None:
    """Two empty word sets have a Jaccard of 1: a stand-in word keeps such cards findable."""
    sketch = sketch_of(profile_text("As it was."))
    assert NO_CONTENT in index_words(sketch)
    asked = scans(sketch, dedup.DedupThresholds(), {})
    assert asked is not None
    assert [(s.word, s.shortest, s.longest) for s in asked if s.side == "content"] == [(NO_CONTENT, 0, 0)]


def test_every_pair_the_gate_passes_is_a_candidate(tmp_path: Path) -> None:
    """The index's promise, pair by pair: whenever the full gate would compare two cards, the probe
    of the new one returns the other (a real SQLite index over random small word sets)."""
    rng = random.Random(7)
    vocabulary = pseudo_words(rng, 12)
    thresholds = dedup.DedupThresholds()
    lexical = min(thresholds.lexical_jaccard, thresholds.containment_jaccard, thresholds.shingle_jaccard)
    texts = sorted({" ".join(sorted(rng.sample(vocabulary, rng.randint(0, 7)))) + " it." for _ in range(600)})
    rows = [sketched_row(text, i, suffix=f"-{i}") for i, text in enumerate(texts)]
    by_id = {r.document_id: sketch_of(profile_text(r.text)) for r in rows}
    passed = 0
    with StateStore.open(tmp_path / "state.sqlite3") as state:
        commit_run(state, rows)
        for _ in range(150):
            a = sketch_of(profile_text(" ".join(rng.sample(vocabulary, rng.randint(0, 7))) + " it."))
            asked = scans(a, thresholds, state.word_counts(probe_words(a)))
            assert asked is not None
            found = state.scan_index(asked)
            for doc, b in by_id.items():
                if (
                    jaccard_index(a.content, b.content) >= lexical
                    or jaccard_index(a.residual, b.residual) >= thresholds.conflict
                ):
                    passed += 1
                    assert doc in found, (a, b)
            assert len(found) < len(rows)
    assert passed > 300


def _unindexed_steps(state: StateStore) -> int:
    """SQLite virtual-machine steps one ``unindexed`` call takes (the run asks it every time)."""
    steps = 0

    def count() -> int:
        nonlocal steps
        steps += 1
        return 0

    state._conn.set_progress_handler(count, 1)
    try:
        assert state.unindexed("global") == []
    finally:
        state._conn.set_progress_handler(None, 1)
    return steps


def test_asking_for_unindexed_cards_does_not_read_the_indexed_ones(tmp_path: Path) -> None:
    """Every run asks which cards are not indexed yet; with none, the answer costs the same at 200
    and at 2,000 indexed cards (SQLite, left to itself, walked the bank's cards for the ORDER BY)."""
    rng = random.Random(11)
    steps = []
    for size in (200, 2000):
        with StateStore.open(tmp_path / f"state-{size}.sqlite3") as state:
            commit_run(
                state,
                [sketched_row(text, i, suffix=f"-{i}") for i, text in enumerate(synthetic_cards(rng, size))],
            )
            steps.append(_unindexed_steps(state))
    assert steps[1] == steps[0], steps
