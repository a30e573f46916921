"""Dreamer's own state in one SQLite file: watermarks, the promotion ledger and run records.

The watermark of a profile moves only in :meth:`StateStore.commit_rollup`, in the same transaction
as the ledger rows and the run record of the promotion it covers: a crash before that commit makes
the next run redo the same promotion, which content-derived document ids make harmless.

A watermark is the newest ``created_at`` rolled up plus the ids of the units rolled up shortly
before it (see :class:`Watermark`), so units sharing a timestamp, or committed late with an older
one, are neither skipped nor repeated. Why: ``docs/design/rollup.md``.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

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


class StateStore:
    """A small synchronous store; every method is one short transaction. Safe across processes (WAL)."""

    def __init__(self, conn: sqlite3.Connection, path: Path) -> None:
        self._conn = conn
        self.path = path

    @classmethod
    def open(cls, path: Path) -> StateStore:
        path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(path, timeout=30.0, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=FULL")
        conn.execute("PRAGMA busy_timeout=30000")
        conn.executescript(_SCHEMA)
        columns = {row[1] for row in conn.execute("PRAGMA table_info(ledger)")}
        if "sketch" not in columns:
            # A state file from before sketches: the column is added empty and filled as runs read it.
            conn.execute("ALTER TABLE ledger ADD COLUMN sketch TEXT")
        return cls(conn, path)

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> StateStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- runs --------------------------------------------------------------------------------

    def record_run_start(self, run_id: str, job_id: str, started_at: datetime) -> None:
        self._conn.execute(
            "INSERT OR IGNORE INTO runs (run_id, job_id, started_at) VALUES (?, ?, ?)",
            (run_id, job_id, _iso(started_at)),
        )

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

    # --- watermarks --------------------------------------------------------------------------

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

    def store_sketches(self, sketches: Mapping[str, str]) -> None:
        """Fill in the dedup sketches of ledger cards (document id -> sketch), in one transaction.

        Only the derived `sketch` column changes; a card's text and provenance are never rewritten.
        """
        if not sketches:
            return
        conn = self._conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.executemany(
                "UPDATE ledger SET sketch = ? WHERE document_id = ?",
                [(sketch, document_id) for document_id, sketch in sketches.items()],
            )
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    def ledger_size(self) -> int:
        return int(self._conn.execute("SELECT count(*) FROM ledger").fetchone()[0])

    # --- the one commit of a roll-up ---------------------------------------------------------

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
    ) -> None:
        """Move the watermark, add the ledger rows and finish the run record, atomically."""
        now = _iso(finished_at)
        conn = self._conn
        conn.execute("BEGIN IMMEDIATE")
        try:
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
                sources = list(dict.fromkeys([*json.loads(row[0]), *r.source_ids]))
                profiles = list(dict.fromkeys([*json.loads(row[1]), r.profile]))
                conn.execute(
                    "UPDATE ledger SET reinforcements = reinforcements + 1, source_ids = ?, "
                    "profiles = ?, last_seen_at = ? WHERE document_id = ?",
                    (json.dumps(sources), json.dumps(profiles), now, r.document_id),
                )
            conn.execute(
                _END_RUN,
                (now, outcome, detail, json.dumps(dict(counts)), run_id),
            )
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
