"""The vector part of :class:`~dreamer.state.StateStore`: each ledger card's embedding, by model and
length, for the semantic dedup (docs/design/dedup.md).

Every written vector gets a new ``seq``, so a reader that keeps the last ``seq`` it saw reads only
what changed since (:meth:`Vectors.vectors_since`). A vector is written with its card in the
commit's transaction (:meth:`Vectors._put_vector`) or later, when the card is embedded afterwards.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping

from dreamer.state.base import StoreBase
from dreamer.state.records import CandidateCard, StoredVector, VectorRow
from dreamer.state.schema import state_errors

__all__ = ["Vectors"]


class Vectors(StoreBase):
    """The stored vectors' reads (new since, missing, by model) and writes."""

    @state_errors
    def vectors_since(
        self, upstream_bank: str, model_id: str, dimension: int, after_seq: int, limit: int | None = None
    ) -> list[VectorRow]:
        """The vectors of ``upstream_bank``'s cards made by this model and length, written after
        ``after_seq``, in ``seq`` order (a reader keeps the last ``seq`` it saw); at most ``limit``
        (a reader of a large bank reads it a page at a time)."""
        rows = self._conn.execute(
            "SELECT v.seq, v.document_id, l.text, v.vector FROM ledger_vectors v "
            "JOIN ledger l ON l.document_id = v.document_id "
            "WHERE v.model_id = ? AND v.dimension = ? AND v.seq > ? AND l.upstream_bank = ? "
            "ORDER BY v.seq" + ("" if limit is None else " LIMIT ?"),
            (model_id, dimension, after_seq, upstream_bank, *(() if limit is None else (limit,))),
        )
        return [VectorRow(r[0], r[1], r[2], r[3]) for r in rows]

    @state_errors
    def vectors_by_seq(
        self, upstream_bank: str, model_id: str, dimension: int, seqs: Iterable[int]
    ) -> list[VectorRow]:
        """The vectors that still hold these ``seq`` values (a replaced vector's old one is gone),
        of ``upstream_bank``'s cards and this model and length: what an on-disk index's keys are."""
        return self._vectors_where(
            "v.seq = CAST(j.value AS BIGINT)",
            json.dumps(sorted({int(s) for s in seqs})),
            upstream_bank,
            model_id,
            dimension,
        )

    @state_errors
    def vectors_of(
        self, upstream_bank: str, model_id: str, dimension: int, document_ids: Iterable[str]
    ) -> list[VectorRow]:
        """The vectors of these cards of ``upstream_bank`` made by this model and length."""
        return self._vectors_where(
            "v.document_id = j.value",
            json.dumps(sorted(set(document_ids))),
            upstream_bank,
            model_id,
            dimension,
        )

    def _vectors_where(
        self, on: str, listed: str, upstream_bank: str, model_id: str, dimension: int
    ) -> list[VectorRow]:
        # The listed keys drive the join (SQLite does not reorder a CROSS JOIN): with the
        # keys as an IN list, SQLite walked every vector of the model in seq order to test each
        # against the list, 40 ms per call at 100k cards against 0.7 ms, and a run makes one call
        # per new card.
        rows = self._conn.execute(
            "SELECT v.seq, v.document_id, l.text, v.vector "
            f"FROM {self.dialect.json_table} {self.dialect.join_in_order} ledger_vectors v ON {on} "
            "JOIN ledger l ON l.document_id = v.document_id "
            "WHERE v.model_id = ? AND v.dimension = ? AND l.upstream_bank = ? ORDER BY v.seq",
            (listed, model_id, dimension, upstream_bank),
        )
        return [VectorRow(r[0], r[1], r[2], r[3]) for r in rows]

    @state_errors
    def last_vector_seq(self) -> int:
        """The highest ``seq`` ever given to a vector (0 when none was)."""
        row = self._conn.execute(self.dialect.last_vector_seq).fetchone()
        return 0 if row is None else int(row[0])

    @state_errors
    def stale_vectors(
        self, upstream_bank: str, model_id: str, dimension: int | None, limit: int
    ) -> list[CandidateCard]:
        """Up to ``limit`` cards of ``upstream_bank`` with no vector of this model (and length,
        when known), oldest first: the next ones to embed."""
        other_length = "" if dimension is None else " OR v.dimension != ?"
        rows = self._conn.execute(
            "SELECT l.document_id, l.text, l.sketch FROM ledger l "
            "LEFT JOIN ledger_vectors v ON v.document_id = l.document_id "
            f"WHERE l.upstream_bank = ? AND (v.document_id IS NULL OR v.model_id != ?{other_length}) "
            "ORDER BY l.promoted_at, l.document_id LIMIT ?",
            (upstream_bank, model_id, *(() if dimension is None else (dimension,)), limit),
        )
        return [CandidateCard(r[0], r[1], r[2]) for r in rows]

    @state_errors
    def stale_vectors_after(
        self, model_id: str, dimension: int, after: str, limit: int
    ) -> list[CandidateCard]:
        """Up to ``limit`` cards of any bank with no vector of this model and length, in document-id
        order after ``after``: a pass over the whole ledger a batch at a time, each batch read from
        where the last ended by the primary key (`dreamer state reembed`)."""
        rows = self._conn.execute(
            "SELECT l.document_id, l.text, l.sketch FROM ledger l "
            "LEFT JOIN ledger_vectors v ON v.document_id = l.document_id "
            "WHERE l.document_id > ? AND (v.document_id IS NULL OR v.model_id != ? OR v.dimension != ?) "
            "ORDER BY l.document_id LIMIT ?",
            (after, model_id, dimension, max(1, int(limit))),
        )
        return [CandidateCard(r[0], r[1], r[2]) for r in rows]

    @state_errors
    def store_vectors(self, vectors: Mapping[str, StoredVector]) -> None:
        """Replace the vectors of these ledger cards (document id -> vector), in one transaction.
        A card the ledger does not hold is skipped; a replaced vector gets a new ``seq``."""
        if not vectors:
            return
        with self._write():
            for document_id, vector in vectors.items():
                self._put_vector(document_id, vector)

    @state_errors
    def vector_models(self) -> list[tuple[str, int, int]]:
        """Which models made the stored vectors: (model id, dimension, cards), most cards first."""
        rows = self._conn.execute(
            "SELECT model_id, dimension, COUNT(*) FROM ledger_vectors GROUP BY model_id, dimension "
            "ORDER BY COUNT(*) DESC, model_id"
        )
        return [(r[0], int(r[1]), int(r[2])) for r in rows]

    @state_errors
    def vector_storage(self) -> str:
        """How the vectors are kept, for ``status``: the same float16 bytes on both backends, read
        into the daemon's memory to be searched; on PostgreSQL, whether pgvector is there (it is
        not used: no search runs in the database; docs/design/leases.md)."""
        if self.dialect.name != "postgres":
            return "float16 bytes in the state file, searched in memory"
        row = self._conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()
        there = f"pgvector {row[0]} installed, not used" if row else "pgvector not installed"
        return f"float16 bytes (bytea), searched in memory; {there}"

    def _put_vector(self, document_id: str, vector: StoredVector) -> None:
        """Write (or replace) a card's vector, only when the ledger holds the card: a vector
        embedded for a card that is gone must not leave a row no card owns. A replaced vector is
        deleted and written again, so it gets a new ``seq``."""
        self._conn.execute("DELETE FROM ledger_vectors WHERE document_id = ?", (document_id,))
        self._conn.execute(
            "INSERT INTO ledger_vectors (document_id, model_id, dimension, vector) "
            "SELECT ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM ledger WHERE document_id = ?)",
            (document_id, vector.model_id, vector.dimension, vector.blob, document_id),
        )
