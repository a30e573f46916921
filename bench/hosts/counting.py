"""Counting every statement a state store sends: a proxy around its connection.

The proxy stands where the store keeps its connection (an ``sqlite3.Connection``, or the
PostgreSQL pool's :class:`~dreamer.state.pgconn.PgConnection`) and counts each ``execute`` by what
it does (``BEGIN``, ``INSERT leases``, ``SELECT pg_advisory_xact_lock``, ...) and by the role of
the thread that sent it (a run, or the heartbeat). On PostgreSQL each ``execute`` is one round trip
to the server, ``BEGIN`` and ``COMMIT`` included; an ``executemany`` may be pipelined by psycopg and
counts as one. On SQLite a statement is a call into the library, not a round trip: the same counts
say how many statements the same code sends.
"""

from __future__ import annotations

import contextlib
import re
import threading
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

__all__ = ["CountingConnection", "StatementCounter", "role", "statement_kind"]

# A table: the name after INTO, FROM or UPDATE that no parenthesis follows at once, as a function's
# does (``FROM clock_timestamp()``).
_TABLE = re.compile(r"\b(?:INTO|FROM|UPDATE)\s+([A-Za-z_][A-Za-z0-9_]*)\b(?!\()", re.IGNORECASE)
_FUNCTION = re.compile(r"^SELECT\s+([A-Za-z_][A-Za-z0-9_]*)\s*\(", re.IGNORECASE)

_ROLE = threading.local()


def statement_kind(sql: str) -> str:
    """What a statement does, for the tables: its verb and its table (``UPDATE leases``), the
    function a table-less ``SELECT`` calls (``SELECT pg_advisory_xact_lock``), or the verb alone
    (``BEGIN``, ``COMMIT``)."""
    text = " ".join(sql.split())
    verb = text.split(" ", 1)[0].upper() if text else ""
    if verb in ("BEGIN", "COMMIT", "ROLLBACK"):
        return verb
    table = _TABLE.search(text)
    if table is not None:
        return f"{verb} {table.group(1)}"
    function = _FUNCTION.match(text)
    if function is not None:
        return f"SELECT {function.group(1)}"
    return verb


@contextlib.contextmanager
def role(name: str) -> Iterator[None]:
    """Statements the calling thread sends in the block count under ``name`` (``run``, ``beat``)."""
    before = getattr(_ROLE, "name", "run")
    _ROLE.name = name
    try:
        yield
    finally:
        _ROLE.name = before


class StatementCounter:
    """Statements by (role, kind), and the seconds they took; safe to add to from several threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.counts: Counter[tuple[str, str]] = Counter()
        self.seconds: Counter[tuple[str, str]] = Counter()  # of floats: Counter adds any number

    def add(self, kind: str, seconds: float) -> None:
        key = (getattr(_ROLE, "name", "run"), kind)
        with self._lock:
            self.counts[key] += 1
            self.seconds[key] += seconds  # type: ignore[assignment]

    def snapshot(self) -> tuple[Counter[tuple[str, str]], Counter[tuple[str, str]]]:
        with self._lock:
            return Counter(self.counts), Counter(self.seconds)


class CountingConnection:
    """The store's connection, each statement counted before it is passed on unchanged."""

    def __init__(self, inner: Any, counter: StatementCounter) -> None:
        self._inner = inner
        self.counter = counter

    @property
    def in_transaction(self) -> bool:
        return bool(self._inner.in_transaction)

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Any:
        started = time.perf_counter()
        try:
            return self._inner.execute(sql, params)
        finally:
            self.counter.add(statement_kind(sql), time.perf_counter() - started)

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> Any:
        # psycopg pipelines an executemany: one round trip, counted as one. With no rows nothing is
        # sent (PgConnection returns at once; sqlite3 runs nothing), and nothing is counted.
        batch = list(rows)
        started = time.perf_counter()
        try:
            return self._inner.executemany(sql, batch)
        finally:
            if batch:
                self.counter.add(statement_kind(sql) + " (many)", time.perf_counter() - started)

    def close(self) -> None:
        self._inner.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)
