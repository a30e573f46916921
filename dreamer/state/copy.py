"""Copying a SQLite state file into a PostgreSQL state (``dreamer state copy``): every table but the
leases and the host list, checked at the end.

The file is read through a read-only connection (``mode=ro``), in one read transaction, so the copy
is of one moment of it and nothing is ever written to it. A file of an older schema is upgraded in a
temporary copy first, never in place.

Rows go into PostgreSQL in batches of :data:`BATCH_ROWS`, each one write transaction of the target
store (its schema lock, :meth:`~dreamer.state.base.StoreBase._write`), so a daemon reading the
schema meanwhile never sees half a batch. Every insert is ``ON CONFLICT DO NOTHING`` on the table's
key: a copy run again inserts nothing new, and one killed halfway (its open batch rolled back by
PostgreSQL) finishes on the next run. The vectors and decisions keep their ``seq`` (``OVERRIDING
SYSTEM VALUE``, then the identity's next value is set past the largest); the run records are
inserted in the file's order, so they list in it. The watermarks are copied last, as they are: a
copy killed before them leaves no watermark claiming cards that are not there yet.

The word counts are the file's, set after the words; the trigger that would count the words as
they go in is turned off inside each batch's transaction when this role owns the table (it is on
again before the commit, so no one else ever sees it off).

Before writing anything, the target is refused (:class:`StateFileError`) when it holds cards,
vectors, decisions, run records, watermarks or an index version the file does not have as they are:
another host's state, or an earlier copy of a file that has changed since. At the end the two sides
are compared: rows per table, and a SHA-256 of the ledger and of the watermarks computed alike on
both (:mod:`.copycheck`).

That a killed copy finishes is tested with a real SIGKILL of a ``dreamer state copy`` process
inside the open transaction of its fourth batch, injected at the transport (a wrapper of
:meth:`~dreamer.state.pgconn.PgConnection.execute` in the test's child process,
``tests/integration/state/test_copy.py``); this module has no hook for it.
"""

from __future__ import annotations

import contextlib
import sqlite3
import tempfile
import time
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from dreamer.errors import StateFileError
from dreamer.state.base import DatabaseFault
from dreamer.state.copycheck import CopyReport, compare, refuse_foreign
from dreamer.state.schema import check_identity
from dreamer.state.store import StateStore

__all__ = ["BATCH_ROWS", "TABLES", "CopyReport", "copy_state", "open_source"]

#: Rows per batch (one PostgreSQL transaction).
BATCH_ROWS = 5_000

#: ``progress(table, rows done, rows in the table)``, after each batch.
Progress = Callable[[str, int, int], None]


@dataclass(frozen=True, slots=True)
class Table:
    """A table copied: its columns with their PostgreSQL types, the order its rows are read and
    inserted in, and what an insert does with a row already there."""

    name: str
    columns: tuple[tuple[str, str], ...]
    order: str
    conflict: str = "ON CONFLICT DO NOTHING"
    where: str = ""
    #: Its ``seq`` is kept (an identity column GENERATED ALWAYS on PostgreSQL).
    keeps_seq: bool = False
    #: The trigger that derives another table's rows from this one's, turned off while copying
    #: when it can be (the derived table is copied too).
    trigger: str = ""
    #: What a column is read from the file as, when not as it is (column -> SQLite expression).
    reads: tuple[tuple[str, str], ...] = ()

    def select(self) -> str:
        where = f" WHERE {self.where}" if self.where else ""
        reads = dict(self.reads)
        columns = ", ".join(f"{reads[c]} AS {c}" if c in reads else c for c, _ in self.columns)
        return f"SELECT {columns} FROM {self.name}{where} ORDER BY {self.order}"

    def insert(self) -> str:
        """One statement per batch: the batch's columns as arrays, unnested in their order."""
        names = ", ".join(c for c, _ in self.columns)
        arrays = ", ".join(f"CAST(? AS {kind}[])" for _, kind in self.columns)
        overriding = " OVERRIDING SYSTEM VALUE" if self.keeps_seq else ""
        return (
            f"INSERT INTO {self.name} ({names}){overriding} SELECT {names} FROM unnest({arrays}) "
            f"WITH ORDINALITY AS u({names}, n) ORDER BY n {self.conflict}"
        )

    def count(self) -> str:
        where = f" WHERE {self.where}" if self.where else ""
        return f"SELECT count(*) FROM {self.name}{where}"


def _text(*names: str) -> tuple[tuple[str, str], ...]:
    return tuple((n, "text") for n in names)


_LEDGER = (
    *_text("document_id", "profile", "upstream_bank", "text", "normalized", "kind", "source_ids", "profiles"),
    ("reinforcements", "bigint"),
    *_text("promoted_at", "last_seen_at", "supersedes", "run_id", "sketch"),
    ("indexed", "integer"),
)
_RANK = (
    *_text("upstream_bank", "scope"),
    ("tier", "integer"),
    ("neg_reinforcements", "bigint"),
    ("neg_sources", "bigint"),
    ("neg_promoted", "float8"),
    ("document_id", "text"),
)
_WATERMARKS = Table(
    "watermarks",
    (*_text("profile", "bank_id", "created_at", "boundary_ids"), ("unit_count", "bigint"),
     *_text("last_write_at", "rolled_at")),
    "profile",
)

# A gate the file's store reads as none (`wordindex._gate_row`: a value SQLite keeps as text, a
# fraction or bytes) is copied as one PostgreSQL's reads as none too, never as the bigint the cast
# would make of it (2.5 -> 2, x'00' -> 0): a signature of made-up bits hides a card that passes the
# gate. A word row's signature goes NULL (its card then read in full, as in the file) when any of
# the three values it is read with is damaged; a gate row (NOT NULL) keeps -1, which reads as
# damaged, in a damaged value's place.
_INTEGER = "typeof({0}) = 'integer'"
_WORD_GATE = (
    "CASE WHEN " + " AND ".join(_INTEGER.format(c) for c in ("content_n", "residual_n", "signature"))
    + " THEN signature END"
)


def _gate_value(column: str) -> tuple[str, str]:
    return column, f"CASE WHEN {_INTEGER.format(column)} THEN {column} ELSE -1 END"


#: Every table copied, in the order copied: the watermarks last.
TABLES: tuple[Table, ...] = (
    Table("ledger", _LEDGER, "document_id"),
    Table("ledger_profiles", _text("profile", "document_id"), "profile, document_id"),
    Table(
        "ledger_words",
        (*_text("word", "document_id"), ("content_n", "integer"), ("residual_n", "integer"),
         ("signature", "bigint")),
        "word, document_id",
        trigger="ledger_words_counted",
        reads=(("signature", _WORD_GATE),),
    ),
    # Set to the file's own after the words (which the trigger, when on, has counted already).
    Table(
        "ledger_word_counts",
        (("word", "text"), ("cards", "bigint")),
        "word",
        conflict="ON CONFLICT (word) DO UPDATE SET cards = excluded.cards "
        "WHERE ledger_word_counts.cards IS DISTINCT FROM excluded.cards",
    ),
    Table(
        "ledger_gate",
        (("document_id", "text"), ("content_n", "integer"), ("residual_n", "integer"),
         ("signature", "bigint")),
        "document_id",
        reads=tuple(_gate_value(c) for c in ("content_n", "residual_n", "signature")),
    ),
    Table("ledger_rank", _RANK, ", ".join(c for c, _ in _RANK)),
    Table(
        "ledger_vectors",
        (("seq", "bigint"), *_text("document_id", "model_id"), ("dimension", "integer"), ("vector", "bytea")),
        "seq",
        keeps_seq=True,
    ),
    Table(
        "decisions",
        (("seq", "bigint"), *_text("run_id", "profile", "unit_id", "verdict", "reason", "document_id",
                                   "matched_id", "scores", "decided_at")),
        "seq",
        keeps_seq=True,
    ),
    Table(
        "runs",
        _text("run_id", "job_id", "started_at", "finished_at", "outcome", "detail", "counts"),
        "rowid",
        conflict="ON CONFLICT (run_id) DO NOTHING",
    ),
    Table("meta", _text("key", "value"), "key", where="key = 'index_version'"),
    _WATERMARKS,
)

@contextlib.contextmanager
def open_source(
    path: Path, *, on_upgrade: Callable[[str], None] | None = None
) -> Iterator[sqlite3.Connection]:
    """The state file at ``path`` opened read-only, in one read transaction, its identity checked
    (:class:`StateFileError` for a missing file, another program's, a damaged or a newer one). One
    of an older schema is upgraded in a temporary copy, which is what is yielded."""
    if not path.exists():
        raise StateFileError(
            f"{path}: no state file there, so nothing to copy; name the file with --from PATH "
            "(default: <state_dir>/state.sqlite3)"
        )
    if not path.is_file():
        raise StateFileError(f"{path}: not a file; name the SQLite state file with --from PATH")
    uri = f"file:{urllib.parse.quote(str(path.resolve()))}?mode=ro"
    try:
        conn = sqlite3.connect(uri, uri=True, isolation_level=None, timeout=30.0, check_same_thread=False)
    except sqlite3.Error as exc:
        raise StateFileError(f"{path}: cannot open the state file: {exc}") from None
    with contextlib.closing(conn), tempfile.TemporaryDirectory(prefix="dreamer-copy-") as scratch:
        source = conn if _current(conn, path) else _upgraded(conn, path, Path(scratch), on_upgrade)
        with contextlib.closing(source) if source is not conn else contextlib.nullcontext():
            try:
                source.execute("BEGIN")
                source.execute("SELECT count(*) FROM ledger").fetchone()  # the snapshot starts here
            except sqlite3.Error as exc:
                raise StateFileError(f"{path}: cannot read the state file: {exc}") from None
            try:
                yield source
            finally:
                with contextlib.suppress(sqlite3.Error):
                    source.execute("COMMIT")


def _current(conn: sqlite3.Connection, path: Path) -> bool:
    """Whether the file is of this code's schema; refuses (as opening it would) one that is not a
    Dreamer state file, is damaged or is a newer Dreamer's. False for an older one: its upgrade
    would write, which a read-only connection refuses before anything changes."""
    try:
        check_identity(conn, path)
    except sqlite3.OperationalError as exc:
        if "readonly" in str(exc).replace(" ", "").lower():
            return False
        raise StateFileError(f"{path}: cannot read the state file: {exc}") from None
    except sqlite3.DatabaseError as exc:
        raise StateFileError(
            f"{path}: not a readable state file ({exc}); name Dreamer's state file with --from PATH"
        ) from None
    return True


def _upgraded(
    conn: sqlite3.Connection, path: Path, scratch: Path, on_upgrade: Callable[[str], None] | None
) -> sqlite3.Connection:
    """A copy of the file in ``scratch``, upgraded to this code's schema."""
    copy = scratch / "state.sqlite3"
    if on_upgrade is not None:
        on_upgrade(f"{path}: an older state schema; upgrading a temporary copy in {scratch} first")
    target = sqlite3.connect(copy, isolation_level=None, check_same_thread=False)
    try:
        conn.backup(target)
        check_identity(target, path)
    except sqlite3.Error as exc:
        target.close()
        raise StateFileError(f"{path}: cannot upgrade a copy of the state file: {exc}") from None
    except BaseException:
        target.close()
        raise
    return target


def copy_state(
    source: sqlite3.Connection,
    target: StateStore,
    *,
    source_path: Path,
    batch_rows: int = BATCH_ROWS,
    progress: Progress | None = None,
) -> CopyReport:
    """Copy every table of ``source`` (from :func:`open_source`) into ``target`` (a PostgreSQL
    state store), then compare the two. Refuses a target holding state the file does not have."""
    started = time.monotonic()
    try:
        refuse_foreign(source, target, source_path)
        before = {t.name: int(target._conn.execute(t.count()).fetchone()[0]) for t in TABLES}
        quiet = _owns_word_index(target)
        for table in TABLES:
            _copy_table(source, target, table, batch_rows, progress, quiet=quiet)
        report = CopyReport(source_path, target.where)
        report.checks = compare(source, target, {t.name: t.count() for t in TABLES}, before)
    except DatabaseFault as exc:
        raise StateFileError(
            f"{target.where}: the state database failed: {exc}; the batch it was writing was rolled "
            "back, and running the copy again finishes it"
        ) from None
    except sqlite3.Error as exc:
        raise StateFileError(f"{source_path}: reading the state file failed: {exc}") from None
    report.seconds = time.monotonic() - started
    return report


def _copy_table(
    source: sqlite3.Connection,
    target: StateStore,
    table: Table,
    batch_rows: int,
    progress: Progress | None,
    *,
    quiet: bool,
) -> None:
    """The table's rows a batch at a time, in its order; with ``quiet``, its trigger is off within
    each batch's transaction (and only there: the change is undone before the commit)."""
    total = int(source.execute(table.count()).fetchone()[0])
    rows = source.execute(table.select())
    insert, done = table.insert(), 0
    while batch := rows.fetchmany(batch_rows):
        columns = [list(values) for values in zip(*batch, strict=True)]
        with target._write() as conn:
            if quiet and table.trigger:
                conn.execute(f"ALTER TABLE {table.name} DISABLE TRIGGER {table.trigger}")
            conn.execute(insert, columns)
            if quiet and table.trigger:
                conn.execute(f"ALTER TABLE {table.name} ENABLE TRIGGER {table.trigger}")
            if table.keeps_seq and done + len(batch) >= total:
                conn.execute(_PAST_LAST_SEQ.format(table=table.name))
        done += len(batch)
        if progress is not None:
            progress(table.name, done, total)


def _owns_word_index(target: StateStore) -> bool:
    """Whether this role may turn the word index's counting trigger off (it owns the table, as the
    role that made the schema does). The counts are copied from the file after the words anyway, so
    the trigger's work would be undone; it is a third of a copy's time."""
    row = target._conn.execute(
        "SELECT pg_has_role(current_user, c.relowner, 'USAGE') FROM pg_class c "
        "WHERE c.oid = to_regclass('ledger_words')"
    ).fetchone()
    return bool(row and row[0])


# The identity's next value past the largest seq now in the table (every row has one at most that).
_PAST_LAST_SEQ = (
    "SELECT setval(pg_get_serial_sequence('{table}', 'seq'), m + 1, false) "
    "FROM (SELECT COALESCE(MAX(seq), 0) AS m FROM {table}) AS t"
)


