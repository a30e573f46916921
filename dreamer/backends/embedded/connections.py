"""The embedded store's connections: :class:`Connections`, the one an instance works on and a
spare one for reads.

Every call runs on the instance's connection under its lock. A read that holds no state of the
instance besides the file (a full-text recall) may instead take the spare connection when the first
is busy: two recalls then read at once (WAL readers do not block each other, and SQLite lets go of
the interpreter while it reads), which on two cores nearly halves the roll-up's recalls. The spare
is opened on first need. SQLite and OS errors are translated into the error tree
(:func:`~dreamer.backends.embedded.schema.translate_error`). Synchronous: the backend calls it
from worker threads.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from dreamer.backends.embedded.schema import connect, translate_error
from dreamer.errors import BackendError, PermanentBackendError

__all__ = ["Connections"]

_T = TypeVar("_T")


class Connections:
    """The store's connections to ``path``: the main one and a spare reader, each under its lock."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._main: sqlite3.Connection | None = None
        self._spare_lock = threading.Lock()
        self._spare: sqlite3.Connection | None = None
        self._closed = False

    def run(
        self,
        operation: str,
        work: Callable[[sqlite3.Connection], _T],
        *,
        spare: bool = False,
        spare_first: bool = False,
    ) -> _T:
        """``work`` on the main connection (opened on first use), or, with ``spare`` and the main
        one busy, on the spare connection rather than waiting. With ``spare_first`` the spare is
        tried first, leaving the main one to the calls that need it, and the main one only when
        the spare is busy (a read that holds the first connection would make them wait)."""
        if spare_first and self._spare_lock.acquire(blocking=False):
            try:
                return self._on_spare(operation, work)
            finally:
                self._spare_lock.release()
        if (spare or spare_first) and not self._lock.acquire(blocking=False):
            with self._spare_lock:
                return self._on_spare(operation, work)
        if not (spare or spare_first):
            self._lock.acquire()
        try:
            if self._main is None and not self._closed:
                self._main = self._open(operation)
            return self._work(operation, work, self._main)
        finally:
            self._lock.release()

    def _on_spare(self, operation: str, work: Callable[[sqlite3.Connection], _T]) -> _T:
        """``work`` on the spare connection, opened on first need (the caller holds its lock)."""
        if self._spare is None and not self._closed:
            self._spare = self._open(operation)
        return self._work(operation, work, self._spare)

    def close(self) -> None:
        """Close both connections; later calls raise :class:`PermanentBackendError`. Idempotent."""
        with self._lock:
            self._closed = True
            if self._main is not None:
                self._main.close()
                self._main = None
        with self._spare_lock:
            if self._spare is not None:
                self._spare.close()
                self._spare = None

    def _open(self, operation: str) -> sqlite3.Connection:
        try:
            return connect(self.path)
        except (sqlite3.Error, OSError) as exc:
            raise self._translated(exc, operation) from exc

    def _work(
        self, operation: str, work: Callable[[sqlite3.Connection], _T], conn: sqlite3.Connection | None
    ) -> _T:
        """``work`` on ``conn``, whose lock is held; no connection (closed): the error that says so."""
        if self._closed or conn is None:
            raise PermanentBackendError(
                f"the embedded store {self.path} was closed; open a new backend to use it",
                operation=operation,
            )
        try:
            return work(conn)
        except (sqlite3.Error, OSError) as exc:
            raise self._translated(exc, operation) from exc

    def _translated(self, exc: sqlite3.Error | OSError, operation: str) -> BackendError:
        if isinstance(exc, sqlite3.Error):
            return translate_error(exc, self.path, operation)
        return PermanentBackendError(
            f"cannot create the embedded store at {self.path} ({exc}); choose a writable location for it",
            operation=operation,
            detail=str(exc),
        )
