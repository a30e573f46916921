"""The turn spool: conversation turns waiting to be stored, in a SQLite file of the agent's home, so
that neither a memory server that is down nor an agent process that exits or is killed loses one.

Turns are kept in arrival order. In the transaction that adds a turn, ``every_n`` turns of one
session are *sealed* into a batch with a document id of its own; batches are sent oldest first and
deleted only once the server took them, and a batch sent again (after a crash between the server's
answer and the delete) carries the same document id, which the server stores once. One process at a
time sends (a flock on ``<spool>.lock``); any number add. The spool is bounded: beyond its limits the
oldest turns go, set-aside batches first. Why, and how it behaves: ``docs/design/hermes-provider.md``.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from dreamer.text import well_formed

__all__ = [
    "SPOOL_MAX_BYTES",
    "SPOOL_MAX_TURNS",
    "Batch",
    "SpoolDepth",
    "TurnSpool",
    "spool_path",
]

#: Turns the spool keeps at most (about a week of a busy agent's turns); beyond, the oldest go.
SPOOL_MAX_TURNS = 10_000
#: Bytes of turn text the spool keeps at most (a turn is at most two sides of 4,000 characters).
SPOOL_MAX_BYTES = 64 * 1024 * 1024
#: How long a write waits for another process's transaction (the agent's turn waits this at worst).
BUSY_TIMEOUT_S = 2.0
_SCHEMA_VERSION = 1
_SCHEMA = """
CREATE TABLE IF NOT EXISTS batches (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    document_id TEXT NOT NULL UNIQUE,
    session TEXT NOT NULL,
    first_turn INTEGER NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    parked INTEGER NOT NULL DEFAULT 0,
    last_error TEXT NOT NULL DEFAULT ''
);
-- The text last: a row's other columns are read without its overflow pages.
CREATE TABLE IF NOT EXISTS turns (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    session TEXT NOT NULL,
    bytes INTEGER NOT NULL,
    added_at REAL NOT NULL,
    batch INTEGER,
    text TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS turns_of_batch ON turns (batch, id);
CREATE INDEX IF NOT EXISTS open_turns ON turns (session, id) WHERE batch IS NULL;
CREATE INDEX IF NOT EXISTS batches_in_order ON batches (parked, first_turn);
-- What the spool holds, kept by triggers: the bound is checked at every add without a scan.
CREATE TABLE IF NOT EXISTS totals (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    turns INTEGER NOT NULL,
    bytes INTEGER NOT NULL
);
INSERT OR IGNORE INTO totals (id, turns, bytes) VALUES (1, 0, 0);
CREATE TRIGGER IF NOT EXISTS turn_added AFTER INSERT ON turns BEGIN
    UPDATE totals SET turns = turns + 1, bytes = bytes + NEW.bytes WHERE id = 1;
END;
CREATE TRIGGER IF NOT EXISTS turn_removed AFTER DELETE ON turns BEGIN
    UPDATE totals SET turns = turns - 1, bytes = bytes - OLD.bytes WHERE id = 1;
END;
"""
_UNSAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")


def spool_path(directory: Path, bank_id: str) -> Path:
    """The spool file of one bank under ``directory``: its id, readable, and a short hash, so that two
    ids differing only in characters a file name cannot hold never share a file. Not the profile:
    outside an agent (``hermes memory status``) Hermes tells no profile, and the turns are the bank's.
    """
    digest = hashlib.sha256(bank_id.encode()).hexdigest()[:10]
    return directory / f"turns-{_UNSAFE_NAME.sub('-', bank_id)[:60]}-{digest}.sqlite3"


@dataclass(frozen=True, slots=True)
class Batch:
    """Turns of one session stored together as one memory, under one document id."""

    id: int
    document_id: str
    session: str
    texts: tuple[str, ...]
    #: When its first turn was added (seconds since the epoch): the memory's time.
    first_at: float
    #: Failed store attempts so far.
    attempts: int

    @property
    def content(self) -> str:
        return "\n\n".join(self.texts)

    @property
    def tags(self) -> list[str]:
        return [f"session:{self.session}"] if self.session else []

    @property
    def started_at(self) -> datetime:
        return datetime.fromtimestamp(self.first_at, UTC)


@dataclass(frozen=True, slots=True)
class SpoolDepth:
    """What waits in the spool: every turn, how many of them are in set-aside batches, and since when."""

    turns: int = 0
    parked: int = 0
    oldest_at: float | None = None


class TurnSpool:
    """The spool file (``path``), or a spool in memory only (``path`` None: nothing survives an exit).

    Safe to use from several threads; the file is opened on first use.
    """

    def __init__(
        self, path: Path | None, *, max_turns: int = SPOOL_MAX_TURNS, max_bytes: int = SPOOL_MAX_BYTES
    ) -> None:
        self.path = path
        self.max_turns = max(1, max_turns)
        self.max_bytes = max(1, max_bytes)
        self._lock = threading.RLock()
        self._conn: sqlite3.Connection | None = None
        self._drain_fd: int | None = None

    @property
    def durable(self) -> bool:
        return self.path is not None

    def __str__(self) -> str:
        return str(self.path) if self.path is not None else "memory (not kept across an exit)"

    # --- adding ------------------------------------------------------------------------------------

    def add(self, session: str, text: str, *, every_n: int, previous_session: str | None = None) -> int:
        """Keep one turn and seal what it completes: ``every_n`` turns of its session, and every turn
        of ``previous_session`` when the session changed. Returns how many old turns were dropped
        to stay within the limits. Raises ``sqlite3.Error`` (or OSError) when it cannot be kept."""
        session, text = well_formed(session), well_formed(text)
        size = len(text.encode("utf-8"))
        with self._write() as conn:
            conn.execute(
                "INSERT INTO turns (session, text, bytes, added_at) VALUES (?, ?, ?, ?)",
                (session, text, size, time.time()),
            )
            if previous_session is not None and previous_session != session:
                self._seal(conn, well_formed(previous_session), every_n, partial=True)
            self._seal(conn, session, every_n, partial=False)
            return self._bound(conn)

    def seal_open(self, every_n: int, sessions: list[str] | None = None) -> None:
        """Seal the turns not yet in a batch (of ``sessions``, or all): a closing writer's last
        turns, or those a killed process left, are sent without waiting for more."""
        with self._write() as conn:
            if sessions is None:
                rows = conn.execute("SELECT DISTINCT session FROM turns WHERE batch IS NULL").fetchall()
                sessions = [str(row[0]) for row in rows]
            for session in sessions:
                self._seal(conn, well_formed(session), every_n, partial=True)

    def _seal(self, conn: sqlite3.Connection, session: str, every_n: int, *, partial: bool) -> None:
        rows = conn.execute(
            "SELECT id FROM turns WHERE batch IS NULL AND session = ? ORDER BY id", (session,)
        ).fetchall()
        ids = [int(row[0]) for row in rows]
        size = max(1, every_n)
        for start in range(0, len(ids), size):
            chunk = ids[start : start + size]
            if len(chunk) < size and not partial:
                return
            # A new id for every batch, never derived from a counter a new file would restart:
            # a document id given again to other content makes the server replace the first one.
            document_id = f"hermes-turns-{uuid.uuid4().hex}"
            cursor = conn.execute(
                "INSERT INTO batches (document_id, session, first_turn) VALUES (?, ?, ?)",
                (document_id, session, chunk[0]),
            )
            conn.executemany(
                "UPDATE turns SET batch = ? WHERE id = ?", [(cursor.lastrowid, i) for i in chunk]
            )

    def _bound(self, conn: sqlite3.Connection) -> int:
        """Drop the oldest turns (set-aside batches first, a batch always whole) beyond the limits."""
        dropped = 0
        count, size = conn.execute("SELECT turns, bytes FROM totals").fetchone()
        while count > self.max_turns or size > self.max_bytes:
            parked = conn.execute(
                "SELECT id FROM batches WHERE parked = 1 ORDER BY first_turn LIMIT 1"
            ).fetchone()
            if parked is not None:
                where, key = "batch = ?", parked[0]
            else:
                oldest = conn.execute("SELECT id, batch FROM turns ORDER BY id LIMIT 1").fetchone()
                where, key = ("id = ?", oldest[0]) if oldest[1] is None else ("batch = ?", oldest[1])
            n, b = conn.execute(f"SELECT COUNT(*), TOTAL(bytes) FROM turns WHERE {where}", (key,)).fetchone()
            conn.execute(f"DELETE FROM turns WHERE {where}", (key,))
            if where == "batch = ?":
                conn.execute("DELETE FROM batches WHERE id = ?", (key,))
            count, size, dropped = count - n, size - b, dropped + n
        return dropped

    # --- sending -----------------------------------------------------------------------------------

    def next_batch(self) -> Batch | None:
        """The oldest sealed batch not set aside, or None."""
        with self._write() as conn:
            while True:
                row = conn.execute(
                    "SELECT id, document_id, session, attempts FROM batches WHERE parked = 0 "
                    "ORDER BY first_turn LIMIT 1"
                ).fetchone()
                if row is None:
                    return None
                turns = conn.execute(
                    "SELECT text, added_at FROM turns WHERE batch = ? ORDER BY id", (row[0],)
                ).fetchall()
                if turns:
                    texts = tuple(str(t[0]) for t in turns)
                    return Batch(
                        int(row[0]), str(row[1]), str(row[2]), texts, float(turns[0][1]), int(row[3])
                    )
                conn.execute("DELETE FROM batches WHERE id = ?", (row[0],))

    def done(self, batch_id: int) -> None:
        """The server took the batch: forget it."""
        with self._write() as conn:
            conn.execute("DELETE FROM turns WHERE batch = ?", (batch_id,))
            conn.execute("DELETE FROM batches WHERE id = ?", (batch_id,))

    def failed(self, batch_id: int, error: str, *, park: bool) -> None:
        """Count a failed attempt; ``park`` sets the batch aside (kept, skipped until :meth:`unpark`)."""
        with self._write() as conn:
            conn.execute(
                "UPDATE batches SET attempts = attempts + 1, last_error = ?, parked = ? WHERE id = ?",
                (well_formed(error)[:500], int(park), batch_id),
            )

    def unpark(self) -> int:
        """Give every set-aside batch another try (at a start: the setting that refused it may be
        fixed); returns how many there were."""
        with self._write() as conn:
            return conn.execute("UPDATE batches SET parked = 0 WHERE parked = 1").rowcount

    def depth(self) -> SpoolDepth:
        with self._lock:
            conn = self._connect()
            (turns,) = conn.execute("SELECT turns FROM totals").fetchone()
            first = conn.execute("SELECT added_at FROM turns ORDER BY id LIMIT 1").fetchone()
            (parked,) = conn.execute(
                "SELECT COUNT(*) FROM turns JOIN batches ON batches.id = turns.batch WHERE batches.parked = 1"
            ).fetchone()
        return SpoolDepth(int(turns), int(parked), None if first is None else float(first[0]))

    # --- who sends ---------------------------------------------------------------------------------

    def claim_sending(self) -> bool:
        """Become the one process that sends this spool's batches (a flock on ``<path>.lock``,
        released by :meth:`release_sending` or when the process ends, however it ends)."""
        with self._lock:
            if self._drain_fd is not None or self.path is None:
                return True
            flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
            fd = os.open(self.path.with_name(self.path.name + ".lock"), flags, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                return False
            self._drain_fd = fd
            return True

    def release_sending(self) -> None:
        with self._lock:
            fd, self._drain_fd = self._drain_fd, None
            if fd is not None:
                os.close(fd)

    # --- the file ----------------------------------------------------------------------------------

    def open(self) -> None:
        """Open (creating) the file now, so that a path that cannot be used fails here."""
        with self._lock:
            self._connect()

    def close(self) -> None:
        """Close the file (a later use opens it again); an in-memory spool stays, or it would be lost."""
        self.release_sending()
        with self._lock:
            if self._conn is not None and self.path is not None:
                self._conn.close()
                self._conn = None

    @contextlib.contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            conn = self._connect()
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    def _connect(self) -> sqlite3.Connection:
        if self._conn is not None:
            return self._conn
        if self.path is None:
            conn = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
        else:
            self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            # Conversation text: readable by the agent's user only (SQLite's -wal and -shm follow).
            os.close(os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600))
            conn = sqlite3.connect(
                self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False
            )
        try:
            version = int(conn.execute("PRAGMA user_version").fetchone()[0])
            if version > _SCHEMA_VERSION:
                raise sqlite3.DatabaseError(
                    f"written by a newer Dreamer (spool schema {version}, this one knows {_SCHEMA_VERSION})"
                )
            if self.path is not None:
                conn.execute("PRAGMA journal_mode = WAL")
                # A commit reaches the file before add returns: a killed process keeps its turns.
                conn.execute("PRAGMA synchronous = NORMAL")
            conn.executescript(_SCHEMA)
            conn.execute(f"PRAGMA user_version = {_SCHEMA_VERSION}")
        except BaseException:
            conn.close()
            raise
        self._conn = conn
        return conn
