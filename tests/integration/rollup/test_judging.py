"""The word index finds every ledger card the dedup's full scan would: indexed verdicts equal full-scan
verdicts, on generated cards that share words, numbers, dates and hosts in every degree."""

from __future__ import annotations

import dataclasses
import random
import threading
from pathlib import Path
from typing import Any

import anyio
import pytest
from structlog.testing import capture_logs

from dreamer.rollup import dedup, judging
from dreamer.rollup.candidates import NO_CONTENT, index_words, probe_words, scans
from dreamer.rollup.judging import LedgerProbe, card_candidates, judge_against_ledger, probe_beside
from dreamer.rollup.similarity import Sketch, jaccard_index, profile_text, sketch_of
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


@pytest.mark.parametrize("seed", [4, 5])
def test_stored_sentences_sketches_give_the_verdicts_of_sketching_them_again(
    tmp_path: Path, seed: int
) -> None:
    """Ledger cards of two or three sentences, stored with their sentences' sketches as a roll-up
    writes them, and the same cards stored without (as older rows are): new cards that repeat
    one of their sentences, or another card like them, get the same verdicts, reasons and scores."""
    rng = random.Random(seed)
    said = synthetic_cards(rng, 240)
    ledger_texts = [" ".join(said[i : i + rng.randint(2, 3)]) for i in range(0, 200, 3)]
    rows = [sketched_row(text, i, suffix=f"-{i}") for i, text in enumerate(ledger_texts)]
    kept = [Sketch.loads(row.sketch) for row in rows]
    assert sum(sketch is not None and sketch.parts is not None for sketch in kept) > len(rows) // 2
    older = [dataclasses.replace(row, sketch="\t".join((row.sketch or "").split("\t")[:4])) for row in rows]
    new_texts = rng.sample(said[:200], 30) + synthetic_cards(rng, 30)
    batches = [
        [dedup.CardText(f"new-{b}-{i}", text) for i, text in enumerate(new_texts[b : b + 6])]
        for b in range(0, len(new_texts), 6)
    ]
    kinds: set[str] = set()
    with (
        StateStore.open(tmp_path / "kept.sqlite3") as state,
        StateStore.open(tmp_path / "older.sqlite3") as old,
    ):
        commit_run(state, rows)
        commit_run(old, older)
        for batch in batches:
            none: list[list[dedup.UpstreamCandidate]] = [[] for _ in batch]
            with_parts = judge_against_ledger(state, "global", batch, none, None, dry_run=False)
            again = judge_against_ledger(old, "global", batch, none, None, dry_run=False)
            assert with_parts == again
            kinds |= {v.kind for v in with_parts}
    assert {"duplicate", "new"} <= kinds


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


def _ledger(tmp_path: Path) -> tuple[StateStore, list[dedup.CardText]]:
    rng = random.Random(5)
    rows = [sketched_row(text, i, suffix=f"-{i}") for i, text in enumerate(synthetic_cards(rng, 150))]
    state = StateStore.open(tmp_path / "state.sqlite3")
    commit_run(state, rows)
    batch = [dedup.CardText(f"new-{i}", text) for i, text in enumerate(synthetic_cards(rng, 12))]
    return state, batch


def test_the_probe_read_beside_the_recalls_gives_the_same_verdicts(tmp_path: Path) -> None:
    """The run's order: the ledger probed while the recalls run, then the verdicts from that probe;
    they equal the verdicts of the judge reading its own candidates."""
    state, batch = _ledger(tmp_path)
    with state:
        own = judge_against_ledger(state, "global", batch, [[] for _ in batch], None, dry_run=False)

        async def recalls() -> str:
            await anyio.sleep(0)
            return "recalled"

        async def run() -> tuple[LedgerProbe, str]:
            return await probe_beside(state, "global", [c.text for c in batch], dry_run=False, during=recalls)

        probe, recalled = anyio.run(run)
        assert recalled == "recalled" and len(probe.ids) == len(batch) and probe.whole is None
        beside = judge_against_ledger(
            state, "global", batch, [[] for _ in batch], None, dry_run=False, probe=probe
        )
    assert [(v.kind, v.matched_id, v.reason) for v in beside] == [
        (v.kind, v.matched_id, v.reason) for v in own
    ]
    assert {v.kind for v in own} >= {dedup.VerdictKind.NEW, dedup.VerdictKind.DUPLICATE}


def test_the_probe_runs_while_the_recalls_do(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each side waits for the other to have started: read one after the other, they would wait
    for ever (bounded here by a deadline). The probe is replaced by a stand-in to hold it open."""
    probe_started, recalls_started = threading.Event(), threading.Event()

    def stand_in(*args: object, **kwargs: object) -> LedgerProbe:
        probe_started.set()
        assert recalls_started.wait(10), "the recalls never ran while the probe did"
        return LedgerProbe([])

    monkeypatch.setattr(judging, "probe_ledger", stand_in)

    async def recalls() -> int:
        recalls_started.set()
        assert await anyio.to_thread.run_sync(probe_started.wait, 10), "the probe never started"
        return 7

    async def run() -> tuple[LedgerProbe, int]:
        with anyio.fail_after(20):
            return await probe_beside(None, "global", [], dry_run=True, during=recalls)  # type: ignore[arg-type]

    assert anyio.run(run) == (LedgerProbe([]), 7)


def test_a_failing_recall_waits_for_the_probe_and_is_raised_not_the_probes_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The state is the probe's until it is done: a recall that fails (or a run cancelled) does not
    hand the state back before then. The recall's error is the run's, even when the probe failed
    too; a probe's own error is raised when the recalls succeed."""
    finished: list[str] = []
    release = threading.Event()

    def slow_failing_probe(*args: object, **kwargs: object) -> LedgerProbe:
        release.wait(10)
        finished.append("probe")
        raise RuntimeError("the probe's error")

    monkeypatch.setattr(judging, "probe_ledger", slow_failing_probe)

    async def failing_recalls() -> None:
        raise ConnectionError("the store is down")

    async def run(during: Any) -> object:
        return await probe_beside(None, "global", [], dry_run=True, during=during)  # type: ignore[arg-type]

    async def failing_beside_a_ticker() -> int:
        """The loop goes on (a watchdog's pings) while the probe is waited for."""
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                await anyio.sleep(0.01)
                ticks += 1

        async with anyio.create_task_group() as group:
            group.start_soon(ticker)
            with pytest.raises(ConnectionError, match="the store is down"):
                await run(failing_recalls)
            group.cancel_scope.cancel()
        return ticks

    threading.Timer(0.3, release.set).start()
    with capture_logs() as logs:
        assert anyio.run(failing_beside_a_ticker) >= 3, "the event loop was blocked while the probe finished"
    assert finished == ["probe"], "the probe was done before the error came out"
    hidden = [e for e in logs if e["event"] == "the ledger's probe failed as well"]
    assert [e["error"] for e in hidden] == ["the probe's error"], "the probe's own error is not lost"

    async def fine_recalls() -> int:
        release.set()
        return 1

    with pytest.raises(RuntimeError, match="the probe's error"):
        anyio.run(run, fine_recalls)

    async def cancelled() -> None:
        with anyio.move_on_after(0.05):
            await run(hanging_recalls)
        finished.append("cancelled")

    async def hanging_recalls() -> None:
        await anyio.sleep(60)

    release.clear()
    finished.clear()
    threading.Timer(0.3, release.set).start()
    anyio.run(cancelled)
    assert finished == ["probe", "cancelled"], "a cancelled run waits for the probe too"


def test_recalls_run_two_at_once_and_come_back_in_the_cards_order() -> None:
    """Each call waits until another has started: one at a time they would wait for ever (bounded
    by a deadline). Never more than two run together, and the results keep the calls' order even
    when a later call finishes first."""
    running, most = 0, 0
    two_in = anyio.Event()

    def call(index: int) -> Any:
        async def recall() -> int:
            nonlocal running, most
            running += 1
            most = max(most, running)
            if running == 2:
                two_in.set()
            with anyio.fail_after(10):
                await two_in.wait()
            await anyio.sleep(0.001 * (7 - index))  # the later calls finish sooner
            running -= 1
            return index

        return recall

    async def run() -> list[int]:
        return await judging.in_order([call(i) for i in range(7)])

    assert anyio.run(run) == list(range(7))
    assert most == judging.RECALLS_AT_ONCE == 2


def test_a_failing_recall_is_raised_as_it_is_and_no_later_recall_starts() -> None:
    """The first error comes out as itself, not in an exception group (the roll-up's retry rules
    and its report read it); the call running beside it is cancelled, and none starts after."""
    started: list[int] = []
    cancelled: list[int] = []

    def call(index: int) -> Any:
        async def recall() -> int:
            started.append(index)
            if index == 1:
                raise ConnectionError("the store is down")
            try:
                await anyio.sleep(10)
            except anyio.get_cancelled_exc_class():
                cancelled.append(index)
                raise
            return index

        return recall

    async def run() -> list[int]:
        with anyio.fail_after(5):
            return await judging.in_order([call(i) for i in range(5)])

    with pytest.raises(ConnectionError, match="the store is down"):
        anyio.run(run)
    assert started == [0, 1] and cancelled == [0]


def test_no_recalls_is_no_results_and_one_at_a_time_keeps_the_order() -> None:
    order: list[int] = []

    def call(index: int) -> Any:
        async def recall() -> int:
            order.append(index)
            await anyio.sleep(0)
            order.append(index)
            return index

        return recall

    assert anyio.run(judging.in_order, []) == []
    assert anyio.run(lambda: judging.in_order([call(i) for i in range(3)], at_once=1)) == [0, 1, 2]
    assert order == [0, 0, 1, 1, 2, 2]
