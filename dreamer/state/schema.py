"""The state file on disk: its tables, its identity (``application_id``, ``user_version``), how a new
one is created, how an older one is upgraded, and how SQLite errors are reported.

A file that is not a Dreamer state file of a schema this code reads is refused with a
:class:`~dreamer.errors.StateFileError` naming it, never replaced.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sqlite3
import urllib.parse
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import ParamSpec, TypeVar

from dreamer.diskfaults import space_fault
from dreamer.errors import StateFileError
from dreamer.state.base import DatabaseFault
from dreamer.state.ranks import RANKS, fill_ranks

#: The ``meta`` key saying the gate rows' backfill is done (`WordIndex.gate_backfill`).
GATE_BACKFILL_DONE = "gate_backfill_done"
#: ``PRAGMA application_id`` of a Dreamer state file ("DRMR"): tells it from another program's.
APPLICATION_ID = 0x44524D52
#: ``PRAGMA user_version`` this code writes; a file of a newer version is refused, never misread.
SCHEMA_VERSION = 9
_TABLES = frozenset({"runs", "watermarks", "ledger"})
#: Every table a Dreamer state file has ever held: a file with only these is one of ours.
_KNOWN_TABLES = _TABLES | {
    "ledger_words",
    "ledger_profiles",
    "meta",
    "ledger_vectors",
    "ledger_word_counts",
    "ledger_rank",
    "decisions",
    "leases",
    "hosts",
    "ledger_gate",
}

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
    sketch         TEXT,
    indexed        INTEGER NOT NULL DEFAULT 0
);
"""

# The ledger's word index (schema 2): the dedup probes it instead of reading every card. A card's
# words are written in the same transaction as its row; `indexed` marks cards whose words are in.
_INDEXES = """
CREATE INDEX IF NOT EXISTS ledger_by_bank ON ledger (upstream_bank, promoted_at);
CREATE INDEX IF NOT EXISTS ledger_by_text ON ledger (upstream_bank, normalized);
CREATE INDEX IF NOT EXISTS ledger_unindexed ON ledger (upstream_bank) WHERE indexed = 0;
CREATE TABLE IF NOT EXISTS ledger_words (
    word        TEXT NOT NULL,
    document_id TEXT NOT NULL,
    content_n   INTEGER NOT NULL,
    residual_n  INTEGER NOT NULL,
    signature   INTEGER,
    PRIMARY KEY (word, document_id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS ledger_profiles (
    profile     TEXT NOT NULL,
    document_id TEXT NOT NULL,
    PRIMARY KEY (profile, document_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS ledger_by_supersedes ON ledger (supersedes) WHERE supersedes IS NOT NULL;
CREATE TABLE IF NOT EXISTS meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
) WITHOUT ROWID;
"""


# Each ledger card's embedding (schema 3), with the model it was made by: vectors of two models are
# never compared. ``seq`` only grows (AUTOINCREMENT, a replaced vector gets a new one), so a reader
# that keeps the vectors in memory reads only the rows written since it last looked.
_VECTORS = """
CREATE TABLE IF NOT EXISTS ledger_vectors (
    seq         INTEGER PRIMARY KEY AUTOINCREMENT,
    document_id TEXT NOT NULL UNIQUE,
    model_id    TEXT NOT NULL,
    dimension   INTEGER NOT NULL,
    vector      BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS ledger_vectors_by_model ON ledger_vectors (model_id, dimension, seq);
"""

# How the word index is read (schema 4): each side's set size beside the word, so a probe reads
# only the cards of the sizes that can reach its threshold, and how many cards hold each word, so
# it probes its rarest words. The trigger counts every word row inserted; the index is only ever
# emptied whole (``StateStore.use_index_version``), which empties the counts with it.
# What each run decided about each unit it judged (schema 6), for `dreamer explain`: one row per
# unit per run that judged it (a unit judged again after a crash gets a second row), found by the
# unit and by the card it went into or matched.
DECISIONS = """
CREATE TABLE IF NOT EXISTS decisions (
    seq         INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id      TEXT NOT NULL,
    profile     TEXT NOT NULL,
    unit_id     TEXT,
    verdict     TEXT NOT NULL,
    reason      TEXT NOT NULL,
    document_id TEXT,
    matched_id  TEXT,
    scores      TEXT NOT NULL DEFAULT '{}',
    decided_at  TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS decisions_by_unit ON decisions (unit_id) WHERE unit_id IS NOT NULL;
CREATE INDEX IF NOT EXISTS decisions_by_card ON decisions (document_id) WHERE document_id IS NOT NULL;
CREATE INDEX IF NOT EXISTS decisions_by_match ON decisions (matched_id) WHERE matched_id IS NOT NULL;
"""

# Which host runs what, and which hosts are alive (schema 7): the leases of :mod:`.leases`. Times are
# seconds since the epoch by the database's clock.
LEASES = """
CREATE TABLE IF NOT EXISTS leases (
    name       TEXT PRIMARY KEY,
    owner      TEXT NOT NULL,
    token      INTEGER NOT NULL,
    expires_at REAL NOT NULL,
    taken_at   REAL NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS leases_by_owner ON leases (owner);
CREATE TABLE IF NOT EXISTS hosts (
    owner      TEXT PRIMARY KEY,
    label      TEXT NOT NULL,
    expires_at REAL NOT NULL,
    started_at REAL NOT NULL
) WITHOUT ROWID;
"""

# How many cards hold each word (schema 3): what orders a probe's words, rarest first.
_WORD_RANGES = """
CREATE TABLE IF NOT EXISTS ledger_word_counts (
    word  TEXT PRIMARY KEY,
    cards INTEGER NOT NULL
) WITHOUT ROWID;
"""
# Each indexed card's word-set sizes and word signature (schema 8; `dreamer.state.signature`): the
# judge rules out most of the cards the word index names by these alone, without reading them. Since
# schema 9 each of the card's word rows carries the signature too, which is what a probe reads; the
# gate rows say which cards have one (`WordIndex.gate_backfill`).
_GATE = """
CREATE TABLE IF NOT EXISTS ledger_gate (
    document_id TEXT PRIMARY KEY,
    content_n   INTEGER NOT NULL,
    residual_n  INTEGER NOT NULL,
    signature   INTEGER NOT NULL
) WITHOUT ROWID;
"""
# The word index read by (word, set size) of each side, each entry with the card's gate row, so a
# probe reads no other table (schema 9; schema 3 to 8 had these ranges without the gate, which a
# probe then looked up in `ledger_gate` card by card: at 1M cards most of its time).
_WORD_GATES = """
CREATE INDEX IF NOT EXISTS ledger_words_content_gate
    ON ledger_words (word, content_n, residual_n, signature);
CREATE INDEX IF NOT EXISTS ledger_words_residual_gate
    ON ledger_words (word, residual_n, content_n, signature);
"""
_COUNT_TRIGGER = (
    "CREATE TRIGGER IF NOT EXISTS ledger_words_counted AFTER INSERT ON ledger_words BEGIN "
    "INSERT INTO ledger_word_counts (word, cards) VALUES (new.word, 1) "
    "ON CONFLICT(word) DO UPDATE SET cards = cards + 1; END"
)

_P = ParamSpec("_P")
_R = TypeVar("_R")


def state_errors(method: Callable[_P, _R]) -> Callable[_P, _R]:
    """A database error in a state operation becomes a :class:`StateFileError` naming the file (or
    the PostgreSQL database and schema)."""

    @functools.wraps(method)
    def guarded(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        try:
            return method(*args, **kwargs)
        except sqlite3.Error as exc:
            path = getattr(args[0], "path", None) or "the state file"
            raise StateFileError(f"{path}: {_what_failed(exc, path)}") from exc
        except DatabaseFault as exc:
            where = getattr(args[0], "where", "the state database")
            raise StateFileError(
                f"{where}: the state database failed: {exc}; check that PostgreSQL runs and that "
                "[state] dsn names it"
            ) from exc
        except ValueError as exc:  # a damaged row: a time or a JSON list that does not parse
            path = getattr(args[0], "where", "the state file")
            raise StateFileError(
                f"{path}: the state file holds a value that does not read back ({exc}); "
                "restore it from a backup"
            ) from exc

    return guarded


def _what_failed(exc: sqlite3.Error, path: Path | str) -> str:
    text = str(exc)
    fault = space_fault(path, exc)
    if fault:
        return fault
    if isinstance(exc, sqlite3.OperationalError) and "locked" in text:
        return f"the state file stayed locked by another process: {text}"
    return f"the state file failed: {text}; if it is damaged, move it aside and restore it from a backup"


def create(path: Path) -> None:
    """Create a new state file atomically (built beside it, then linked into place), so a file that
    exists is always a finished one: an empty file is never mistaken for a new one."""
    tmp = path.with_name(f".{path.name}.new-{os.getpid()}-{uuid.uuid4().hex[:8]}")
    try:
        conn = sqlite3.connect(tmp)
        try:
            tables = (_SCHEMA, _INDEXES, _VECTORS, _WORD_RANGES, _WORD_GATES, _GATE, RANKS, DECISIONS)
            conn.executescript("".join((*tables, LEASES)))
            conn.execute(_COUNT_TRIGGER)
            # Every card of a new file gets its gate row in its commit: no backfill to walk.
            conn.execute("INSERT INTO meta (key, value) VALUES (?, '1')", (GATE_BACKFILL_DONE,))
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


def needs_upgrade(path: Path) -> bool:
    """Whether opening the state file at ``path`` will upgrade it first (an older schema) or roll
    back a transaction a crash left in its journal (an upgrade killed halfway, most likely: it is
    then rolled back and run again); False when it does not exist or cannot be read (opening it
    then says why).

    A hot journal is told by its file: the read-only open below cannot roll it back, so it would
    read the version as committed (or fail) and answer False, and a large ledger's rollback plus
    upgrade would run without the start time it needs."""
    try:
        if os.path.getsize(f"{path}-journal") > 0:
            return True
    except OSError:
        pass
    try:
        # Read-only, and quoted: a "?" or "#" in a directory name must not end the path.
        conn = sqlite3.connect(f"file:{urllib.parse.quote(str(path))}?mode=ro", uri=True)
    except sqlite3.Error:
        return False
    try:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        has_tables = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' LIMIT 1").fetchone()
        return has_tables is not None and int(version) < SCHEMA_VERSION
    except sqlite3.Error:
        return False
    finally:
        conn.close()


def check_identity(
    conn: sqlite3.Connection, path: Path, on_upgrade: Callable[[int], None] | None = None
) -> None:
    """Refuse a file that is not a Dreamer state file this code can read; upgrade an older one,
    telling ``on_upgrade`` its schema first (an upgrade of a large ledger takes minutes)."""
    app_id = conn.execute("PRAGMA application_id").fetchone()[0]
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    tables = {
        r[0]
        for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        if not r[0].startswith("sqlite_")
    }
    # A file from before the identity pragmas has application_id 0 and only tables of ours.
    legacy = app_id == 0 and bool(tables) and tables <= _KNOWN_TABLES
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
        if on_upgrade is not None:
            on_upgrade(int(version))
        upgrade(conn)


def upgrade(conn: sqlite3.Connection) -> None:
    """Bring a state file of an older schema to this one, in one transaction, keeping every row.

    Version 0: the file from before the identity pragmas, possibly without the ``sketch`` column.
    Version 1: no word index; its cards are marked unindexed and the next roll-up indexes them.
    Version 2: no vectors; with an embedder configured, roll-ups embed the cards lazily.
    Version 3: no size-ordered word indexes nor word counts; both are built from the word index.
    Version 4: no rank rows for the peer cards; every card's are written from its ledger row.
    Version 5: no decisions table; the trail `dreamer explain` reads starts with the next run.
    Version 6: no leases nor hosts tables; both start empty.
    Version 7: no gate rows; roll-ups write them in bounded batches (`WordIndex.gate_backfill`).
    Version 8: the word index without the gate rows' signatures; copied into it from them.
    """
    conn.execute("BEGIN IMMEDIATE")
    try:
        if conn.execute("PRAGMA user_version").fetchone()[0] < SCHEMA_VERSION:
            _run_script(conn, _SCHEMA)
            columns = {row[1] for row in conn.execute("PRAGMA table_info(ledger)")}
            if "sketch" not in columns:
                # The column is added empty and filled as roll-ups read the cards.
                conn.execute("ALTER TABLE ledger ADD COLUMN sketch TEXT")
            if "indexed" not in columns:
                conn.execute("ALTER TABLE ledger ADD COLUMN indexed INTEGER NOT NULL DEFAULT 0")
            _run_script(conn, _INDEXES)
            _run_script(conn, _VECTORS)
            counted = "SELECT 1 FROM sqlite_master WHERE name = 'ledger_words_counted'"
            if conn.execute(counted).fetchone() is None:
                _run_script(conn, _WORD_RANGES)
                conn.execute("DELETE FROM ledger_word_counts")
                conn.execute(
                    "INSERT INTO ledger_word_counts (word, cards) "
                    "SELECT word, COUNT(*) FROM ledger_words GROUP BY word"
                )
                conn.execute(_COUNT_TRIGGER)
            # Which profiles each card belongs to, from the card's own JSON list.
            conn.execute("INSERT OR IGNORE INTO ledger_profiles SELECT profile, document_id FROM ledger")
            conn.execute(
                "INSERT OR IGNORE INTO ledger_profiles SELECT json_each.value, ledger.document_id "
                "FROM ledger, json_each(ledger.profiles)"
            )
            ranked = "SELECT 1 FROM sqlite_master WHERE name = 'ledger_rank'"
            if conn.execute(ranked).fetchone() is None:
                _run_script(conn, RANKS)
                fill_ranks(conn)
            _run_script(conn, DECISIONS)
            _run_script(conn, LEASES)
            _run_script(conn, _GATE)
            _gate_the_word_index(conn)
            conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
            conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
        raise


def _gate_the_word_index(conn: sqlite3.Connection) -> None:
    """Schema 9: each word row carries its card's signature, copied from the card's gate row (a
    card without one keeps NULL until the gate backfill writes both), and the word ranges become
    indexes that hold the gate. At 1M cards about two minutes, once, in the upgrade's transaction."""
    columns = {row[1] for row in conn.execute("PRAGMA table_info(ledger_words)")}
    if "signature" not in columns:
        conn.execute("ALTER TABLE ledger_words ADD COLUMN signature INTEGER")
        conn.execute(
            "UPDATE ledger_words SET signature = "
            "(SELECT g.signature FROM ledger_gate AS g WHERE g.document_id = ledger_words.document_id)"
        )
    conn.execute("DROP INDEX IF EXISTS ledger_words_by_content")
    conn.execute("DROP INDEX IF EXISTS ledger_words_by_residual")
    _run_script(conn, _WORD_GATES)


def _run_script(conn: sqlite3.Connection, script: str) -> None:
    """Run DDL statement by statement (``executescript`` would commit the open transaction)."""
    for statement in script.split(";"):
        if statement.strip():
            conn.execute(statement)
