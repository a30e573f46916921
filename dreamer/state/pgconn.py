"""A PostgreSQL connection pool that the state store's parts use as they use an SQLite connection.

The parts call ``execute`` and ``executemany`` with ``?`` placeholders and open transactions with
``BEGIN`` ... ``COMMIT`` (:mod:`.base`). Here a statement outside a transaction borrows a pooled
connection for itself alone; a ``BEGIN`` pins one to the calling thread until its ``COMMIT`` or
``ROLLBACK``, so a worker thread's commit and the event loop's reads never share a transaction.
Rows are fetched before the connection goes back to the pool.

A driver error becomes :class:`~dreamer.state.base.DatabaseFault`, which the store reports as a
:class:`~dreamer.errors.StateFileError` naming the database (never its password).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import psycopg
import psycopg_pool

from dreamer.state.base import DatabaseFault

__all__ = ["PgConnection", "Rows"]


class Rows(list[tuple[Any, ...]]):
    """A statement's rows, already fetched: iterated, or read with ``fetchone`` / ``fetchall``."""

    def fetchone(self) -> tuple[Any, ...] | None:
        return self[0] if self else None

    def fetchall(self) -> list[tuple[Any, ...]]:
        return list(self)


@functools.lru_cache(maxsize=512)
def _placeholders(sql: str) -> tuple[str, bool]:
    """``sql`` with psycopg's placeholders for ``?`` (a literal ``%`` doubled), and whether it has
    any: the state store's statements hold no ``?`` inside a string literal."""
    if "?" not in sql:
        return sql, False
    return sql.replace("%", "%%").replace("?", "%s"), True


class PgConnection:
    """The pool behind a PostgreSQL state store, with the sqlite3 connection's calls the store uses."""

    def __init__(
        self, pool: psycopg_pool.ConnectionPool[Any], *, on_close: Callable[[], None] | None = None
    ) -> None:
        self._pool = pool
        self._local = threading.local()
        self._on_close = on_close
        self._closed = False

    @property
    def in_transaction(self) -> bool:
        """Whether the calling thread has a transaction open."""
        return getattr(self._local, "conn", None) is not None

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Rows:
        head = sql.lstrip()[:8].upper()
        if head.startswith("BEGIN"):
            return self._begin(sql)
        if head.startswith(("COMMIT", "ROLLBACK")):
            return self._end(sql)
        return self._on_connection(lambda conn: _run(conn, sql, params))

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        batch = [tuple(r) for r in rows]
        if not batch:
            return
        text, _ = _placeholders(sql)

        def many(conn: psycopg.Connection[Any]) -> Rows:
            with conn.cursor() as cur:
                cur.executemany(text, batch)
            return Rows()

        self._on_connection(many)

    def close(self) -> None:
        """Give the pool back (``on_close``: a pool shared by several stores closes with the last);
        a second close does nothing."""
        if self._closed:
            return
        self._closed = True
        if self._on_close is not None:
            self._on_close()
        else:
            self._pool.close()

    def _on_connection(self, work: Any) -> Rows:
        pinned = getattr(self._local, "conn", None)
        try:
            if pinned is not None:
                return work(pinned)  # type: ignore[no-any-return]
            with self._pool.connection() as conn:
                return work(conn)  # type: ignore[no-any-return]
        except (psycopg.Error, psycopg_pool.PoolTimeout) as exc:
            raise DatabaseFault(_message(exc)) from exc

    def _begin(self, sql: str) -> Rows:
        if self.in_transaction:
            raise DatabaseFault("a transaction is already open on this thread")
        try:
            conn = self._pool.getconn()
        except psycopg_pool.PoolTimeout as exc:
            raise DatabaseFault(_message(exc)) from exc
        try:
            conn.execute(sql)
        except psycopg.Error as exc:
            self._pool.putconn(conn)
            raise DatabaseFault(_message(exc)) from exc
        self._local.conn = conn
        return Rows()

    def _end(self, sql: str) -> Rows:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            return Rows()
        self._local.conn = None
        try:
            conn.execute(sql)
        except psycopg.Error as exc:
            raise DatabaseFault(_message(exc)) from exc
        finally:
            self._pool.putconn(conn)
        return Rows()


def _run(conn: psycopg.Connection[Any], sql: str, params: Sequence[Any]) -> Rows:
    text, has = _placeholders(sql)
    with conn.cursor() as cur:
        cur.execute(text, tuple(params) if has else None)
        return Rows(cur.fetchall()) if cur.description is not None else Rows()


def _message(exc: BaseException) -> str:
    """The driver's words for a failure, on one line (they never hold a password: it is not in the
    connection string)."""
    text = " ".join(str(exc).split())
    return text or type(exc).__name__
