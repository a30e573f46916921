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
import json
import os
import sqlite3
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from pathlib import Path

from dreamer.diskfaults import space_fault
from dreamer.errors import RunBusyError, StateFileError
from dreamer.state.ranks import ranked_chunk, ranked_count, rerank
from dreamer.state.records import (
    CandidateCard,
    LedgerCard,
    RankPosition,
    Reinforcement,
    StoredVector,
    VectorRow,
    Watermark,
    WordScan,
    iso,
    parse_time,
)
from dreamer.state.rows import CARD_COLUMNS, card_from_row, chunks, marks
from dreamer.state.runs import END_RUN, RunRecords
from dreamer.state.schema import check_identity, create, state_errors

#: How long an access waits for a lock another process holds.
LOCK_TIMEOUT_S = 30.0



# One range of the word index, read through the index on (word, set size) of its side.
_SCANS = {
    "content": "SELECT document_id FROM ledger_words INDEXED BY ledger_words_by_content "
    "WHERE word = ? AND content_n BETWEEN ? AND ?",
    "residual": "SELECT document_id FROM ledger_words INDEXED BY ledger_words_by_residual "
    "WHERE word = ? AND residual_n BETWEEN ? AND ?",
}
# A probe's cards, each read through its own key: three queries, as SQLite reads the whole bank for
# an OR of them, and (the unary +) for the ids unless told not to use the bank's index.
_CANDIDATE = "SELECT document_id, promoted_at, text, sketch FROM ledger WHERE "
_BY_ID = _CANDIDATE + "+upstream_bank = ? AND document_id IN (SELECT value FROM json_each(?))"
_BY_TEXT = _CANDIDATE + "upstream_bank = ? AND normalized IN (SELECT value FROM json_each(?))"
_UNINDEXED = _CANDIDATE + "upstream_bank = ? AND indexed = 0"


def _index_card(
    conn: sqlite3.Connection, document_id: str, words: Iterable[str], sizes: tuple[int, int]
) -> None:
    """Put a card's words in the index (with its word-set sizes) and mark the card indexed. A
    card's words never change (its text does not), so words already there are left as they are;
    a new index version empties the whole index first (:meth:`StateStore.use_index_version`)."""
    conn.executemany(
        "INSERT OR IGNORE INTO ledger_words (word, document_id, content_n, residual_n) VALUES (?, ?, ?, ?)",
        [(word, document_id, sizes[0], sizes[1]) for word in sorted(set(words))],
    )
    conn.execute("UPDATE ledger SET indexed = 1 WHERE document_id = ?", (document_id,))


def _put_vector(conn: sqlite3.Connection, document_id: str, vector: StoredVector) -> None:
    conn.execute(
        "INSERT OR REPLACE INTO ledger_vectors (document_id, model_id, dimension, vector) "
        "SELECT ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM ledger WHERE document_id = ?)",
        (document_id, vector.model_id, vector.dimension, vector.blob, document_id),
    )


class StateStore(RunRecords):
    """A small synchronous store; every method is one short transaction. Safe across processes (WAL)."""

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
            create(path)
        try:
            conn = sqlite3.connect(
                path, timeout=LOCK_TIMEOUT_S, isolation_level=None, check_same_thread=False
            )
        except sqlite3.Error as exc:
            raise StateFileError(f"{path}: cannot open the state file: {exc}") from None
        try:
            conn.execute(f"PRAGMA busy_timeout={int(LOCK_TIMEOUT_S * 1000)}")
            check_identity(conn, path)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=FULL")
        except sqlite3.DatabaseError as exc:
            conn.close()
            if isinstance(exc, sqlite3.OperationalError) and ("locked" in str(exc) or "busy" in str(exc)):
                # A healthy file another process holds (an upgrade takes about a minute per million
                # cards): never advise moving it aside.
                raise StateFileError(
                    f"{path}: the state file stayed locked by another process for {LOCK_TIMEOUT_S:g} s "
                    f"({exc}); "
                    "another Dreamer may be upgrading it: wait for it, then run again"
                ) from None
            fault = space_fault(path, exc)
            if fault:  # a healthy file on a full or read-only file system: never advise moving it
                raise StateFileError(f"{path}: {fault}") from None
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

    def __enter__(self) -> StateStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- watermarks --------------------------------------------------------------------------

    @state_errors
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
            parse_time(row[0]),
            {i: datetime.fromisoformat(t) for i, t in seen.items()},
            row[2],
            parse_time(row[3]),
            parse_time(row[4]),
        )

    # --- ledger ------------------------------------------------------------------------------

    @state_errors
    def ledger(self, upstream_bank: str | None = None) -> list[LedgerCard]:
        """Every card (of one upstream bank), in promotion order. A whole-ledger read: the roll-up
        itself reads only :meth:`ledger_candidates`."""
        sql = f"SELECT {CARD_COLUMNS} FROM ledger"
        args: tuple[str, ...] = ()
        if upstream_bank is not None:
            sql += " WHERE upstream_bank = ?"
            args = (upstream_bank,)
        sql += " ORDER BY promoted_at, document_id"
        return [card_from_row(r) for r in self._conn.execute(sql, args).fetchall()]

    @state_errors
    def profile_cards(self, upstream_bank: str, profile: str) -> list[LedgerCard]:
        """The cards of ``upstream_bank`` that ``profile`` promoted or reinforced, and every card
        that supersedes one of them; in promotion order."""
        sql = (
            f"WITH mine AS (SELECT document_id FROM ledger_profiles WHERE profile = ?2) "
            f"SELECT {CARD_COLUMNS} FROM ledger WHERE upstream_bank = ?1 AND (document_id IN mine "
            f"OR supersedes IN mine) ORDER BY promoted_at, document_id"
        )
        return [card_from_row(r) for r in self._conn.execute(sql, (upstream_bank, profile))]

    @state_errors
    def ranked_chunk(
        self, upstream_bank: str, scope: str, after: RankPosition | None, limit: int
    ) -> tuple[list[LedgerCard], RankPosition | None]:
        """The next ``limit`` cards of a peer card's ``scope`` in rank order (:mod:`.ranks`)."""
        return ranked_chunk(self._conn, upstream_bank, scope, after, limit)

    @state_errors
    def ranked_count(self, upstream_bank: str, scope: str, *, superseded: bool) -> int:
        """How many cards a peer card's ``scope`` holds (:mod:`.ranks`)."""
        return ranked_count(self._conn, upstream_bank, scope, superseded=superseded)

    @state_errors
    def superseding(self, document_ids: Iterable[str]) -> list[LedgerCard]:
        """The cards that supersede one of ``document_ids`` (a ``recency_wins`` conflict). Indexed by
        ``supersedes``: the read side asks this for the hits of one recall."""
        ids = sorted(set(document_ids))
        out: list[LedgerCard] = []
        for chunk in chunks(ids):
            sql = (
                f"SELECT {CARD_COLUMNS} FROM ledger WHERE supersedes IN ({marks(chunk)}) "
                "ORDER BY promoted_at, document_id"
            )
            out.extend(card_from_row(r) for r in self._conn.execute(sql, chunk))
        return out

    @state_errors
    def word_counts(self, words: Iterable[str]) -> dict[str, int]:
        """How many indexed cards hold each of ``words`` (a word no card holds is left out)."""
        rows = self._conn.execute(
            "SELECT word, cards FROM ledger_word_counts WHERE word IN (SELECT value FROM json_each(?))",
            (json.dumps(sorted(set(words))),),
        )
        return {r[0]: int(r[1]) for r in rows}

    @state_errors
    def scan_index(self, scans: Iterable[WordScan]) -> set[str]:
        """The document ids in the word index's ranges ``scans`` (of every bank). Each range is
        read through the index on (word, set size) of its side, so a common word costs only its
        cards of the sizes asked for."""
        ids: set[str] = set()
        for scan in scans:
            rows = self._conn.execute(_SCANS[scan.side], (scan.word, scan.shortest, scan.longest))
            ids.update(r[0] for r in rows)
        return ids

    @state_errors
    def ledger_candidates(
        self, upstream_bank: str, *, ids: Iterable[str] | None, normalized: Iterable[str]
    ) -> list[CandidateCard]:
        """The cards of ``upstream_bank`` among ``ids`` (None: every card), or whose normalised
        text is one of ``normalized``, plus every card not indexed yet; in promotion order."""
        if ids is None:
            rows = self._conn.execute(
                "SELECT document_id, text, sketch FROM ledger WHERE upstream_bank = ? "
                "ORDER BY promoted_at, document_id",
                (upstream_bank,),
            )
            return [CandidateCard(r[0], r[1], r[2]) for r in rows]
        found: dict[str, tuple[str, str, str, str | None]] = {}
        for sql, arg in (
            (_BY_ID, json.dumps(sorted(set(ids)))),
            (_BY_TEXT, json.dumps(sorted(set(normalized)))),
            (_UNINDEXED, None),
        ):
            for r in self._conn.execute(sql, (upstream_bank,) if arg is None else (upstream_bank, arg)):
                found[r[0]] = r
        ordered = sorted(found.values(), key=lambda r: (r[1], r[0]))
        return [CandidateCard(r[0], r[2], r[3]) for r in ordered]

    @state_errors
    def unindexed(self, upstream_bank: str) -> list[LedgerCard]:
        """Cards whose words are not in the index yet (written before it existed)."""
        sql = (
            # Told which index to use: for the ORDER BY, SQLite would walk the bank's every card.
            f"SELECT {CARD_COLUMNS} FROM ledger INDEXED BY ledger_unindexed "
            "WHERE upstream_bank = ? AND indexed = 0 ORDER BY promoted_at, document_id"
        )
        return [card_from_row(r) for r in self._conn.execute(sql, (upstream_bank,))]

    @state_errors
    def index_version(self) -> str | None:
        """The version the word index was built with (None: not named yet)."""
        row = self._conn.execute("SELECT value FROM meta WHERE key = 'index_version'").fetchone()
        return None if row is None else str(row[0])

    @state_errors
    def use_index_version(self, version: str) -> None:
        """Declare how the index's words are made (the dedup sketch's version). When it differs
        from the one the index was built with, the index is emptied and every card marked for
        indexing again: words made by an older analysis would find the wrong cards. A file that
        names no version yet (new, or upgraded from before the index) takes this one as it is."""
        stored = self.index_version()
        if stored == version:
            return
        with self._write() as conn:
            if stored is not None:
                conn.execute("DELETE FROM ledger_words")
                conn.execute("DELETE FROM ledger_word_counts")
                conn.execute("UPDATE ledger SET indexed = 0 WHERE indexed = 1")
            conn.execute(
                "INSERT INTO meta (key, value) VALUES ('index_version', ?) "
                "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                (version,),
            )

    @state_errors
    def existing_documents(self, document_ids: Iterable[str]) -> set[str]:
        """Which of these document ids the ledger holds."""
        found: set[str] = set()
        for chunk in chunks(sorted(set(document_ids))):
            sql = f"SELECT document_id FROM ledger WHERE document_id IN ({marks(chunk)})"
            found.update(r[0] for r in self._conn.execute(sql, chunk))
        return found

    @state_errors
    def store_index(self, entries: Mapping[str, tuple[str, Iterable[str], tuple[int, int]]]) -> None:
        """Index ledger cards: document id -> (its dedup sketch, its words, its content and residual
        word counts), in one transaction.

        Only the derived columns and the word index change; a card's text and provenance are never
        rewritten.
        """
        if not entries:
            return
        with self._write() as conn:
            for document_id, (sketch, words, sizes) in entries.items():
                conn.execute("UPDATE ledger SET sketch = ? WHERE document_id = ?", (sketch, document_id))
                _index_card(conn, document_id, words, sizes)

    # --- vectors -----------------------------------------------------------------------------

    @state_errors
    def vectors_since(
        self, upstream_bank: str, model_id: str, dimension: int, after_seq: int
    ) -> list[VectorRow]:
        """The vectors of ``upstream_bank``'s cards made by this model and length, written after
        ``after_seq``, in ``seq`` order (a reader keeps the last ``seq`` it saw)."""
        rows = self._conn.execute(
            "SELECT v.seq, v.document_id, l.text, v.vector FROM ledger_vectors v "
            "JOIN ledger l ON l.document_id = v.document_id "
            "WHERE v.model_id = ? AND v.dimension = ? AND v.seq > ? AND l.upstream_bank = ? "
            "ORDER BY v.seq",
            (model_id, dimension, after_seq, upstream_bank),
        )
        return [VectorRow(r[0], r[1], r[2], r[3]) for r in rows]

    @state_errors
    def last_vector_seq(self) -> int:
        """The highest ``seq`` ever given to a vector (0 when none was)."""
        row = self._conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'ledger_vectors'").fetchone()
        return 0 if row is None else int(row[0])

    @state_errors
    def stale_vectors(
        self, upstream_bank: str, model_id: str, dimension: int | None, limit: int
    ) -> list[CandidateCard]:
        """Up to ``limit`` cards of ``upstream_bank`` with no vector of this model (and length,
        when known), oldest first: the next ones to embed."""
        rows = self._conn.execute(
            "SELECT l.document_id, l.text, l.sketch FROM ledger l "
            "LEFT JOIN ledger_vectors v ON v.document_id = l.document_id "
            "WHERE l.upstream_bank = ? AND (v.document_id IS NULL OR v.model_id != ? "
            "OR (? IS NOT NULL AND v.dimension != ?)) "
            "ORDER BY l.promoted_at, l.document_id LIMIT ?",
            (upstream_bank, model_id, dimension, dimension, limit),
        )
        return [CandidateCard(r[0], r[1], r[2]) for r in rows]

    @state_errors
    def store_vectors(self, vectors: Mapping[str, StoredVector]) -> None:
        """Replace the vectors of these ledger cards (document id -> vector), in one transaction.
        A card the ledger does not hold is skipped; a replaced vector gets a new ``seq``."""
        if not vectors:
            return
        with self._write() as conn:
            for document_id, vector in vectors.items():
                _put_vector(conn, document_id, vector)

    @state_errors
    def vector_models(self) -> list[tuple[str, int, int]]:
        """Which models made the stored vectors: (model id, dimension, cards), most cards first."""
        rows = self._conn.execute(
            "SELECT model_id, dimension, COUNT(*) FROM ledger_vectors GROUP BY model_id, dimension "
            "ORDER BY COUNT(*) DESC, model_id"
        )
        return [(r[0], int(r[1]), int(r[2])) for r in rows]

    @state_errors
    def candidate_cards(self, document_ids: Iterable[str]) -> list[CandidateCard]:
        """These ledger cards as the dedup reads them, in promotion order."""
        rows = self._conn.execute(
            "SELECT document_id, text, sketch FROM ledger "
            "WHERE document_id IN (SELECT value FROM json_each(?)) ORDER BY promoted_at, document_id",
            (json.dumps(sorted(set(document_ids))),),
        )
        return [CandidateCard(r[0], r[1], r[2]) for r in rows]

    @state_errors
    def ledger_size(self) -> int:
        return int(self._conn.execute("SELECT count(*) FROM ledger").fetchone()[0])

    # --- the one commit of a roll-up ---------------------------------------------------------

    @state_errors
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
        now = iso(finished_at)
        with self._write() as conn:
            if expected is not None:
                row = conn.execute(
                    "SELECT created_at, rolled_at FROM watermarks WHERE profile = ?", (profile,)
                ).fetchone()
                stored = (row[0], row[1]) if row is not None else (None, None)
                if stored != (iso(expected.created_at), iso(expected.rolled_at)):
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
                    iso(watermark.created_at),
                    json.dumps({i: iso(t) for i, t in sorted(watermark.seen.items())}),
                    watermark.unit_count,
                    iso(watermark.last_write_at),
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
                        iso(card.promoted_at),
                        iso(card.last_seen_at),
                        card.supersedes,
                        card.run_id,
                        card.sketch,
                    ),
                )
                if card.words:
                    _index_card(conn, card.document_id, card.words, card.word_sizes)
                if card.vector is not None:
                    _put_vector(conn, card.document_id, card.vector)
                conn.executemany(
                    "INSERT OR IGNORE INTO ledger_profiles (profile, document_id) VALUES (?, ?)",
                    [(name, card.document_id) for name in dict.fromkeys((card.profile, *card.profiles))],
                )
                rerank(conn, card.document_id)
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
                    "INSERT OR IGNORE INTO ledger_profiles (profile, document_id) VALUES (?, ?)",
                    (r.profile, r.document_id),
                )
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
                rerank(conn, r.document_id)
            conn.execute(
                END_RUN,
                (now, outcome, detail, json.dumps(dict(counts)), run_id),
            )
