"""What every part of :class:`~dreamer.state.StateStore` stands on: the open connection, the file it
names, and the two transaction shapes (one write, one read snapshot).

The parts (:mod:`.watermarks`, :mod:`.ledger`, :mod:`.wordindex`, :mod:`.vectors`, :mod:`.peerranks`,
:mod:`.runs`) each hold one concern's reads and writes and reach the file only through this base, so
that the SQLite specifics of holding a connection stay in one place.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Self

__all__ = ["StoreBase"]


class StoreBase:
    """The connection of a state store and how its transactions are opened and closed."""

    def __init__(self, conn: sqlite3.Connection, path: Path) -> None:
        self._conn = conn
        self.path = path
        # The file this store has open, by device and inode: a file moved onto the path, or the
        # path removed, while a long-lived store (the daemon's) holds the old one is then seen.
        info = os.stat(path)
        self._identity = (info.st_dev, info.st_ino)

    def file_moved(self) -> str:
        """"" while the path still names the file this store has open; "removed" or "replaced"
        when it does not (writes would go to a file nobody reads)."""
        try:
            info = os.stat(self.path)
        except FileNotFoundError:
            return "removed"
        except OSError:
            return ""
        return "" if (info.st_dev, info.st_ino) == self._identity else "replaced"

    @contextlib.contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction. A failed one is rolled back when it is still open, and the error
        that failed it is the one raised (a ROLLBACK after SQLite already rolled back, as on a full
        disk, must not replace it)."""
        conn = self._conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
            raise

    @contextlib.contextmanager
    def snapshot(self) -> Iterator[None]:
        """Reads in one snapshot of the file: a read transaction, so what another process commits
        meanwhile is not seen halfway (a peer card read in chunks sees one ledger)."""
        if self._conn.in_transaction:
            yield
            return
        self._conn.execute("BEGIN")
        try:
            yield
        finally:
            with contextlib.suppress(sqlite3.Error):
                self._conn.execute("COMMIT")

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
