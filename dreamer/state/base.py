"""What every part of :class:`~dreamer.state.StateStore` stands on: the open connection, what it
names (a file, or a PostgreSQL schema), its SQL :class:`~dreamer.state.dialect.Dialect`, and the two
transaction shapes (one write, one read snapshot).

The parts (:mod:`.watermarks`, :mod:`.ledger`, :mod:`.wordindex`, :mod:`.vectors`, :mod:`.peerranks`,
:mod:`.runs`, :mod:`.leases`) each hold one concern's reads and writes and reach the database only
through this base, so that the specifics of holding a connection stay in one place. The connection is
an ``sqlite3.Connection`` or a :class:`~dreamer.state.pgconn.PgConnection`, which answers the same
calls.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Self
from urllib.parse import quote

from dreamer.errors import StateFileError
from dreamer.state.dialect import SQLITE, Dialect

__all__ = ["DatabaseFault", "StoreBase"]


class DatabaseFault(Exception):
    """A database other than SQLite failed a statement: its driver's error, in its words."""


class StoreBase:
    """The connection of a state store and how its transactions are opened and closed."""

    def __init__(
        self,
        conn: Any,
        path: Path | None,
        *,
        dialect: Dialect = SQLITE,
        where: str | None = None,
        lock_key: int = 0,
    ) -> None:
        self._conn = conn
        #: The state file (None for a PostgreSQL state).
        self.path = path
        #: What the store names in its messages: the file, or the database and schema.
        self.where = where if where is not None else str(path)
        self.dialect = dialect
        self._lock_key = lock_key
        #: The leases every roll-up commit checks (set for a run by ``StateStore.fenced``).
        self._fences: tuple[Any, ...] = ()
        # The file this store has open, by device and inode: a file moved onto the path, or the
        # path removed, while a long-lived store (the daemon's) holds the old one is then seen.
        self._identity = (0, 0)
        if path is not None:
            info = os.stat(path)
            self._identity = (info.st_dev, info.st_ino)

    def file_moved(self) -> str:
        """"" while the path still names the file this store has open; "removed" or "replaced"
        when it does not (writes would go to a file nobody reads). Always "" for a database that
        is not a file."""
        if self.path is None:
            return ""
        try:
            info = os.stat(self.path)
        except FileNotFoundError:
            return "removed"
        except OSError:
            return ""
        return "" if (info.st_dev, info.st_ino) == self._identity else "replaced"

    @contextlib.contextmanager
    def _write(self) -> Iterator[Any]:
        """One write transaction, one at a time across every process using the state (SQLite's
        ``BEGIN IMMEDIATE``, PostgreSQL's schema lock: see :mod:`.dialect`). A failed one is rolled
        back when it is still open, and the error that failed it is the one raised (a ROLLBACK
        after SQLite already rolled back, as on a full disk, must not replace it)."""
        conn = self._conn
        first, *then = self.dialect.begin_write
        conn.execute(first)
        try:
            for statement in then:
                conn.execute(statement.format(key=self._lock_key))
            yield conn
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                with contextlib.suppress(sqlite3.Error, DatabaseFault):
                    conn.execute("ROLLBACK")
            raise

    @contextlib.contextmanager
    def snapshot(self) -> Iterator[None]:
        """Reads in one snapshot of the file: a read transaction, so what another process commits
        meanwhile is not seen halfway (a peer card read in chunks sees one ledger)."""
        if self._conn.in_transaction:
            yield
            return
        self._conn.execute(self.dialect.begin_read)
        try:
            yield
        finally:
            with contextlib.suppress(sqlite3.Error, DatabaseFault):
                self._conn.execute("COMMIT")

    def close(self) -> None:
        self._conn.close()

    def limit_page_cache(self, kib: int) -> None:
        """Hold at most ``kib`` KiB of the file's pages in this connection's cache (SQLite's default
        is 2 MiB). For a connection kept open for a process's life that mostly writes: its cache
        fills with the pages of the rows it wrote, and that is memory the process never gives back.
        Nothing to do on PostgreSQL, whose pages the server caches."""
        if self.dialect.name == "sqlite":
            self._conn.execute(f"PRAGMA cache_size=-{max(1, int(kib))}")

    def defer_checkpoints(self) -> None:
        """Leave the write-ahead log's checkpoint to :meth:`checkpoint`: by default SQLite runs it
        in the commit that takes the log past 1,000 pages, which writes them into the file (at
        100k cards 0.16 s of a run's 0.19 s commit). For the daemon, which checkpoints once a run
        has finished. Nothing to do on PostgreSQL, whose server checkpoints on its own."""
        if self.dialect.name == "sqlite":
            self._conn.execute("PRAGMA wal_autocheckpoint=0")

    def checkpoint(self) -> int:
        """Write the log's pages back into the state file without waiting for anyone (SQLite's
        passive checkpoint: pages a reader still needs stay for the next one); how many pages of
        the log are in the file now (0 on PostgreSQL): the run's, when the checkpoint before had
        written back all before them, as the log then starts again; the same again when nothing
        was written since. On a connection of its own, opened for it: this store's
        connection stays free meanwhile (the daemon records its runs on it from the event loop).
        :class:`~dreamer.errors.StateFileError` when it fails (the file gone, not a database)."""
        if self.path is None or self.dialect.name != "sqlite":
            return 0
        try:
            conn = sqlite3.connect(f"file:{quote(str(self.path))}?mode=rw", uri=True, isolation_level=None)
            try:
                row = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
            finally:
                conn.close()
        except sqlite3.Error as exc:
            raise StateFileError(f"{self.where}: cannot checkpoint the state file: {exc}") from None
        return max(0, int(row[2])) if row is not None else 0

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
