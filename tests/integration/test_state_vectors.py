"""Vectors beside the ledger: the upgrade from schema 2, the commit, the stale list, and the
in-memory matrix that reads only what was written since it last looked."""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dreamer.embeddings.vectors import to_blob
from dreamer.errors import RunBusyError
from dreamer.rollup.semantic import LedgerVectors, SemanticJudge
from dreamer.state import (
    APPLICATION_ID,
    SCHEMA_VERSION,
    CandidateCard,
    LedgerCard,
    StateStore,
    StoredVector,
    Watermark,
    schema,
)
from tests.support.ledger import commit_run

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def vector(seed: int, dimension: int = 8) -> StoredVector:
    rng = np.random.default_rng(seed)
    v = rng.standard_normal(dimension).astype(np.float32)
    return StoredVector("m:a", dimension, to_blob(v / np.linalg.norm(v)))


def card(i: int, *, vec: StoredVector | None = None) -> LedgerCard:
    return LedgerCard(
        document_id=f"d{i}",
        profile="p",
        upstream_bank="g",
        text=f"Card {i}.",
        normalized=f"card {i}",
        promoted_at=NOW,
        last_seen_at=NOW,
        run_id="r",
        vector=vec,
    )


def commit(store: StateStore, cards: list[LedgerCard], run: str, expected: Watermark | None = None) -> None:
    commit_run(store, cards, run_id=run, at=NOW, expected=expected)


def test_upgrade_from_schema_2_keeps_every_row(tmp_path: Path) -> None:
    """A schema-2 file (ledger, word index, runs) gains the vector table in one transaction; every
    row stays and every card is listed as needing a vector."""
    path = tmp_path / "state.sqlite3"
    with sqlite3.connect(path) as conn:
        conn.executescript(schema._SCHEMA + schema._INDEXES)
        conn.execute("ALTER TABLE ledger_words DROP COLUMN signature")  # schema 9's
        conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        conn.execute("PRAGMA user_version = 2")
        conn.executemany(
            "INSERT INTO ledger (document_id, profile, upstream_bank, text, normalized, promoted_at, "
            "last_seen_at, run_id, indexed) VALUES (?, 'p', 'g', ?, ?, ?, ?, 'r', 1)",
            [(f"d{i}", f"Card {i}.", f"card {i}", NOW.isoformat(), NOW.isoformat()) for i in range(30)],
        )
        conn.execute("INSERT INTO ledger_words VALUES ('card', 'd1', 1, 1)")
        conn.execute("INSERT INTO meta VALUES ('index_version', 'v')")
        before = {
            t: conn.execute(f"SELECT * FROM {t} ORDER BY 1").fetchall()
            for t in ("ledger", "ledger_words", "meta")
        }
    with StateStore.open(path) as store:
        assert len(store.stale_vectors("g", "m:a", None, 100)) == 30
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        after = {t: conn.execute(f"SELECT * FROM {t} ORDER BY 1").fetchall() for t in before}
    assert [r[4] for r in after["ledger_words"]] == [None], "no gate row, no signature (schema 9)"
    after["ledger_words"] = [r[:4] for r in after["ledger_words"]]
    assert after == before


def test_vectors_are_committed_with_their_rows_or_not_at_all(tmp_path: Path) -> None:
    """A card's vector is written in the commit of its row; a commit refused by the watermark
    check writes neither."""
    with StateStore.open(tmp_path / "s.sqlite3") as store:
        commit(store, [card(1, vec=vector(1))], "r1")
        assert store.vector_models() == [("m:a", 8, 1)]
        with pytest.raises(RunBusyError):
            commit(store, [card(2, vec=vector(2))], "r2", expected=Watermark())
        assert store.ledger_size() == 1 and store.vector_models() == [("m:a", 8, 1)]


def test_stale_cards_are_bounded_and_per_model(tmp_path: Path) -> None:
    """Cards without a vector of the model (or of its length) are listed oldest first, at most
    ``limit``; storing a vector for an unknown card is skipped."""
    with StateStore.open(tmp_path / "s.sqlite3") as store:
        commit(store, [card(i, vec=vector(i)) for i in range(5)], "r1")
        assert store.stale_vectors("g", "m:a", 8, 10) == []
        assert len(store.stale_vectors("g", "m:a", 16, 10)) == 5
        stale = store.stale_vectors("g", "m:b", None, 2)
        assert [c.document_id for c in stale] == ["d0", "d1"]
        store.store_vectors(
            {"d0": StoredVector("m:b", 4, b"\0" * 8), "nope": StoredVector("m:b", 4, b"\0" * 8)}
        )
        assert sorted(store.vector_models()) == [("m:a", 8, 4), ("m:b", 4, 1)]


def test_the_matrix_reads_only_new_rows_and_never_another_models(tmp_path: Path) -> None:
    """Refreshing reads the rows written since the last refresh (a replaced vector included), and
    only the model's own; a state file whose counter went back is read again from the start."""
    with StateStore.open(tmp_path / "s.sqlite3") as store:
        commit(store, [card(i, vec=vector(i)) for i in range(50)], "r1")
        vectors = LedgerVectors("g", "m:a", 8)
        assert vectors.refresh(store) == 50 and len(vectors) == 50
        assert vectors.capacity == 50  # one allocation for what a refresh read, not row by row
        assert vectors.refresh(store) == 0
        commit(store, [card(50, vec=vector(50))], "r2")
        assert vectors.refresh(store) == 1 and vectors.rows_read == 51
        store.store_vectors({"d3": StoredVector("m:b", 8, vector(3).blob)})  # another model's
        assert vectors.refresh(store) == 0 and len(vectors) == 51
        (hits,) = vectors.nearest(np.frombuffer(vector(7).blob, dtype="<f2").astype(np.float32)[None, :], 3)
        assert hits[0][0] == "d7" and hits[0][1] == pytest.approx(1.0, abs=2e-3)
        assert "d3" in vectors.ids  # its model-a row was read before it was replaced
        vectors.last_seq = 10**9
        assert vectors.refresh(store) == 50 and "d3" not in vectors.ids


class _Embedder:
    """Model ``m:a`` of length 8: each text's vector is :func:`vector` of a number in its text."""

    model_id = "m:a"
    dimension = 8

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        rows = [np.frombuffer(vector(int(t.split()[1].rstrip("."))).blob, dtype="<f2") for t in texts]
        return np.stack(rows).astype(np.float32) if rows else np.zeros((0, 8), dtype=np.float32)

    async def aclose(self) -> None:
        return None


class _CountingStore(StateStore):
    stale_calls = 0

    def stale_vectors(
        self, upstream_bank: str, model_id: str, dimension: int | None, limit: int
    ) -> list[CandidateCard]:
        type(self).stale_calls += 1
        return super().stale_vectors(upstream_bank, model_id, dimension, limit)


async def test_the_join_for_missing_vectors_runs_only_when_a_card_lacks_one(tmp_path: Path) -> None:
    """When the bank's vectors of the model are as many as its cards, a run does not search the
    ledger for cards without one (that join read the whole ledger each run); once a card lacks a
    vector it is searched for and embedded."""

    async def prepare(store: StateStore) -> int:
        async def embed(texts: Sequence[str]) -> np.ndarray:
            return await _Embedder().embed(texts)

        async def in_thread(fn: Callable[[], Any]) -> Any:
            return fn()

        batch = await judge.prepare(store, "g", ["Card 99."], [], embed, write=True, in_thread=in_thread)
        return batch.reembedded

    judge = SemanticJudge(_Embedder(), reembed_batch=10, top_k=3)  # type: ignore[arg-type]
    with _CountingStore.open(tmp_path / "s.sqlite3") as store:
        commit(store, [card(i, vec=vector(i)) for i in range(20)], "r1")
        assert await prepare(store) == 0 and _CountingStore.stale_calls == 0
        commit(store, [card(20)], "r2")  # promoted without a vector
        assert await prepare(store) == 1 and _CountingStore.stale_calls == 1
        assert store.stale_vectors("g", "m:a", 8, 10) == []


def _steps_of(store: StateStore, call: Callable[[], Any]) -> int:
    """SQLite virtual-machine steps ``call`` takes on the store's connection (a count, not a time)."""
    steps = [0]

    def count() -> int:
        steps[0] += 1
        return 0

    conn = store._conn  # the sqlite3 connection of a file-backed store
    conn.set_progress_handler(count, 100)
    try:
        call()
    finally:
        conn.set_progress_handler(None, 0)
    return steps[0]


def test_a_lookup_by_card_or_seq_costs_what_it_lists_not_what_the_ledger_holds(tmp_path: Path) -> None:
    """Reading the vectors of five listed cards (or seqs) of a bank takes about as many SQLite steps
    with 4,000 vectors stored as with 400: the listed keys drive the lookup. Before, SQLite walked
    every vector of the model to test it against the list, ten times the work at ten times the
    cards, in every call a run makes per new card."""
    costs = []
    for size in (400, 4000):
        with StateStore.open(tmp_path / f"state-{size}.sqlite3") as store:
            commit(store, [card(i, vec=vector(i)) for i in range(size)], "r1")
            wanted = [f"d{i}" for i in (3, 77, 150, 299, 399)]
            rows = store.vectors_of("g", "m:a", 8, wanted)
            assert sorted(r.document_id for r in rows) == sorted(wanted)
            seqs = [r.seq for r in rows]
            assert [r.seq for r in store.vectors_by_seq("g", "m:a", 8, seqs)] == sorted(seqs)
            by_ids = functools.partial(store.vectors_of, "g", "m:a", 8, wanted)
            by_seqs = functools.partial(store.vectors_by_seq, "g", "m:a", 8, seqs)
            costs.append((_steps_of(store, by_ids), _steps_of(store, by_seqs)))
    (small_ids, small_seqs), (large_ids, large_seqs) = costs
    assert large_ids <= 2 * small_ids + 5, costs
    assert large_seqs <= 2 * small_seqs + 5, costs
