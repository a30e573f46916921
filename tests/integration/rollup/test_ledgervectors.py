"""The judge's ledger vectors with on-disk segments, on a real state file: the newest rows stay in
memory and the rest become segments, the search answers as the exact one does, a new process
resumes from what the folder covers, and a state that no longer matches the folder (restored from
a copy, another file) is searched from the start. Segments are small here (64 rows) so that a
few hundred cards make several; the vectors are random unit vectors of 16 floats."""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dreamer.embeddings.segments import SegmentIndex
from dreamer.embeddings.vectors import to_blob
from dreamer.rollup.ledgervectors import LedgerVectors
from dreamer.rollup.semantic import SemanticJudge
from dreamer.state import LedgerCard, StateStore, StoredVector
from tests.support.ledger import commit_run

NOW = datetime(2026, 1, 1, tzinfo=UTC)
DIMENSION, ROWS = 16, 64
IDENTITY = {"state": "test", "bank": "g", "model": "m:a", "dimension": DIMENSION}


def unit(seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal(DIMENSION).astype(np.float32)
    return v / np.linalg.norm(v)


def card(i: int, *, prefix: str = "d") -> LedgerCard:
    return LedgerCard(
        document_id=f"{prefix}{i}",
        profile="p",
        upstream_bank="g",
        text=f"Card {i}.",
        normalized=f"card {i}",
        promoted_at=NOW,
        last_seen_at=NOW,
        run_id="r",
        vector=StoredVector("m:a", DIMENSION, to_blob(unit(i))),
    )


def seeded(path: Path, first: int, last: int, *, run: str = "r1", prefix: str = "d") -> StateStore:
    store = StateStore.open(path)
    commit_run(store, [card(i, prefix=prefix) for i in range(first, last)], run_id=run, at=NOW)
    return store


def index(folder: Path, *, writable: bool = True) -> SegmentIndex:
    return SegmentIndex(folder, IDENTITY, DIMENSION, writable=writable, segment_rows=ROWS)


def queries(count: int) -> np.ndarray:
    return np.stack([unit(10_000 + i) for i in range(count)])


def exact(store: StateStore, k: int) -> list[list[tuple[str, float]]]:
    plain = LedgerVectors("g", "m:a", DIMENSION)
    plain.refresh(store)
    return plain.nearest(queries(20), k)


def same_hits(got: list[list[tuple[str, float]]], want: list[list[tuple[str, float]]]) -> None:
    """``got`` answers as the exact search ``want`` does: the same cards, best first, each with
    the exact cosine of its card (the segments' codes only choose; the state's vectors score)."""
    for got_row, want_row in zip(got, want, strict=True):
        assert [doc for doc, _ in got_row] == [doc for doc, _ in want_row]
        assert [score for _, score in got_row] == pytest.approx([score for _, score in want_row], abs=1e-6)


def test_full_pages_become_segments_and_the_search_answers_as_exact(tmp_path: Path) -> None:
    """300 cards: a refresh turns every full page into a segment and keeps the rest in memory; the
    next adds to memory until a page is full again. The ten nearest cards of 20 queries are those
    of the exact search over every vector, with the same cosines (rescored from the state)."""
    with seeded(tmp_path / "s.sqlite3", 0, 300) as store:
        vectors = LedgerVectors("g", "m:a", DIMENSION, index(tmp_path / "ix"))
        assert vectors.refresh(store) == 300
        assert (vectors.segments_built, vectors.in_memory, len(vectors)) == (4, 300 - 4 * ROWS, 300)
        same_hits(vectors.nearest(queries(20), 10, store), exact(store, 10))
        commit_run(store, [card(i) for i in range(300, 330)], run_id="r2", at=NOW)
        assert vectors.refresh(store) == 30
        # what memory held (44) and the page read (30) make one segment past a page's worth
        assert (vectors.segments_built, vectors.in_memory, len(vectors)) == (5, 0, 330)
        same_hits(vectors.nearest(queries(20), 10, store), exact(store, 10))


def test_without_the_state_only_the_rows_in_memory_are_searched(tmp_path: Path) -> None:
    """``nearest`` without a state cannot read a segment's hits back, so it answers from memory."""
    with seeded(tmp_path / "s.sqlite3", 0, 100) as store:
        vectors = LedgerVectors("g", "m:a", DIMENSION, index(tmp_path / "ix"))
        vectors.refresh(store)
        in_memory = set(vectors.ids)
        assert len(in_memory) == 100 - ROWS
        assert {doc for row in vectors.nearest(queries(5), 10) for doc, _ in row} <= in_memory


def test_a_new_process_reads_only_what_the_folder_does_not_cover(tmp_path: Path) -> None:
    with seeded(tmp_path / "s.sqlite3", 0, 200) as store:
        LedgerVectors("g", "m:a", DIMENSION, index(tmp_path / "ix")).refresh(store)
        again = LedgerVectors("g", "m:a", DIMENSION, index(tmp_path / "ix"))
        assert again.refresh(store) == 200 - 3 * ROWS
        assert (again.segments_built, len(again)) == (0, 200)
        same_hits(again.nearest(queries(20), 10, store), exact(store, 10))


def test_a_state_restored_from_an_older_copy_is_read_from_the_start(tmp_path: Path) -> None:
    """A copy of the state taken before most segments were built has a lower vector counter than
    the folder covers: the folder is cleared and the copy's vectors are read and indexed anew."""
    path = tmp_path / "s.sqlite3"
    with seeded(path, 0, 70):
        pass
    shutil.copy(path, tmp_path / "backup.sqlite3")
    with StateStore.open(path) as store:
        commit_run(store, [card(i) for i in range(70, 260)], run_id="r2", at=NOW)
        LedgerVectors("g", "m:a", DIMENSION, index(tmp_path / "ix")).refresh(store)
    assert index(tmp_path / "ix").covered >= 192
    shutil.copy(tmp_path / "backup.sqlite3", path)
    with StateStore.open(path) as store:
        restored = LedgerVectors("g", "m:a", DIMENSION, index(tmp_path / "ix"))
        assert restored.refresh(store) == 70 and len(restored) == 70
        hits = restored.nearest(queries(20), 10, store)
        assert {doc for row in hits for doc, _ in row} <= {f"d{i}" for i in range(70)}
        same_hits(hits, exact(store, 10))


def test_another_state_with_as_many_vectors_is_not_trusted_with_the_folder(tmp_path: Path) -> None:
    """A different state file whose counter is as high (its cards named otherwise) fails the
    folder's probes: it is read from the start and never answered with the other file's cards."""
    with seeded(tmp_path / "a.sqlite3", 0, 200) as store:
        LedgerVectors("g", "m:a", DIMENSION, index(tmp_path / "ix")).refresh(store)
    with seeded(tmp_path / "b.sqlite3", 0, 200, prefix="other-") as other:
        vectors = LedgerVectors("g", "m:a", DIMENSION, index(tmp_path / "ix"))
        assert vectors.refresh(other) == 200
        hits = vectors.nearest(queries(20), 10, other)
        assert all(doc.startswith("other-") for row in hits for doc, _ in row)
        same_hits(hits, exact(other, 10))


def damage(path: Path, document_id: str) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE ledger_vectors SET vector = x'00ff' WHERE document_id = ?", (document_id,))


def test_a_damaged_vector_in_a_segment_is_dropped_then_replaced(tmp_path: Path) -> None:
    """A card whose stored vector was damaged after its segment was built is found by the search
    (its key is in the segment) but dropped when read back, and named damaged; once it is given
    a new vector that one answers, and the card is counted once."""
    path = tmp_path / "s.sqlite3"
    with seeded(path, 0, 100) as store:
        vectors = LedgerVectors("g", "m:a", DIMENSION, index(tmp_path / "ix"))
        vectors.refresh(store)
        assert "d5" not in vectors.ids  # in the first segment
        damage(path, "d5")
        (hits,) = vectors.nearest(unit(5)[None, :], 3, store)
        assert "d5" not in [doc for doc, _ in hits] and "d5" in vectors.damaged
        replacement = unit(777)
        store.store_vectors({"d5": StoredVector("m:a", DIMENSION, to_blob(replacement))})
        vectors.refresh(store)
        (hits,) = vectors.nearest(replacement[None, :], 1, store)
        assert hits[0][0] == "d5" and hits[0][1] == pytest.approx(1.0, abs=2e-3)
        assert "d5" not in vectors.damaged and len(vectors) == 100


def test_cards_in_segments_are_looked_up_once_fetched(tmp_path: Path) -> None:
    """A card in a segment has no vector or text until it is fetched; ``fetch`` holds for the batch,
    ``fetch_pool`` only until the next card's pool, and ``begin_batch`` lets both go."""
    with seeded(tmp_path / "s.sqlite3", 0, 100) as store:
        vectors = LedgerVectors("g", "m:a", DIMENSION, index(tmp_path / "ix"))
        vectors.refresh(store)
        assert vectors.vector_of("d1") is None and vectors.vector_of_text("Card 1.") is None
        vectors.fetch(store, ["d1", "d90"])
        assert vectors.text_of("d1") == "Card 1."
        got = vectors.vector_of_text("Card 1.")
        assert got is not None and float(got @ unit(1)) == pytest.approx(1.0, abs=2e-3)
        vectors.fetch_pool(store, ["d2"])
        assert vectors.text_of("d2") == "Card 2."
        vectors.fetch_pool(store, ["d3"])
        assert vectors.text_of("d2") is None and vectors.vector_of_text("Card 2.") is None
        assert vectors.text_of("d3") == "Card 3." and vectors.text_of("d1") == "Card 1."
        vectors.begin_batch()
        assert vectors.text_of("d1") is None and vectors.text_of("d3") is None
        assert vectors.text_of("d90") == "Card 90."  # in memory throughout


def test_a_read_only_folder_is_searched_but_never_built(tmp_path: Path) -> None:
    """A reading command (``dreamer explain``) searches the daemon's segments and keeps what they
    do not cover in memory; with no segments yet it keeps every row and writes no file."""
    with seeded(tmp_path / "s.sqlite3", 0, 200) as store:
        reader = LedgerVectors("g", "m:a", DIMENSION, index(tmp_path / "ix", writable=False))
        reader.refresh(store)
        assert (reader.segments_built, reader.in_memory) == (0, 200)
        assert not (tmp_path / "ix").exists()
        LedgerVectors("g", "m:a", DIMENSION, index(tmp_path / "ix")).refresh(store)
        reader = LedgerVectors("g", "m:a", DIMENSION, index(tmp_path / "ix", writable=False))
        reader.refresh(store)
        assert (reader.segments_built, reader.in_memory) == (0, 200 - 3 * ROWS)
        same_hits(reader.nearest(queries(20), 10, store), exact(store, 10))


class _Embedder:
    """Model ``m:a`` of length 16: a text's vector is :func:`unit` of the number in it."""

    model_id = "m:a"
    dimension = DIMENSION

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        rows = [unit(int(t.split()[1].rstrip("."))) for t in texts]
        return np.stack(rows) if rows else np.zeros((0, DIMENSION), dtype=np.float32)

    async def aclose(self) -> None:
        return None


async def in_thread(fn: Callable[[], Any]) -> Any:
    return fn()


async def test_a_batch_sees_the_same_vectors_with_and_without_segments(tmp_path: Path) -> None:
    """What the verdicts are decided from is the same with segments as without: each new card's
    nearest cards and cosines, and the cosine of each new card with each candidate, including
    candidates in segments (read back by their ids). The judge's folder is under ``index_dir``."""

    async def batch_of(judge: SemanticJudge, store: StateStore) -> tuple[Any, dict[tuple[str, str], Any]]:
        embedder = _Embedder()
        batch = await judge.prepare(
            store, "g", new, [c.text for c in candidates], embedder.embed, write=True,
            in_thread=in_thread, candidate_ids=[c.document_id for c in candidates],
        )
        return batch.nearest, {(a, c.text): batch.similarity(a, c.text) for a in new for c in candidates}

    new = [f"Card {i}." for i in range(5000, 5012)]
    candidates = [card(i) for i in (1, 7, 40, 150, 250)]
    with seeded(tmp_path / "s.sqlite3", 0, 260) as store:
        with_index = SemanticJudge(
            _Embedder(), reembed_batch=10, top_k=8, index_dir=tmp_path / "vectors",  # type: ignore[arg-type]
            segment_rows=ROWS,
        )
        plain = SemanticJudge(_Embedder(), reembed_batch=10, top_k=8)  # type: ignore[arg-type]
        nearest, cosines = await batch_of(with_index, store)
        want_nearest, want_cosines = await batch_of(plain, store)
        assert len(list((tmp_path / "vectors").glob("*/seg-*.i8"))) == 260 // ROWS
        same_hits(nearest, want_nearest)
        assert (tmp_path / "vectors").is_dir() and all(v is not None for v in cosines.values())
        assert cosines == pytest.approx(want_cosines, abs=1e-6)


def test_two_processes_taking_turns_build_on_each_others_segments(tmp_path: Path) -> None:
    """The daemon and a ``dreamer rollup`` take turns on one bank (its run lock): each opened the
    folder before the other built. The one that finds the manifest changed reads it again and
    goes on from what it covers, so no segment is dropped or built twice, and no file is left
    that the manifest does not name."""
    with seeded(tmp_path / "s.sqlite3", 0, 50) as store:
        daemon = LedgerVectors("g", "m:a", DIMENSION, index(tmp_path / "ix"))
        cli = LedgerVectors("g", "m:a", DIMENSION, index(tmp_path / "ix"))
        daemon.refresh(store)
        cli.refresh(store)
        commit_run(store, [card(i) for i in range(50, 150)], run_id="r2", at=NOW)
        cli.refresh(store)  # the 50 it held and a page: 1-114
        commit_run(store, [card(i) for i in range(150, 200)], run_id="r3", at=NOW)
        daemon.refresh(store)  # its manifest is out of date: it reads again past 114, then builds
        assert [(s.first_key, s.last_key) for s in daemon.index.segments] == [(1, 114), (115, 178)]
        assert (daemon.segments_built, daemon.in_memory, len(daemon)) == (1, 200 - 178, 200)
        on_disk = sorted(p.name for p in (tmp_path / "ix").glob("*.i8"))
        assert on_disk == sorted(s.file for s in index(tmp_path / "ix").segments) and len(on_disk) == 2
        same_hits(daemon.nearest(queries(20), 10, store), exact(store, 10))


def test_a_segment_lost_while_open_is_read_again_from_the_state(tmp_path: Path) -> None:
    """A segment file removed after the folder was opened (an operator clearing the cache under
    a running daemon): the search still answers as the exact one, from every row read again from
    the state, and the next refresh that may build hands them to the folder again (one segment of
    what memory held)."""
    with seeded(tmp_path / "s.sqlite3", 0, 200) as store:
        vectors = LedgerVectors("g", "m:a", DIMENSION, index(tmp_path / "ix"))
        vectors.refresh(store)
        assert vectors.index is not None and len(vectors.index.segments) == 3
        (tmp_path / "ix" / vectors.index.segments[1].file).unlink()
        same_hits(vectors.nearest(queries(20), 10, store), exact(store, 10))
        assert (vectors.in_memory, len(vectors), vectors.index.covered) == (200, 200, 0)
        vectors.refresh(store)
        assert [(s.first_key, s.last_key) for s in vectors.index.segments] == [(1, 200)]
        assert (vectors.in_memory, len(vectors)) == (0, 200)
        same_hits(vectors.nearest(queries(20), 10, store), exact(store, 10))


def test_a_folder_that_cannot_be_written_is_tried_once_per_refresh(tmp_path: Path) -> None:
    """The index's folder cannot be made (a file is in its way): a refresh of 300 cards in pages
    of 64 tries one segment, warns once, keeps every row in memory and answers exactly; the next
    refresh tries again."""
    from structlog.testing import capture_logs

    (tmp_path / "ix").write_text("not a folder")
    with seeded(tmp_path / "s.sqlite3", 0, 300) as store:
        vectors = LedgerVectors("g", "m:a", DIMENSION, index(tmp_path / "ix"))
        with capture_logs() as logs:
            assert vectors.refresh(store) == 300
        assert len([e for e in logs if e["log_level"] == "warning"]) == 1
        assert (vectors.segments_built, vectors.in_memory) == (0, 300)
        same_hits(vectors.nearest(queries(20), 10, store), exact(store, 10))
        with capture_logs() as logs:
            vectors.refresh(store)
        assert len([e for e in logs if e["log_level"] == "warning"]) == 1
