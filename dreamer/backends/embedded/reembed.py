"""The embedded store's units given vectors of the current model, a batch at a time, for
``dreamer state reembed``: after a model change, each recall embeds only a few of a bank's units
(`backend.BACKLOG_BATCH`), so a large store would take many runs to catch up.

Each bank is walked newest first from where its last batch ended (`vector_store.backlog` with
``below``), so the pass costs each unit once however large the bank; each batch is stored in its
own transaction, and a pass stopped halfway goes on from the units still without a vector. The
embedding itself is the caller's (:data:`Embed`); the functions here only read and write the store.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import anyio

from dreamer.backends.embedded.rows import blobs
from dreamer.backends.embedded.schema import connect, translate_error, write_transaction
from dreamer.backends.embedded.vector_store import backlog, store_vectors

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

__all__ = ["Embed", "reembed_store"]

_T = TypeVar("_T")

#: The caller's embedding of a batch of texts: unit rows, or None when the embedder failed.
Embed = Callable[[Sequence[str]], Awaitable["NDArray[np.float32] | None"]]


async def reembed_store(
    path: Path,
    model_id: str,
    embed: Embed,
    *,
    batch: int,
    progress: Callable[[str, int], None] = lambda bank, done: None,
) -> dict[str, int]:
    """Give every unit of every bank of the store at ``path`` a vector of ``model_id``, ``batch``
    units at a time; the units embedded per bank. Stops at the first batch the embedder fails
    (returns None for): what was stored stays, and the failure is the caller's to report
    (``RuntimeError`` whose message is "bank '<id>'")."""
    conn = await anyio.to_thread.run_sync(_open, path)
    try:
        banks = await anyio.to_thread.run_sync(_banks, conn, path)
        done: dict[str, int] = {}
        for bank_id, bank_no in banks:
            below: int | None = None
            done[bank_id] = 0
            while True:
                pending = await anyio.to_thread.run_sync(
                    _pending, conn, path, bank_no, model_id, batch, below
                )
                if not pending:
                    break
                vectors = await embed([text for _, text in pending])
                if vectors is None:
                    raise RuntimeError(f"bank {bank_id!r}")
                rows = blobs([key for key, _ in pending], vectors)
                await anyio.to_thread.run_sync(_store, conn, path, model_id, rows)
                below = pending[-1][0]
                done[bank_id] += len(pending)
                progress(bank_id, done[bank_id])
        return done
    finally:
        conn.close()


def _open(path: Path) -> sqlite3.Connection:
    try:
        return connect(path)
    except sqlite3.Error as exc:
        raise translate_error(exc, path, "reembed") from exc


def _pending(
    conn: sqlite3.Connection, path: Path, bank_no: int, model_id: str, batch: int, below: int | None
) -> list[tuple[int, str]]:
    return _read(conn, path, lambda c: backlog(c, bank_no, model_id, batch, below=below))


def _banks(conn: sqlite3.Connection, path: Path) -> list[tuple[str, int]]:
    rows = _read(
        conn,
        path,
        lambda c: c.execute(
            "SELECT bank_id, bank_no FROM banks WHERE bank_no IS NOT NULL ORDER BY bank_id"
        ).fetchall(),
    )
    return [(str(r[0]), int(r[1])) for r in rows]


def _read(conn: sqlite3.Connection, path: Path, work: Callable[[sqlite3.Connection], _T]) -> _T:
    try:
        return work(conn)
    except sqlite3.Error as exc:
        raise translate_error(exc, path, "reembed") from exc


def _store(conn: sqlite3.Connection, path: Path, model_id: str, rows: list[tuple[int, bytes]]) -> None:
    try:
        with write_transaction(conn):
            store_vectors(conn, model_id, rows)
    except sqlite3.Error as exc:
        raise translate_error(exc, path, "reembed") from exc
