"""What ``dreamer state copy`` checks on both sides (:mod:`.copy`): before writing, that the
PostgreSQL state holds nothing the file does not (:func:`refuse_foreign`); after, that the two hold
the same (:func:`compare`: rows per table, and a SHA-256 of the ledger and of the watermarks,
computed alike from each side's rows in byte order).
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dreamer.errors import StateFileError
from dreamer.state.store import StateStore

__all__ = ["Check", "CopyReport", "compare", "refuse_foreign"]

#: Rows read per page of a key scan or a checksum.
PAGE_ROWS = 5_000

# The rows of the target that must be the file's too, as they are in it: each by its unique key,
# then the columns a later write changes (a reinforcement, a finished run, a moved watermark, a
# replaced vector). A row the file does not have so is another state's, or an earlier copy's of a
# file that has changed since.
_OWN_ROWS = (
    ("ledger", "card", ("document_id", "source_ids", "profiles", "reinforcements", "last_seen_at",
                        "indexed")),
    ("ledger_vectors", "vector", ("seq", "document_id")),
    ("decisions", "decision", ("seq", "run_id", "decided_at")),
    ("runs", "run record", ("run_id", "finished_at", "outcome")),
    ("watermarks", "watermark", ("profile", "created_at", "boundary_ids", "unit_count", "rolled_at")),
    ("meta", "index version", ("key", "value")),
)


@dataclass(frozen=True, slots=True)
class Check:
    """One line of the comparison: a table's rows, or a checksum, on each side."""

    name: str
    sqlite: int | str
    postgres: int | str
    #: Rows this copy inserted (None for a checksum).
    new: int | None = None

    @property
    def ok(self) -> bool:
        return self.sqlite == self.postgres

    def to_json(self) -> dict[str, Any]:
        return {"table": self.name, "sqlite": self.sqlite, "postgres": self.postgres, "new": self.new,
                "ok": self.ok}


@dataclass(slots=True)
class CopyReport:
    """What a copy did and what the comparison found."""

    source: Path
    target: str
    checks: list[Check] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)

    @property
    def differing(self) -> list[str]:
        return [c.name for c in self.checks if not c.ok]

    def to_json(self) -> dict[str, Any]:
        return {"source": str(self.source), "target": self.target, "ok": self.ok,
                "seconds": round(self.seconds, 3), "checks": [c.to_json() for c in self.checks]}


def refuse_foreign(source: sqlite3.Connection, target: StateStore, source_path: Path) -> None:
    """:class:`StateFileError`, before anything is written, when ``target`` holds cards, run
    records or decisions that ``source`` does not: another host's state, or one a daemon wrote
    after an earlier copy. Copying into it would mix two states."""
    foreign = [
        f"{n:,} {what}{'s' if n != 1 else ''}"
        for table, what, key in _OWN_ROWS
        if (n := _not_in_source(source, target, table, key))
    ]
    if foreign:
        raise StateFileError(
            f"{target.where}: holds {', '.join(foreign)} that {source_path} does not have as they are "
            "(another host's state, or an earlier copy of a file that has changed since); nothing was "
            "written. Copy into a new schema: set [state] schema to another name (it is created), or "
            "drop this one first"
        )


def _not_in_source(source: sqlite3.Connection, target: StateStore, table: str, key: Sequence[str]) -> int:
    """How many of the target's rows of ``table`` the source has no row of the same ``key`` for,
    read a batch at a time in the order of the key's first (unique) column."""
    columns, first = ", ".join(key), key[0]
    matching = " AND ".join(
        f"s.{c} {'=' if i == 0 else 'IS'} json_extract(j.value, '$[{i}]')" for i, c in enumerate(key)
    )
    probe = f"SELECT count(*) FROM json_each(?) AS j JOIN {table} AS s ON {matching}"
    own = " WHERE key = 'index_version'" if table == "meta" else ""  # its identity rows are not copied
    missing, after = 0, None
    while True:
        page = f"SELECT {columns} FROM {table}{own}"
        page += f" {'AND' if own else 'WHERE'} {first} > ?" if after is not None else ""
        params = (PAGE_ROWS,) if after is None else (after, PAGE_ROWS)
        rows = target._conn.execute(f"{page} ORDER BY {first} LIMIT ?", params)
        if not rows:
            return missing
        found = source.execute(probe, (json.dumps([list(r) for r in rows]),)).fetchone()[0]
        missing += len(rows) - int(found)
        after = rows[-1][0]


def compare(
    source: sqlite3.Connection, target: StateStore, counts: Mapping[str, str], before: Mapping[str, int]
) -> list[Check]:
    """Rows per table on each side (``counts``: the table's name, and the query counting its rows
    copied) and how many this copy added to ``before``; then the checksums of the ledger and of the
    watermarks. Each side is read in one snapshot."""
    with target.snapshot():
        checks = [
            Check(name, _count(source, sql), after := _count(target._conn, sql), after - before.get(name, 0))
            for name, sql in counts.items()
        ]
        checks.append(Check("ledger checksum", _ledger_digest(source), _ledger_digest(target._conn)))
        checks.append(
            Check("watermarks checksum", _watermarks_digest(source), _watermarks_digest(target._conn))
        )
    return checks


def _count(conn: Any, sql: str) -> int:
    return int(conn.execute(sql).fetchone()[0])


_LEDGER_PAGE = "SELECT document_id, text, source_ids, reinforcements FROM ledger"


def _ledger_digest(conn: Any) -> str:
    """SHA-256 over each card's id, text, sources and count, in id order (byte order on both)."""
    digest, after = hashlib.sha256(), None
    while True:
        where = " WHERE document_id > ?" if after is not None else ""
        params = (after, PAGE_ROWS) if after is not None else (PAGE_ROWS,)
        rows = list(conn.execute(f"{_LEDGER_PAGE}{where} ORDER BY document_id LIMIT ?", params))
        if not rows:
            return digest.hexdigest()[:16]
        for r in rows:
            digest.update(json.dumps([r[0], r[1], r[2], int(r[3])]).encode() + b"\n")
        after = rows[-1][0]


def _watermarks_digest(conn: Any) -> str:
    """SHA-256 over every watermark, in profile order."""
    digest = hashlib.sha256()
    sql = (
        "SELECT profile, bank_id, created_at, boundary_ids, unit_count, last_write_at, rolled_at "
        "FROM watermarks ORDER BY profile"
    )
    for row in conn.execute(sql):
        digest.update(json.dumps([*row[:4], int(row[4]), *row[5:]]).encode() + b"\n")
    return digest.hexdigest()[:16]
