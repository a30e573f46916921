"""The embedded store's file: its schema, how it is opened, upgraded and written.

The schema (tables, the full-text index, the tag table and per-bank unit counts, the units' vectors,
the triggers that keep them in step with ``units`` and that keep each unit's key inside its bank's
range) and its
version in ``PRAGMA user_version``; the layout of unit keys (``bank_no << BANK_KEY_BITS`` plus the
unit's number in the bank) and of times (fixed-width UTC text, so text order is time order);
:func:`connect`, which opens a file in WAL mode with a busy timeout and creates or upgrades its
schema in one transaction (a file from a newer Dreamer is refused); :func:`write_transaction`, the
``BEGIN IMMEDIATE`` every write runs in; and :func:`translate_error`, which sorts SQLite's errors
into transient and permanent ones.

Why keys are bank-scoped and how an upgrade behaves: ``docs/design/embedded-store.md``.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from dreamer.diskfaults import space_fault
from dreamer.errors import BackendError, PermanentBackendError, TransientBackendError

__all__ = [
    "BANK_KEY_BITS",
    "BUSY_TIMEOUT_MS",
    "KEY_MASK",
    "MAX_BANK_NO",
    "SCHEMA_VERSION",
    "UNIT_COLUMNS",
    "as_utc",
    "bank_key_range",
    "connect",
    "format_time",
    "parse_time",
    "translate_error",
    "write_transaction",
]

SCHEMA_VERSION = 4
#: A unit's key is ``bank_no << BANK_KEY_BITS`` plus its number in the bank, so each bank owns one
#: contiguous range (docs/design/embedded-store.md): up to 2**40 - 1 units per bank, 2**23 - 1 banks.
BANK_KEY_BITS = 40
KEY_MASK = (1 << BANK_KEY_BITS) - 1
MAX_BANK_NO = (1 << (63 - BANK_KEY_BITS)) - 1
#: How long a connection waits for another process's write lock before giving up.
BUSY_TIMEOUT_MS = 30_000

_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS banks (
    bank_id       TEXT PRIMARY KEY,
    created_at    TEXT NOT NULL,
    last_write_at TEXT,
    bank_no       INTEGER,
    unit_count    INTEGER NOT NULL DEFAULT 0,
    vector_drops  INTEGER NOT NULL DEFAULT 0
);
CREATE UNIQUE INDEX IF NOT EXISTS banks_by_no ON banks (bank_no);
CREATE TABLE IF NOT EXISTS units (
    seq         INTEGER PRIMARY KEY,
    id          TEXT NOT NULL UNIQUE,
    bank_id     TEXT NOT NULL,
    text        TEXT NOT NULL,
    fact_type   TEXT NOT NULL DEFAULT 'world',
    context     TEXT,
    document_id TEXT,
    tags        TEXT NOT NULL DEFAULT '[]',
    metadata    TEXT NOT NULL DEFAULT '{{}}',
    created_at  TEXT NOT NULL,
    mentioned_at TEXT,
    proof_count INTEGER NOT NULL DEFAULT 1
);
CREATE INDEX IF NOT EXISTS units_by_bank_time ON units (bank_id, created_at, id);
CREATE INDEX IF NOT EXISTS units_by_document ON units (bank_id, document_id);
CREATE TABLE IF NOT EXISTS documents (
    bank_id      TEXT NOT NULL,
    document_id  TEXT NOT NULL,
    content_hash TEXT NOT NULL,
    created_at   TEXT NOT NULL,
    updated_at   TEXT NOT NULL,
    PRIMARY KEY (bank_id, document_id)
);
CREATE VIRTUAL TABLE IF NOT EXISTS units_fts USING fts5(
    text, content='units', content_rowid='seq', tokenize='unicode61 remove_diacritics 2'
);
CREATE TRIGGER IF NOT EXISTS units_fts_insert AFTER INSERT ON units BEGIN
    INSERT INTO units_fts (rowid, text) VALUES (new.seq, new.text);
END;
CREATE TRIGGER IF NOT EXISTS units_fts_delete AFTER DELETE ON units BEGIN
    INSERT INTO units_fts (units_fts, rowid, text) VALUES ('delete', old.seq, old.text);
END;
CREATE TRIGGER IF NOT EXISTS units_fts_update AFTER UPDATE OF text ON units BEGIN
    INSERT INTO units_fts (units_fts, rowid, text) VALUES ('delete', old.seq, old.text);
    INSERT INTO units_fts (rowid, text) VALUES (new.seq, new.text);
END;
CREATE TABLE IF NOT EXISTS unit_tags (
    unit_key INTEGER NOT NULL,
    tag      TEXT NOT NULL,
    PRIMARY KEY (unit_key, tag)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS unit_tags_by_tag ON unit_tags (tag, unit_key);
CREATE TRIGGER IF NOT EXISTS units_tags_insert AFTER INSERT ON units BEGIN
    INSERT OR IGNORE INTO unit_tags (unit_key, tag) SELECT new.seq, value FROM json_each(new.tags);
END;
CREATE TRIGGER IF NOT EXISTS units_tags_delete AFTER DELETE ON units BEGIN
    DELETE FROM unit_tags WHERE unit_key = old.seq;
END;
CREATE TRIGGER IF NOT EXISTS units_tags_update AFTER UPDATE OF seq, tags ON units BEGIN
    DELETE FROM unit_tags WHERE unit_key = old.seq;
    INSERT OR IGNORE INTO unit_tags (unit_key, tag) SELECT new.seq, value FROM json_each(new.tags);
END;
CREATE TRIGGER IF NOT EXISTS units_count_insert AFTER INSERT ON units BEGIN
    UPDATE banks SET unit_count = unit_count + 1 WHERE bank_id = new.bank_id;
END;
CREATE TRIGGER IF NOT EXISTS units_count_delete AFTER DELETE ON units BEGIN
    UPDATE banks SET unit_count = unit_count - 1 WHERE bank_id = old.bank_id;
END;
CREATE TRIGGER IF NOT EXISTS units_count_move AFTER UPDATE OF bank_id ON units BEGIN
    UPDATE banks SET unit_count = unit_count - 1 WHERE bank_id = old.bank_id;
    UPDATE banks SET unit_count = unit_count + 1 WHERE bank_id = new.bank_id;
END;
CREATE TABLE IF NOT EXISTS unit_vectors (
    vec_no   INTEGER PRIMARY KEY AUTOINCREMENT,
    unit_key INTEGER NOT NULL,
    model_id TEXT NOT NULL,
    vector   BLOB NOT NULL,
    UNIQUE (unit_key, model_id)
);
CREATE TRIGGER IF NOT EXISTS unit_vectors_drop AFTER DELETE ON unit_vectors BEGIN
    UPDATE banks SET vector_drops = vector_drops + 1 WHERE bank_no = old.unit_key >> {BANK_KEY_BITS};
END;
CREATE TRIGGER IF NOT EXISTS units_vectors_delete AFTER DELETE ON units BEGIN
    DELETE FROM unit_vectors WHERE unit_key = old.seq;
END;
CREATE TRIGGER IF NOT EXISTS units_vectors_update AFTER UPDATE OF seq, text ON units BEGIN
    DELETE FROM unit_vectors WHERE unit_key = old.seq;
END;
CREATE TRIGGER IF NOT EXISTS units_key_in_bank AFTER INSERT ON units
WHEN new.seq >> {BANK_KEY_BITS} IS NOT (SELECT bank_no FROM banks WHERE bank_id = new.bank_id)
BEGIN
    SELECT RAISE(
        ABORT, 'unit key outside its bank range: this store was upgraded; restart every Dreamer using it'
    );
END;
PRAGMA user_version = {SCHEMA_VERSION};
"""


#: The ``units`` columns a :class:`~dreamer.backends.base.MemoryUnit` is read from (table alias ``u``).
UNIT_COLUMNS = (
    "u.id, u.bank_id, u.text, u.fact_type, u.context, u.document_id, u.tags, u.metadata, "
    "u.created_at, u.mentioned_at, u.proof_count"
)


def bank_key_range(bank_no: int) -> tuple[int, int]:
    """The first and last unit key (``units.seq``, the full-text rowid) a bank may hold."""
    first = bank_no << BANK_KEY_BITS
    return first, first | KEY_MASK


def as_utc(moment: datetime) -> datetime:
    """Aware UTC; a naive datetime is taken to be UTC already."""
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def format_time(moment: datetime) -> str:
    """Fixed-width ISO 8601 in UTC with microseconds, so text order is time order."""
    return as_utc(moment).isoformat(timespec="microseconds")


def parse_time(value: str | None) -> datetime | None:
    """A time stored by :func:`format_time`, back as an aware datetime; None stays None."""
    return None if value is None else datetime.fromisoformat(value)


def connect(path: Path) -> sqlite3.Connection:
    """Open (creating if needed) the store: WAL, busy timeout, schema."""
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(
        path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None, check_same_thread=False
    )
    try:
        conn.row_factory = sqlite3.Row
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        version = _schema_version(conn, path)
        _enable_wal(conn, path)
        if version < SCHEMA_VERSION:
            with write_transaction(conn):
                _upgrade_schema(conn, path)
    except BaseException:
        conn.close()
        raise
    return conn


@contextmanager
def write_transaction(conn: sqlite3.Connection) -> Iterator[None]:
    """``BEGIN IMMEDIATE`` … ``COMMIT``, rolled back on any error.

    IMMEDIATE takes the write lock up front, so a writer waits (busy_timeout) instead of failing
    when it would upgrade a read snapshot that another process has made stale.
    """
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def translate_error(exc: sqlite3.Error, path: Path, operation: str) -> BackendError:
    """Map a SQLite error to the error tree: lock and I/O trouble may pass, the rest will not."""
    fault = space_fault(path, exc, f"the embedded store {path}")
    if fault and "read-only" not in fault:  # a full disk passes once space is freed
        return TransientBackendError(fault, operation=operation)
    if fault:
        return PermanentBackendError(fault, operation=operation, detail=str(exc))
    if isinstance(exc, sqlite3.OperationalError) and (
        _is_busy(exc) or "disk i/o" in str(exc).lower() or "disk is full" in str(exc).lower()
    ):
        return TransientBackendError(
            f"the embedded store {path} is busy or unavailable ({exc}); try again later",
            operation=operation,
        )
    return PermanentBackendError(
        f"the embedded store {path} cannot be used ({exc}); check that the path is a writable "
        "Dreamer store file",
        operation=operation,
        detail=str(exc),
    )


def _schema_version(conn: sqlite3.Connection, path: Path) -> int:
    """The file's schema version; a newer one than this code knows is refused."""
    version = int(conn.execute("PRAGMA user_version").fetchone()[0])
    if version > SCHEMA_VERSION:
        raise PermanentBackendError(
            f"{path} was written by a newer Dreamer (store schema {version}, this one knows "
            f"{SCHEMA_VERSION}); upgrade Dreamer or point the embedded backend at another file",
            operation="open",
        )
    return version


def _upgrade_schema(conn: sqlite3.Connection, path: Path) -> None:
    """Create or upgrade the schema inside the caller's write transaction.

    The version is read again under the write lock: another process may have upgraded the file
    since this connection first looked, and must not be upgraded twice.
    """
    version = _schema_version(conn, path)
    if version == SCHEMA_VERSION:
        return
    if version == 1:
        _migrate_from_v1(conn, path)
    if version in (1, 2):
        conn.execute("ALTER TABLE banks ADD COLUMN unit_count INTEGER NOT NULL DEFAULT 0")
    if version in (1, 2, 3):
        conn.execute("ALTER TABLE banks ADD COLUMN vector_drops INTEGER NOT NULL DEFAULT 0")
    _create_schema(conn)
    if version in (1, 2):
        _fill_tags_and_counts(conn)


def _fill_tags_and_counts(conn: sqlite3.Connection) -> None:
    """Fill the tag table and the per-bank unit counts (schema 3) from the units already stored."""
    conn.execute(
        "INSERT OR IGNORE INTO unit_tags (unit_key, tag)"
        " SELECT u.seq, t.value FROM units u, json_each(u.tags) t"
    )
    conn.execute(
        "UPDATE banks SET unit_count = (SELECT COUNT(*) FROM units u WHERE u.bank_id = banks.bank_id)"
    )


def _migrate_from_v1(conn: sqlite3.Connection, path: Path) -> None:
    """Give banks their number and units bank-scoped keys, then rebuild the full-text index.

    Runs inside the caller's transaction: it only adds a column and renumbers keys (ids, texts and
    times are untouched), and any failure rolls all of it back.
    """
    conn.execute("ALTER TABLE banks ADD COLUMN bank_no INTEGER")
    # Every unit needs a bank to get a key range; retain always writes the bank first, so this only
    # repairs a file edited by hand rather than leaving its units out of recall.
    conn.execute(
        """
        INSERT INTO banks (bank_id, created_at, last_write_at)
        SELECT bank_id, MIN(created_at), MAX(created_at) FROM units
        WHERE bank_id NOT IN (SELECT bank_id FROM banks) GROUP BY bank_id
        """
    )
    bank_count = int(conn.execute("SELECT COUNT(*) FROM banks").fetchone()[0])
    if bank_count > MAX_BANK_NO:
        raise PermanentBackendError(
            f"{path} holds {bank_count} banks, more than an embedded store supports ({MAX_BANK_NO}); "
            "split the banks across several store files",
            operation="open",
        )
    conn.execute("CREATE TEMP TABLE bank_numbers (bank_id TEXT PRIMARY KEY, bank_no INTEGER NOT NULL)")
    conn.execute(
        "INSERT INTO temp.bank_numbers (bank_id, bank_no)"
        " SELECT bank_id, ROW_NUMBER() OVER (ORDER BY created_at, bank_id) FROM main.banks"
    )
    conn.execute(
        "UPDATE banks SET bank_no ="
        " (SELECT n.bank_no FROM temp.bank_numbers n WHERE n.bank_id = banks.bank_id)"
    )
    conn.execute("DROP TABLE temp.bank_numbers")

    conn.execute("CREATE TEMP TABLE unit_keys (old_seq INTEGER PRIMARY KEY, new_seq INTEGER NOT NULL)")
    conn.execute(
        f"""
        INSERT INTO temp.unit_keys (old_seq, new_seq)
        SELECT u.seq,
               (b.bank_no << {BANK_KEY_BITS}) + ROW_NUMBER() OVER (PARTITION BY u.bank_id ORDER BY u.seq)
        FROM main.units u JOIN main.banks b ON b.bank_id = u.bank_id
        """
    )
    highest = conn.execute("SELECT MAX(seq) FROM units").fetchone()[0]
    if highest is not None and int(highest) > KEY_MASK:
        # An old key could equal a new one while the rows are being renumbered; negative keys cannot.
        conn.execute("UPDATE units SET seq = -seq")
    conn.execute(
        "UPDATE units SET seq = (SELECT k.new_seq FROM temp.unit_keys k WHERE k.old_seq = abs(units.seq))"
    )
    conn.execute("DROP TABLE temp.unit_keys")
    conn.execute("INSERT INTO units_fts (units_fts) VALUES ('rebuild')")
    # Both checks raise (and so roll the upgrade back) rather than commit a store recall would misread.
    misplaced = conn.execute(
        f"SELECT COUNT(*) FROM units u WHERE u.seq >> {BANK_KEY_BITS}"
        " IS NOT (SELECT b.bank_no FROM banks b WHERE b.bank_id = u.bank_id)"
    ).fetchone()[0]
    if misplaced:
        raise PermanentBackendError(
            f"upgrading {path} left {misplaced} units outside their bank's key range; the file was "
            "not changed, report this with a copy of the file",
            operation="open",
        )
    conn.execute("INSERT INTO units_fts (units_fts) VALUES ('integrity-check')")


def _enable_wal(conn: sqlite3.Connection, path: Path) -> None:
    """Switch to WAL; retried because another process may be switching the same new file."""
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    while True:
        try:
            mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        except sqlite3.OperationalError as exc:
            if not _is_busy(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.05)
            continue
        if str(mode).lower() != "wal":
            raise PermanentBackendError(
                f"could not switch {path} to WAL journaling (got {mode!r}); "
                "the embedded store needs a local filesystem that supports shared memory",
                operation="open",
            )
        return


def _create_schema(conn: sqlite3.Connection) -> None:
    """Create the tables inside the caller's transaction (``executescript`` would commit early)."""
    for statement in _split_sql(_SCHEMA):
        conn.execute(statement)


def _split_sql(script: str) -> list[str]:
    """Split a script into statements, keeping trigger bodies (which contain ``;``) whole."""
    statements: list[str] = []
    current = ""
    for line in script.splitlines(keepends=True):
        current += line
        if sqlite3.complete_statement(current):
            if current.strip():
                statements.append(current.strip())
            current = ""
    return statements


def _is_busy(exc: sqlite3.Error) -> bool:
    message = str(exc).lower()
    return "locked" in message or "busy" in message
