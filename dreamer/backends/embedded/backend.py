"""The embedded memory backend: :class:`EmbeddedBackend`, Dreamer's default store.

A :class:`~dreamer.backends.base.MemoryBackend` kept in one local SQLite file, with no server or LLM,
safe to share between processes (the daemon and the CLI). Given an
:class:`~dreamer.embeddings.Embedder`, it stores each unit's vector and recalls by full text and
vectors together. This module holds the class (its calls run in anyio worker threads on
:mod:`.connections`; embedding outside their locks). Its parts live beside it: :mod:`.schema` (the
file: schema, opening, upgrades, write transaction, stored times), :mod:`.retain` (checking and
writing a batch), :mod:`.reads` (the read queries and the recall token budget), :mod:`.rows` (rows
as the contract's values), :mod:`.search` (bank-scoped full-text search, scores),
:mod:`.vector_store` (stored vectors, the backlog), :mod:`.vector_matrix` and :mod:`.vector_cache`
(the per-bank vectors searched, their pages on disk), :mod:`.embedding` (an embedder's answer
checked), :mod:`.hybrid` (fusing both rankings) and :mod:`.reflect` (the extractive answer).

Why it is built this way: ``docs/design/embedded-store.md``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import anyio.to_thread
import structlog

from dreamer.backends.base import (
    BankActivity,
    BasedOn,
    Budget,
    MemoryUnit,
    RecallItem,
    ReflectResult,
    RetainItem,
    RetainResult,
    TagsMatch,
)
from dreamer.backends.embedded.connections import Connections
from dreamer.backends.embedded.embedding import checked_vectors
from dreamer.backends.embedded.hybrid import (
    RESCORE_MARGIN,
    fusion_depth,
    lexical_rows,
    recall_hits,
    search_ahead,
)
from dreamer.backends.embedded.reads import (
    bank_rows,
    full_text_recall,
    reflect_rows,
    units_query,
    within_budget,
)
from dreamer.backends.embedded.reflect import REFLECT_UNITS_BY_BUDGET, extractive_answer
from dreamer.backends.embedded.retain import retain_batch, validate_retain
from dreamer.backends.embedded.rows import activity_from_rows, blobs, recall_item_from_row, unit_from_row
from dreamer.backends.embedded.schema import write_transaction
from dreamer.backends.embedded.search import fts_match_expression
from dreamer.backends.embedded.vector_cache import VectorCache, shared_cache
from dreamer.backends.embedded.vector_store import backlog, drop_vectors, store_vectors
from dreamer.embeddings import Embedder
from dreamer.errors import BackendError

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

__all__ = ["EmbeddedBackend"]

_T = TypeVar("_T")

#: How many hits a recall without ``limit`` sizes its first candidate set for (``max_tokens`` ends it).
_UNLIMITED_RECALL_WANT = 100
#: Units without a vector of the current model that one recall embeds on its way (bounded work).
BACKLOG_BATCH = 8

log = structlog.get_logger("dreamer.backends.embedded")


class EmbeddedBackend:
    """A :class:`~dreamer.backends.base.MemoryBackend` stored in one local SQLite file.

    The constructor does no I/O; the file is opened (and created, with its parent directories) on
    first use. ``await EmbeddedBackend.open(path)`` opens it eagerly so a bad path fails at once.
    With an ``embedder`` (owned by the caller, not closed here), retain stores each unit's vector
    and recall is hybrid; ``backlog_batch`` bounds how many older units one recall embeds;
    ``vectors`` is the vector cache to search (default: the process's cache of this file, whose
    banks keep their vectors past one page in segment files beside it).
    """

    name = "embedded"
    reflect_uses_llm = False

    def __init__(
        self,
        path: Path,
        *,
        embedder: Embedder | None = None,
        backlog_batch: int = BACKLOG_BATCH,
        vectors: VectorCache | None = None,
    ) -> None:
        self.path = Path(path).expanduser()
        self.embedder = embedder
        self._backlog_batch = max(0, backlog_batch)
        self._connections = Connections(self.path)
        self._cache: VectorCache | None = vectors
        #: One backlog embedding at a time: two recalls at once would embed the same units twice.
        self._backlog_lock = anyio.Lock()

    @classmethod
    async def open(cls, path: Path, *, embedder: Embedder | None = None) -> EmbeddedBackend:
        """Create the backend and open (or create) its file now, so a bad path fails here."""
        backend = cls(path, embedder=embedder)
        await backend._call("open", lambda _conn: None)
        return backend

    # ---------------------------------------------------------------- the MemoryBackend contract

    async def activity(self, bank_ids: Sequence[str]) -> dict[str, BankActivity]:
        """Activity of many banks in one query of the banks' counters; unknown banks have ``exists=False``."""
        wanted = list(dict.fromkeys(bank_ids))
        if not wanted:
            return {}

        found = await self._call("activity", lambda conn: bank_rows(conn, wanted))
        return activity_from_rows(wanted, {row["bank_id"]: row for row in found})

    async def list_units_since(
        self,
        bank_id: str,
        since: datetime | None,
        *,
        exclude_tags: Sequence[str] = (),
        fact_types: Sequence[str] | None = None,
    ) -> list[MemoryUnit]:
        """Units with ``created_at >= since`` (all when None), oldest first by ``(created_at, id)``.

        A unit carrying any of ``exclude_tags`` is left out. ``fact_types`` None or empty means all.
        A naive ``since`` is taken as UTC.
        """
        sql, params = units_query(bank_id, since, exclude_tags, fact_types)

        def run(conn: sqlite3.Connection) -> list[MemoryUnit]:
            return [unit_from_row(row) for row in conn.execute(sql, params)]

        return await self._call("list_units_since", run)

    async def recall(
        self,
        bank_id: str,
        query: str,
        *,
        budget: Budget = "mid",
        max_tokens: int = 4096,
        types: Sequence[str] | None = None,
        tags: Sequence[str] | None = None,
        tags_match: TagsMatch = "any",
        limit: int | None = None,
    ) -> list[RecallItem]:
        """Full-text hits for ``query``, best first; fused with the nearest vectors given an embedder.

        ``budget`` changes nothing here (every unit is searched). ``max_tokens`` trims the list like
        Hindsight does (stop before the hit that would exceed it, text only, ~4 characters a token),
        except that the best hit is always returned, since an embedded unit is a whole item and may
        alone exceed the budget. ``types`` None or empty means all fact types. With an embedder,
        ``semantic`` is each hit's cosine to the query; when the embedder fails, the recall is
        full-text only (logged), never an error.
        """
        del budget
        match = fts_match_expression(query)
        if match is None or (limit is not None and limit <= 0):
            return []

        want = limit if limit is not None else _UNLIMITED_RECALL_WANT
        if self.embedder is not None:
            query_vectors = await self._embed([query], "recall")
            if query_vectors is not None:
                return await self._hybrid_recall(
                    bank_id, match, query_vectors[0], max_tokens, types, tags, tags_match, limit, want
                )

        def run(conn: sqlite3.Connection) -> list[RecallItem]:
            return full_text_recall(
                conn,
                bank_id,
                match,
                types=types,
                tags=tags,
                tags_match=tags_match,
                want=want,
                max_tokens=max_tokens,
                limit=limit,
            )

        return await self._call("recall", run, spare=True)

    async def prepare_recalls(self, bank_id: str, queries: Sequence[str], limit: int) -> None:
        """Ready the vector side of the recalls of ``queries`` that follow (each with ``limit``):
        the queries embedded in one batch and the bank's on-disk segments streamed once for all of
        them, instead of once a recall. Does nothing without an embedder or segments; a fault is
        logged and left to the recalls, which search as they would have."""
        if self.embedder is None or not queries:
            return
        query_vectors = await self._embed(list(queries), "recall")
        if query_vectors is None:
            return
        model_id = self.embedder.model_id
        want = fusion_depth(limit) + RESCORE_MARGIN

        await self._call(
            "recall", lambda conn: search_ahead(conn, self._vectors(), bank_id, model_id, query_vectors, want)
        )

    async def reflect(
        self,
        bank_id: str,
        query: str,
        *,
        budget: Budget = "low",
        response_schema: Mapping[str, Any] | None = None,
        tags: Sequence[str] | None = None,
        tags_match: TagsMatch = "any",
    ) -> ReflectResult:
        """An extractive answer: the units most relevant to ``query`` (else the most recent ones).

        ``text`` is one ``- <unit text>`` line per unit. With a ``response_schema`` describing a list
        of cards, ``structured`` holds one ``{"text", "kind": "fact", "source_ids": [id]}`` card per
        unit; any other schema gets ``structured=None`` and a ``structured_error`` saying why.
        """
        count = REFLECT_UNITS_BY_BUDGET.get(budget, REFLECT_UNITS_BY_BUDGET["low"])
        match = fts_match_expression(query)

        def run(conn: sqlite3.Connection) -> list[sqlite3.Row]:
            return reflect_rows(conn, bank_id, match, tags=tags, tags_match=tags_match, count=count)

        rows = await self._call("reflect", run)
        based_on = tuple(
            BasedOn(
                id=row["id"], text=row["text"], document_id=row["document_id"], fact_type=row["fact_type"]
            )
            for row in rows
        )
        return extractive_answer(based_on, response_schema)

    async def retain(self, bank_id: str, items: Sequence[RetainItem]) -> RetainResult:
        """Store a batch in one transaction (all or nothing); the first retain creates the bank.

        Invalid input (non-string metadata values or tags, text that is not valid Unicode, an empty
        bank id) raises :class:`PermanentBackendError` with status 422 before anything is written.
        An empty batch stores nothing and does not create the bank.
        """
        validate_retain(bank_id, items)
        if not items:
            return RetainResult(bank_id=bank_id, items_count=0)
        # Embedded before the write: a failing embedder leaves the units for the backlog, never unstored.
        vectors = None if self.embedder is None else await self._embed([i.content for i in items], "retain")

        def run(conn: sqlite3.Connection) -> None:
            with write_transaction(conn):
                keys = retain_batch(conn, bank_id, items)
                if vectors is not None and self.embedder is not None:
                    store_vectors(conn, self.embedder.model_id, blobs(keys, vectors))

        await self._call("retain", run)
        return RetainResult(bank_id=bank_id, items_count=len(items))

    async def consolidate(self, bank_id: str) -> None:
        """Nothing to do: the embedded store keeps no derived observations."""
        del bank_id

    async def aclose(self) -> None:
        """Close the connections; later calls raise :class:`PermanentBackendError`. Idempotent."""
        await anyio.to_thread.run_sync(self._connections.close)

    # ---------------------------------------------------------------- extras for tests and demos

    async def count_units(self, bank_id: str) -> int:
        """How many units the bank holds (0 for an unknown bank)."""

        def run(conn: sqlite3.Connection) -> int:
            row = conn.execute("SELECT unit_count FROM banks WHERE bank_id = ?", (bank_id,)).fetchone()
            return 0 if row is None else int(row[0])

        return await self._call("count_units", run)

    async def all_units(self, bank_id: str) -> list[MemoryUnit]:
        """Every unit of the bank, oldest first by ``(created_at, id)``."""
        return await self.list_units_since(bank_id, None)

    async def embed_backlog(self, bank_id: str, max_units: int) -> int:
        """Embed up to ``max_units`` of the bank's units lacking a vector of the current model.

        Newest first, in batches of ``backlog_batch``; returns how many were stored (0 without an
        embedder, or when the embedder fails).
        """
        if self.embedder is None:
            return 0
        done = 0
        while done < max_units:
            step = await self._embed_pending(bank_id, min(self._backlog_batch or max_units, max_units - done))
            if step == 0:
                break
            done += step
        return done

    # ---------------------------------------------------------------- vectors

    async def _embed(self, texts: Sequence[str], operation: str) -> NDArray[np.float32] | None:
        """The embedder's unit rows for ``texts``, or None (logged) when it fails or answers garbage."""
        assert self.embedder is not None
        return await checked_vectors(self.embedder, texts, operation)

    async def _embed_pending(self, bank_id: str, count: int) -> int:
        """Embed up to ``count`` backlog units of the bank (and drop damaged vectors); how many stored."""
        async with self._backlog_lock:
            return await self._embed_backlog(bank_id, count)

    async def _embed_backlog(self, bank_id: str, count: int) -> int:
        assert self.embedder is not None
        model_id = self.embedder.model_id
        dimension = self.embedder.dimension

        def look(conn: sqlite3.Connection) -> tuple[list[tuple[int, str]], tuple[int, ...]]:
            damaged: tuple[int, ...] = ()
            if dimension is not None:
                refreshed = self._vectors().refresh(conn, bank_id, model_id, dimension)
                bank, damaged = refreshed.bank, refreshed.damaged
                if bank is None or (bank.size >= bank.unit_count and not damaged):
                    return [], damaged
            bank_row = conn.execute("SELECT bank_no FROM banks WHERE bank_id = ?", (bank_id,)).fetchone()
            if bank_row is None or bank_row["bank_no"] is None or count <= 0:
                return [], damaged
            return backlog(conn, int(bank_row["bank_no"]), model_id, count), damaged

        pending, damaged = await self._call("recall", look)
        if damaged:
            log.warning(
                "damaged unit vectors left out of recall; they are embedded again",
                store=str(self.path),
                bank=bank_id,
                count=len(damaged),
            )
            dropped = await self._write_vectors(
                "drop damaged vectors", lambda conn: drop_vectors(conn, model_id, damaged)
            )
            if not dropped:  # reload the bank next time, so the damaged rows are seen (and dropped) again
                await self._call("recall", lambda _conn: self._vectors().forget(bank_id, model_id))
        if not pending:
            return 0
        vectors = await self._embed([text for _, text in pending], "backlog")
        if vectors is None:
            return 0
        keys: list[int | None] = [key for key, _ in pending]
        stored = await self._write_vectors(
            "embed backlog", lambda conn: store_vectors(conn, model_id, blobs(keys, vectors))
        )
        return len(pending) if stored else 0

    def _vectors(self) -> VectorCache:
        """The process's vector cache of this store file (called with the connection open)."""
        if self._cache is None:
            self._cache = shared_cache(self.path)
        return self._cache

    async def _write_vectors(self, operation: str, write: Callable[[sqlite3.Connection], None]) -> bool:
        """Run a vector write in its own transaction; a failure is logged, never raised (recall goes on)."""

        def run(conn: sqlite3.Connection) -> None:
            with write_transaction(conn):
                write(conn)

        try:
            await self._call(operation, run)
        except BackendError as exc:
            log.warning(
                "could not store unit vectors; tried again later", operation=operation, error=str(exc)
            )
            return False
        return True

    async def _hybrid_recall(
        self,
        bank_id: str,
        match: str,
        query_vector: NDArray[np.float32],
        max_tokens: int,
        types: Sequence[str] | None,
        tags: Sequence[str] | None,
        tags_match: TagsMatch,
        limit: int | None,
        want: int,
    ) -> list[RecallItem]:
        assert self.embedder is not None
        model_id = self.embedder.model_id
        await self._embed_pending(bank_id, self._backlog_batch)
        # The full-text side first, on the spare connection unless another recall reads there:
        # it reads the file alone, and it is most of a recall's time. The backlog's look, the
        # vector side and the fusion take the first connection, which guards the vector cache.
        def lexical_side(conn: sqlite3.Connection) -> list[sqlite3.Row]:
            return lexical_rows(
                conn, bank_id, match, types=types, tags=tags, tags_match=tags_match, want=want
            )

        lexical = await self._call("recall", lexical_side, spare_first=True)

        def run(conn: sqlite3.Connection) -> list[RecallItem]:
            hits = recall_hits(
                conn, self._vectors(), bank_id, lexical, query_vector, types=types, tags=tags,
                tags_match=tags_match, want=want, model_id=model_id,
            )  # fmt: skip
            return within_budget(
                hits,
                lambda hit: hit.row["text"],
                lambda hit: recall_item_from_row(hit.row, score=hit.score, semantic=hit.cosine),
                max_tokens,
                limit,
            )

        return await self._call("recall", run)

    # ---------------------------------------------------------------- plumbing

    async def _call(
        self,
        operation: str,
        work: Callable[[sqlite3.Connection], _T],
        *,
        spare: bool = False,
        spare_first: bool = False,
    ) -> _T:
        """Run ``work`` with a connection in a worker thread (``spare``, ``spare_first``: see
        :class:`Connections`)."""
        return await anyio.to_thread.run_sync(
            lambda: self._connections.run(operation, work, spare=spare, spare_first=spare_first)
        )
