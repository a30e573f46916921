"""The word-index part of :class:`~dreamer.state.StateStore`: each ledger card's words, so the dedup
probes the cards sharing words with a new one instead of reading every card of the bank.

A card's words are written in the transaction of its row (:meth:`WordIndex._index_card`, a step of
the commit) or later for cards written before the index existed (:meth:`WordIndex.store_index`).
The index records the version of the analysis that made its words; a new version empties it.
Each indexed card also has a gate row (its word-set sizes and :mod:`word signature
<dreamer.state.signature>`), written with its words; cards indexed before gate rows existed get
theirs in bounded batches (:meth:`WordIndex.gate_backfill`, :meth:`WordIndex.store_gates`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence

from dreamer.state.base import StoreBase
from dreamer.state.dialect import Dialect
from dreamer.state.records import CandidateCard, LedgerCard, WordScan
from dreamer.state.rows import CARD_COLUMNS, card_from_row
from dreamer.state.schema import GATE_BACKFILL_DONE, state_errors
from dreamer.state.signature import SIGNATURE_BITS, word_signature

__all__ = ["WordIndex"]

# Where the gate rows' backfill has got to (the last document id done), and whether it is done.
_GATE_CURSOR = "gate_backfill_after"
_GATE_DONE = GATE_BACKFILL_DONE
# Where the upgrade of older rows' stored sketches has got to ([version, last document id done]),
# and the version it gave every row once it went over them all.
_UPGRADE_CURSOR = "sketch_upgrade_after"
_UPGRADE_DONE = "sketch_upgrade_done"
_UPSERT_GATE = (
    "INSERT INTO ledger_gate (document_id, content_n, residual_n, signature) VALUES (?, ?, ?, ?) "
    "ON CONFLICT (document_id) DO UPDATE SET content_n = excluded.content_n, "
    "residual_n = excluded.residual_n, signature = excluded.signature"
)


def _scan(dialect: Dialect, side: str) -> str:
    """One range of the word index with its cards' gate rows, read from the index on (word, set
    size) of its side alone, which holds them."""
    index = dialect.indexed_by(f"ledger_words_{side}_gate")
    return (
        f"SELECT document_id, content_n, residual_n, signature FROM ledger_words{index} "
        f"WHERE word = ? AND {side}_n BETWEEN ? AND ?"
    )


# How many ranges one query of `WordIndex.scan_index` reads: below SQLite's limit of 500 terms of a
# compound SELECT. A card of the 400-character cap reads fewer ranges than this but for a few.
_SCANS_PER_QUERY = 200

# A probe's cards, each read through its own key: three queries, as SQLite reads the whole bank for
# an OR of them, and (the unary +) for the ids unless told not to use the bank's index.
_CANDIDATE = "SELECT document_id, promoted_at, text, sketch FROM ledger WHERE "


def _candidates(dialect: Dialect) -> tuple[str, str, str]:
    """The three reads of a probe's cards: by id, by normalised text, and the unindexed ones."""
    bank = dialect.unindexed("upstream_bank")
    listed = f"(SELECT j.value FROM {dialect.json_table})"
    return (
        f"{_CANDIDATE}{bank} = ? AND document_id IN {listed}",
        f"{_CANDIDATE}upstream_bank = ? AND normalized IN {listed}",
        f"{_CANDIDATE}upstream_bank = ? AND indexed = 0",
    )


#: A signature is below this (`dreamer.state.signature`).
_SIGNATURE_END = 1 << SIGNATURE_BITS


def _gate_row(content_n: object, residual_n: object, signature: object) -> tuple[int, int, int] | None:
    """A gate row's sizes and signature when they are what one is written with; None for a damaged
    row (text, a fraction, a negative size, a signature past its 63 bits) or none (the NULLs of a
    card without one), so its card is read as without one."""
    if (
        type(content_n) is int
        and type(residual_n) is int
        and type(signature) is int
        and content_n >= 0
        and residual_n >= 0
        and 0 <= signature < _SIGNATURE_END
    ):
        return content_n, residual_n, signature
    return None


class WordIndex(StoreBase):
    """The word index's reads (counts, ranges, a probe's candidates) and writes."""

    @state_errors
    def word_counts(self, words: Iterable[str]) -> dict[str, int]:
        """How many indexed cards hold each of ``words`` (a word no card holds is left out)."""
        rows = self._conn.execute(
            "SELECT word, cards FROM ledger_word_counts WHERE word IN "
            f"(SELECT j.value FROM {self.dialect.json_table})",
            (json.dumps(sorted(set(words))),),
        )
        return {r[0]: int(r[1]) for r in rows}

    @state_errors
    def scan_index(self, scans: Sequence[WordScan]) -> dict[str, tuple[int, int, int] | None]:
        """The document ids in the word index's ranges ``scans`` (of every bank), each once, with
        its gate row: (content words, residual words, signature), or None for a card without one
        (indexed before gate rows, not backfilled yet) or with a damaged one.

        Each range is read from the index on (word, set size) of its side, which holds the gate
        rows too, so a common word costs only its cards of the sizes asked for and no card is
        looked up elsewhere; the ranges go as one query, and an id two of them name is kept once."""
        found: dict[str, tuple[int, int, int] | None] = {}
        for start in range(0, len(scans), _SCANS_PER_QUERY):
            chunk = scans[start : start + _SCANS_PER_QUERY]
            sql = " UNION ALL ".join(_scan(self.dialect, scan.side) for scan in chunk)
            params = [value for scan in chunk for value in (scan.word, scan.shortest, scan.longest)]
            for doc, content_n, residual_n, signature in self._conn.execute(sql, params):
                if doc not in found:
                    found[doc] = _gate_row(content_n, residual_n, signature)
        return found

    @state_errors
    def gate_backfill(self, limit: int) -> list[tuple[str, str | None, bool]] | None:
        """The next ``limit`` indexed cards (document id, sketch, whether it has a gate row) in
        document-id order after those the backfill has done; None once it is done. Read by the
        primary key from a cursor, so a batch costs its own rows, however large the ledger."""
        if self._meta(_GATE_DONE) is not None:
            return None
        rows = self._conn.execute(
            "SELECT c.document_id, c.sketch, g.document_id IS NOT NULL FROM (SELECT document_id, sketch "
            "FROM ledger WHERE document_id > ? AND indexed = 1 ORDER BY document_id LIMIT ?) AS c "
            "LEFT JOIN ledger_gate AS g ON g.document_id = c.document_id ORDER BY c.document_id",
            (self._meta(_GATE_CURSOR) or "", max(1, int(limit))),
        )
        return [(r[0], r[1], bool(r[2])) for r in rows]

    @state_errors
    def gate_backfill_left(self) -> int:
        """How many ledger cards still have no gate row among those the backfill has not gone over
        yet (0 once it is done). Until then a run reads each such card in full when a new card's
        words name it. Two counts over primary keys from the backfill's cursor (the ledger's cards,
        less their gate rows: a row is only ever written for a card of the ledger, and neither is
        ever deleted), so no card's row is read: at 1M cards 0.1 s."""
        if self._meta(_GATE_DONE) is not None:
            return 0
        after = self._meta(_GATE_CURSOR) or ""
        cards = self._conn.execute("SELECT count(*) FROM ledger WHERE document_id > ?", (after,))
        rows = self._conn.execute("SELECT count(*) FROM ledger_gate WHERE document_id > ?", (after,))
        return max(0, int(cards.fetchone()[0]) - int(rows.fetchone()[0]))

    @state_errors
    def store_gates(
        self, entries: Mapping[str, tuple[Iterable[str], tuple[int, int]]], *, after: str | None
    ) -> None:
        """Write the gate rows of a backfill batch (document id -> the card's words and word-set
        sizes) and move its cursor past ``after`` (None: the backfill is done), in one transaction."""
        rows = [(d, sorted(set(w)), sizes, word_signature(w)) for d, (w, sizes) in entries.items()]
        with self._write() as conn:
            conn.executemany(_UPSERT_GATE, [(doc, sizes[0], sizes[1], sig) for doc, _, sizes, sig in rows])
            # The card's word rows carry the signature too (what a probe reads): the rows of these
            # words, as the card was indexed with them; a word it was not is not made up.
            conn.executemany(
                "UPDATE ledger_words SET signature = ? WHERE word = ? AND document_id = ?",
                [(sig, word, doc) for doc, words, _, sig in rows for word in words],
            )
            key, value = (_GATE_DONE, "1") if after is None else (_GATE_CURSOR, after)
            self._put_meta(key, value)

    @state_errors
    def sketch_upgrade(self, limit: int, version: str) -> list[tuple[str, str, str | None]] | None:
        """The next ``limit`` ledger cards (document id, text, stored sketch), in document-id order,
        after those an upgrade of the stored sketches to ``version`` went over; None once it went
        over them all. An upgrade to another version starts again from the first card. Read by the
        primary key from a cursor, so a batch costs its own rows, however large the ledger."""
        if self._meta(_UPGRADE_DONE) == version:
            return None
        after = ""
        try:
            cursor_version, cursor = json.loads(self._meta(_UPGRADE_CURSOR) or "null") or ("", "")
            if cursor_version == version and isinstance(cursor, str):
                after = cursor
        except (ValueError, TypeError):  # a damaged cursor: start again, which only costs time
            pass
        rows = self._conn.execute(
            "SELECT document_id, text, sketch FROM ledger WHERE document_id > ? ORDER BY document_id LIMIT ?",
            (after, max(1, int(limit))),
        )
        return [(r[0], r[1], r[2]) for r in rows]

    @state_errors
    def store_sketches(self, sketches: Mapping[str, str], *, version: str, after: str | None) -> None:
        """Write an upgrade batch's stored sketches (document id -> sketch) and move its cursor past
        ``after`` (None: every card went over, the upgrade to ``version`` is done), in one
        transaction. Only the sketch changes: a card's text, words and provenance never do."""
        with self._write() as conn:
            conn.executemany(
                "UPDATE ledger SET sketch = ? WHERE document_id = ?", [(s, d) for d, s in sketches.items()]
            )
            if after is None:
                self._put_meta(_UPGRADE_DONE, version)
            else:
                self._put_meta(_UPGRADE_CURSOR, json.dumps([version, after]))

    def _meta(self, key: str) -> str | None:
        row = self._conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def _put_meta(self, key: str, value: str) -> None:
        self._conn.execute(
            "INSERT INTO meta (key, value) VALUES (?, ?) "
            "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            (key, value),
        )

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
        by_id, by_text, unindexed = _candidates(self.dialect)
        for sql, arg in (
            (by_id, json.dumps(sorted(set(ids)))),
            (by_text, json.dumps(sorted(set(normalized)))),
            (unindexed, None),
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
            f"SELECT {CARD_COLUMNS} FROM ledger{self.dialect.indexed_by('ledger_unindexed')} "
            "WHERE upstream_bank = ? AND indexed = 0 ORDER BY promoted_at, document_id"
        )
        return [card_from_row(r) for r in self._conn.execute(sql, (upstream_bank,))]

    @state_errors
    def index_version(self) -> str | None:
        """The version the word index was built with (None: not named yet)."""
        return self._meta("index_version")

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
                conn.execute("DELETE FROM ledger_gate")  # each card's is written again with its words
                conn.execute("UPDATE ledger SET indexed = 0 WHERE indexed = 1")
            self._put_meta("index_version", version)

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
                self._index_card(document_id, words, sizes)

    def _index_card(self, document_id: str, words: Iterable[str], sizes: tuple[int, int]) -> None:
        """Put a card's words in the index (with its word-set sizes), its gate row, and mark the
        card indexed. A card's words never change (its text does not), so words already there are
        left as they are; a new index version empties the whole index first
        (:meth:`use_index_version`)."""
        words = sorted(set(words))
        signature = word_signature(words)
        self._conn.executemany(
            "INSERT INTO ledger_words (word, document_id, content_n, residual_n, signature) "
            "VALUES (?, ?, ?, ?, ?) "
            "ON CONFLICT (word, document_id) DO UPDATE SET signature = excluded.signature",
            [(word, document_id, sizes[0], sizes[1], signature) for word in words],
        )
        self._conn.execute(_UPSERT_GATE, (document_id, sizes[0], sizes[1], signature))
        self._conn.execute("UPDATE ledger SET indexed = 1 WHERE document_id = ?", (document_id,))
