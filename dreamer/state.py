"""Dreamer's own state in one SQLite file: watermarks, the promotion ledger and run records.

The watermark of a profile moves only in :meth:`StateStore.commit_rollup`, in the same transaction
as the ledger rows and the run record of the promotion it covers: a crash before that commit makes
the next run redo the same promotion, which content-derived document ids make harmless.

A watermark is the newest ``created_at`` rolled up plus the ids of the units rolled up shortly
before it (see :class:`Watermark`), so units sharing a timestamp, or committed late with an older
one, are neither skipped nor repeated. Why: ``docs/design/rollup.md``.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import sqlite3
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

from dreamer.errors import RunBusyError, StateFileError

#: ``PRAGMA application_id`` of a Dreamer state file ("DRMR"): tells it from another program's.
APPLICATION_ID = 0x44524D52
#: ``PRAGMA user_version`` this code writes; a file of a newer version is refused, never misread.
SCHEMA_VERSION = 1
_TABLES = frozenset({"runs", "watermarks", "ledger"})
_P = ParamSpec("_P")
_R = TypeVar("_R")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    run_id      TEXT PRIMARY KEY,
    job_id      TEXT NOT NULL,
    started_at  TEXT NOT NULL,
    finished_at TEXT,
    outcome     TEXT,
    detail      TEXT NOT NULL DEFAULT '',
    counts      TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX IF NOT EXISTS runs_by_job ON runs (job_id, started_at);
CREATE TABLE IF NOT EXISTS watermarks (
    profile       TEXT PRIMARY KEY,
    bank_id       TEXT NOT NULL,
    created_at    TEXT,
    boundary_ids  TEXT NOT NULL DEFAULT '[]',
    unit_count    INTEGER NOT NULL DEFAULT 0,
    last_write_at TEXT,
    rolled_at     TEXT
);
CREATE TABLE IF NOT EXISTS ledger (
    document_id    TEXT PRIMARY KEY,
    profile        TEXT NOT NULL,
    upstream_bank  TEXT NOT NULL,
    text           TEXT NOT NULL,
    normalized     TEXT NOT NULL,
    kind           TEXT NOT NULL DEFAULT 'fact',
    source_ids     TEXT NOT NULL DEFAULT '[]',
    profiles       TEXT NOT NULL DEFAULT '[]',
    reinforcements INTEGER NOT NULL DEFAULT 0,
    promoted_at    TEXT NOT NULL,
    last_seen_at   TEXT NOT NULL,
    supersedes     TEXT,
    run_id         TEXT NOT NULL,
    sketch         TEXT
);
CREATE INDEX IF NOT EXISTS ledger_by_bank ON ledger (upstream_bank, promoted_at);
"""


_END_RUN = "UPDATE runs SET finished_at = ?, outcome = ?, detail = ?, counts = ? WHERE run_id = ?"


def _state_errors(method: Callable[_P, _R]) -> Callable[_P, _R]:
    """An SQLite error in a state operation becomes a :class:`StateFileError` naming the file."""

    @functools.wraps(method)
    def guarded(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        try:
            return method(*args, **kwargs)
        except sqlite3.Error as exc:
            path = getattr(args[0], "path", "the state file")
            raise StateFileError(f"{path}: {_what_failed(exc)}") from exc

    return guarded


def _what_failed(exc: sqlite3.Error) -> str:
    text = str(exc)
    if "full" in text:
        return f"cannot write the state file: {text}; free space on its file system, then run again"
    if isinstance(exc, sqlite3.OperationalError) and "locked" in text:
        return f"the state file stayed locked by another process: {text}"
    return f"the state file failed: {text}; if it is damaged, move it aside and restore it from a backup"


def _create(path: Path) -> None:
    """Create a new state file atomically (built beside it, then linked into place), so a file that
    exists is always a finished one: an empty file is never mistaken for a new one."""
    tmp = path.with_name(f".{path.name}.new-{os.getpid()}-{uuid.uuid4().hex[:8]}")
    try:
        conn = sqlite3.connect(tmp)
        try:
            conn.executescript(_SCHEMA)
            conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
            conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            conn.commit()
        finally:
            conn.close()
        with contextlib.suppress(FileExistsError):  # another process created it first: use theirs
            os.link(tmp, path)
    except OSError as exc:
        raise StateFileError(f"{path}: cannot create the state file: {exc}; check state_dir") from None
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


def _check_identity(conn: sqlite3.Connection, path: Path) -> None:
    """Refuse a file that is not a Dreamer state file this code can read; upgrade an older one."""
    app_id = conn.execute("PRAGMA application_id").fetchone()[0]
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    tables = {
        r[0]
        for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        if not r[0].startswith("sqlite_")
    }
    # A file from before the identity pragmas has application_id 0 and only tables of ours.
    legacy = app_id == 0 and bool(tables) and tables <= _TABLES
    if app_id != APPLICATION_ID and not legacy and tables:
        raise StateFileError(
            f"{path}: not a Dreamer state file (it is another program's SQLite database); "
            "point state_dir at Dreamer's own directory"
        )
    if not tables:
        raise StateFileError(
            f"{path}: the state file is empty, so its watermarks and ledger are gone; restore it "
            "from a backup, or delete it to start over (every profile is then read from the beginning)"
        )
    if version > SCHEMA_VERSION:
        raise StateFileError(
            f"{path}: written by a newer Dreamer (state schema {version}; this one reads up to "
            f"{SCHEMA_VERSION}); upgrade Dreamer, or restore a backup from before the upgrade"
        )
    missing = _TABLES - tables
    if missing and not legacy:
        raise StateFileError(
            f"{path}: the state file is damaged (missing tables: {', '.join(sorted(missing))}); "
            "restore it from a backup"
        )
    if legacy or version < SCHEMA_VERSION:
        _upgrade(conn)


def _upgrade(conn: sqlite3.Connection) -> None:
    """Bring a state file of an older schema to this one, in one transaction (version 0: the file
    from before the identity pragmas, possibly without the ``sketch`` column)."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        if conn.execute("PRAGMA user_version").fetchone()[0] < SCHEMA_VERSION:
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    conn.execute(statement)
            columns = {row[1] for row in conn.execute("PRAGMA table_info(ledger)")}
            if "sketch" not in columns:
                # The column is added empty and filled as roll-ups read the cards.
                conn.execute("ALTER TABLE ledger ADD COLUMN sketch TEXT")
            conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
            conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
        raise


def _iso(ts: datetime | None) -> str | None:
    if ts is None:
        return None
    if ts.tzinfo is None:
        ts = ts.replace(tzinfo=UTC)
    return ts.astimezone(UTC).isoformat(timespec="microseconds")


def _dt(text: str | None) -> datetime | None:
    return None if text is None else datetime.fromisoformat(text)


@dataclass(frozen=True, slots=True)
class Watermark:
    """How far a profile's bank has been rolled up. ``created_at=None`` means never.

    ``seen`` holds the ids (with their times) of the units rolled up within ``overlap`` of the
    newest one. The next run reads from ``created_at - overlap`` and skips those ids, so a unit
    that shares the boundary instant, or that a slow writer committed with a slightly older
    timestamp, is neither skipped nor repeated.
    """

    created_at: datetime | None = None
    seen: Mapping[str, datetime] = field(default_factory=dict)
    unit_count: int = 0
    last_write_at: datetime | None = None
    rolled_at: datetime | None = None

    def read_from(self, overlap: timedelta) -> datetime | None:
        """Where the next listing starts."""
        return None if self.created_at is None else self.created_at - overlap

    def is_new(self, created_at: datetime, unit_id: str, overlap: timedelta = timedelta(0)) -> bool:
        """True when a unit lies after this watermark (or inside its overlap, unseen)."""
        if self.created_at is None or created_at > self.created_at:
            return True
        return created_at >= self.created_at - overlap and unit_id not in self.seen

    def advanced_to(
        self, units: Iterable[tuple[datetime, str]], overlap: timedelta = timedelta(0)
    ) -> Watermark:
        """The watermark after rolling up ``units`` (pairs of created_at and id)."""
        seen = dict(self.seen)
        newest = self.created_at
        for created_at, unit_id in units:
            seen[unit_id] = created_at
            if newest is None or created_at > newest:
                newest = created_at
        if newest is not None:
            seen = {i: t for i, t in seen.items() if t >= newest - overlap}
        return Watermark(newest, seen, self.unit_count, self.last_write_at, self.rolled_at)

    @property
    def boundary_ids(self) -> frozenset[str]:
        return frozenset(self.seen)


@dataclass(frozen=True, slots=True)
class LedgerCard:
    """A card Dreamer promoted upstream, and how often it was seen again since."""

    document_id: str
    profile: str
    upstream_bank: str
    text: str
    normalized: str
    kind: str = "fact"
    source_ids: tuple[str, ...] = ()
    profiles: tuple[str, ...] = ()
    reinforcements: int = 0
    promoted_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    last_seen_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    supersedes: str | None = None
    run_id: str = ""
    #: The dedup sketch of `text` (`dreamer.rollup.similarity.Sketch.dumps`), kept so later runs can rule
    #: this card out cheaply; None for rows written before sketches existed.
    sketch: str | None = None


@dataclass(frozen=True, slots=True)
class Reinforcement:
    """A duplicate seen again: one more count and the new sources merged into the card's provenance."""

    document_id: str
    source_ids: tuple[str, ...]
    profile: str


@dataclass(frozen=True, slots=True)
class RunRecord:
    run_id: str
    job_id: str
    started_at: datetime
    finished_at: datetime | None
    outcome: str | None
    detail: str
    counts: Mapping[str, int]


@dataclass(frozen=True, slots=True)
class RunTotal:
    """The runs of one job that ended with one outcome."""

    job_id: str
    outcome: str
    runs: int
    promoted: int
    reinforced: int
    last_finished_at: datetime | None


class StateStore:
    """A small synchronous store; every method is one short transaction. Safe across processes (WAL)."""

    def __init__(self, conn: sqlite3.Connection, path: Path) -> None:
        self._conn = conn
        self.path = path

    @classmethod
    def open(cls, path: Path) -> StateStore:
        """Open the state file, creating it when there is none. A file that is not a Dreamer state
        file of a schema this code reads (garbage, empty, another program's, a newer Dreamer's) is
        refused with :class:`StateFileError`, never replaced: that would forget every watermark."""
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.is_symlink():
            raise StateFileError(
                f"{path}: the state file is a symbolic link, which Dreamer does not follow; "
                "set state_dir to the directory that holds the real file"
            )
        if not path.exists():
            _create(path)
        try:
            conn = sqlite3.connect(path, timeout=30.0, isolation_level=None, check_same_thread=False)
        except sqlite3.Error as exc:
            raise StateFileError(f"{path}: cannot open the state file: {exc}") from None
        try:
            conn.execute("PRAGMA busy_timeout=30000")
            _check_identity(conn, path)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=FULL")
        except sqlite3.DatabaseError as exc:
            conn.close()
            raise StateFileError(
                f"{path}: not a readable state file ({exc}); move it aside and restore it from a "
                "backup, or point state_dir at a new directory to start over"
            ) from None
        except BaseException:
            conn.close()
            raise
        return cls(conn, path)

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

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> StateStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- runs --------------------------------------------------------------------------------

    @_state_errors
    def record_run_start(self, run_id: str, job_id: str, started_at: datetime) -> None:
        self._conn.execute(
            "INSERT OR IGNORE INTO runs (run_id, job_id, started_at) VALUES (?, ?, ?)",
            (run_id, job_id, _iso(started_at)),
        )

    @_state_errors
    def record_run_end(
        self,
        run_id: str,
        outcome: str,
        detail: str,
        counts: Mapping[str, int],
        finished_at: datetime,
    ) -> None:
        self._conn.execute(
            _END_RUN,
            (_iso(finished_at), outcome, detail, json.dumps(dict(counts)), run_id),
        )

    @_state_errors
    def runs(self, job_id: str | None = None, limit: int = 50) -> list[RunRecord]:
        """Most recent first."""
        sql = "SELECT run_id, job_id, started_at, finished_at, outcome, detail, counts FROM runs"
        args: tuple[Any, ...] = ()
        if job_id is not None:
            sql += " WHERE job_id = ?"
            args = (job_id,)
        sql += " ORDER BY started_at DESC, rowid DESC LIMIT ?"
        rows = self._conn.execute(sql, (*args, limit)).fetchall()
        return [
            RunRecord(r[0], r[1], _dt(r[2]) or datetime.min, _dt(r[3]), r[4], r[5], json.loads(r[6]))
            for r in rows
        ]

    @_state_errors
    def consecutive(self, job_id: str, outcome: str) -> int:
        """How many of the job's most recent finished runs in a row ended with ``outcome``."""
        n = 0
        for run in self.runs(job_id, limit=1000):
            if run.outcome is None:
                continue
            if run.outcome != outcome:
                break
            n += 1
        return n

    @_state_errors
    def run_totals(self) -> list[RunTotal]:
        """Per job and outcome: how many runs ended so, their promoted and reinforced counts added
        up, and when the last of them finished (for the operator metrics)."""
        rows = self._conn.execute(
            "SELECT job_id, outcome, COUNT(*), "
            "COALESCE(SUM(json_extract(counts, '$.promoted')), 0), "
            "COALESCE(SUM(json_extract(counts, '$.reinforced')), 0), MAX(finished_at) "
            "FROM runs WHERE outcome IS NOT NULL GROUP BY job_id, outcome ORDER BY job_id, outcome"
        ).fetchall()
        return [RunTotal(r[0], r[1], r[2], int(r[3]), int(r[4]), _dt(r[5])) for r in rows]

    # --- watermarks --------------------------------------------------------------------------

    @_state_errors
    def watermark(self, profile: str) -> Watermark:
        row = self._conn.execute(
            "SELECT created_at, boundary_ids, unit_count, last_write_at, rolled_at "
            "FROM watermarks WHERE profile = ?",
            (profile,),
        ).fetchone()
        if row is None:
            return Watermark()
        seen = json.loads(row[1])
        if isinstance(seen, list):  # written by an earlier version: ids at the boundary instant
            seen = {i: row[0] for i in seen}
        return Watermark(
            _dt(row[0]),
            {i: datetime.fromisoformat(t) for i, t in seen.items()},
            row[2],
            _dt(row[3]),
            _dt(row[4]),
        )

    # --- ledger ------------------------------------------------------------------------------

    @_state_errors
    def ledger(self, upstream_bank: str | None = None) -> list[LedgerCard]:
        sql = (
            "SELECT document_id, profile, upstream_bank, text, normalized, kind, source_ids, profiles, "
            "reinforcements, promoted_at, last_seen_at, supersedes, run_id, sketch FROM ledger"
        )
        args: tuple[str, ...] = ()
        if upstream_bank is not None:
            sql += " WHERE upstream_bank = ?"
            args = (upstream_bank,)
        sql += " ORDER BY promoted_at, document_id"
        return [
            LedgerCard(
                document_id=r[0],
                profile=r[1],
                upstream_bank=r[2],
                text=r[3],
                normalized=r[4],
                kind=r[5],
                source_ids=tuple(json.loads(r[6])),
                profiles=tuple(json.loads(r[7])),
                reinforcements=r[8],
                promoted_at=_dt(r[9]) or datetime.min,
                last_seen_at=_dt(r[10]) or datetime.min,
                supersedes=r[11],
                run_id=r[12],
                sketch=r[13],
            )
            for r in self._conn.execute(sql, args).fetchall()
        ]

    @_state_errors
    def store_sketches(self, sketches: Mapping[str, str]) -> None:
        """Fill in the dedup sketches of ledger cards (document id -> sketch), in one transaction.

        Only the derived `sketch` column changes; a card's text and provenance are never rewritten.
        """
        if not sketches:
            return
        with self._write() as conn:
            conn.executemany(
                "UPDATE ledger SET sketch = ? WHERE document_id = ?",
                [(sketch, document_id) for document_id, sketch in sketches.items()],
            )

    @_state_errors
    def ledger_size(self) -> int:
        return int(self._conn.execute("SELECT count(*) FROM ledger").fetchone()[0])

    # --- the one commit of a roll-up ---------------------------------------------------------

    @_state_errors
    def commit_rollup(
        self,
        *,
        profile: str,
        bank_id: str,
        watermark: Watermark,
        promoted: Sequence[LedgerCard],
        reinforced: Sequence[Reinforcement],
        run_id: str,
        outcome: str,
        detail: str,
        counts: Mapping[str, int],
        finished_at: datetime,
        expected: Watermark | None = None,
    ) -> None:
        """Move the watermark, add the ledger rows and finish the run record, atomically.

        ``expected`` is the watermark the run read: when the stored one is no longer it (another
        run of the profile committed meanwhile), nothing is written and :class:`RunBusyError` is
        raised, so a watermark never moves backwards. A reinforcement counts only when it brings
        source ids the card did not have, so re-reading the same units never inflates a count.
        """
        now = _iso(finished_at)
        with self._write() as conn:
            if expected is not None:
                row = conn.execute(
                    "SELECT created_at, rolled_at FROM watermarks WHERE profile = ?", (profile,)
                ).fetchone()
                stored = (row[0], row[1]) if row is not None else (None, None)
                if stored != (_iso(expected.created_at), _iso(expected.rolled_at)):
                    raise RunBusyError(
                        f"the watermark of profile {profile!r} moved during this run (another run "
                        "committed first); nothing was committed and the next run reads on from there"
                    )
            conn.execute(
                "INSERT INTO watermarks (profile, bank_id, created_at, boundary_ids, unit_count, "
                "last_write_at, rolled_at) VALUES (?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT(profile) DO UPDATE SET bank_id = excluded.bank_id, "
                "created_at = excluded.created_at, boundary_ids = excluded.boundary_ids, "
                "unit_count = excluded.unit_count, last_write_at = excluded.last_write_at, "
                "rolled_at = excluded.rolled_at",
                (
                    profile,
                    bank_id,
                    _iso(watermark.created_at),
                    json.dumps({i: _iso(t) for i, t in sorted(watermark.seen.items())}),
                    watermark.unit_count,
                    _iso(watermark.last_write_at),
                    now,
                ),
            )
            for card in promoted:
                conn.execute(
                    "INSERT INTO ledger (document_id, profile, upstream_bank, text, normalized, kind, "
                    "source_ids, profiles, reinforcements, promoted_at, last_seen_at, supersedes, run_id, "
                    "sketch) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(document_id) DO NOTHING",
                    (
                        card.document_id,
                        card.profile,
                        card.upstream_bank,
                        card.text,
                        card.normalized,
                        card.kind,
                        json.dumps(list(card.source_ids)),
                        json.dumps(list(card.profiles or (card.profile,))),
                        card.reinforcements,
                        _iso(card.promoted_at),
                        _iso(card.last_seen_at),
                        card.supersedes,
                        card.run_id,
                        card.sketch,
                    ),
                )
            for r in reinforced:
                row = conn.execute(
                    "SELECT source_ids, profiles FROM ledger WHERE document_id = ?", (r.document_id,)
                ).fetchone()
                if row is None:
                    continue
                known = json.loads(row[0])
                fresh = [s for s in dict.fromkeys(r.source_ids) if s not in set(known)]
                profiles = list(dict.fromkeys([*json.loads(row[1]), r.profile]))
                conn.execute(
                    "UPDATE ledger SET reinforcements = reinforcements + ?, source_ids = ?, "
                    "profiles = ?, last_seen_at = ? WHERE document_id = ?",
                    (
                        1 if fresh else 0,
                        json.dumps([*known, *fresh]),
                        json.dumps(profiles),
                        now,
                        r.document_id,
                    ),
                )
            conn.execute(
                _END_RUN,
                (now, outcome, detail, json.dumps(dict(counts)), run_id),
            )
