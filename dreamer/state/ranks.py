"""Each ledger card's place in its peer cards' order (schema 5): the ``ledger_rank`` rows, written
in the commit's transaction, and the reads a peer card makes of them.

One row per card and scope: its bank's global card (:data:`GLOBAL_SCOPE`) and each profile it
belongs to, keyed so the primary key's order is the peer card's (``dreamer.cardrank``). Why:
``docs/design/peer-card.md``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from dreamer.cardrank import rank_key
from dreamer.state.dialect import SQLITE, Dialect
from dreamer.state.records import LedgerCard, RankPosition
from dreamer.state.rows import CARD_COLUMNS, card_from_row, marks

RANKS = """
CREATE TABLE IF NOT EXISTS ledger_rank (
    upstream_bank      TEXT NOT NULL,
    scope              TEXT NOT NULL,
    tier               INTEGER NOT NULL,
    neg_reinforcements INTEGER NOT NULL,
    neg_sources        INTEGER NOT NULL,
    neg_promoted       REAL NOT NULL,
    document_id        TEXT NOT NULL,
    PRIMARY KEY (upstream_bank, scope, tier, neg_reinforcements, neg_sources, neg_promoted, document_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS ledger_rank_by_document ON ledger_rank (document_id, scope);
CREATE INDEX IF NOT EXISTS ledger_profiles_by_document ON ledger_profiles (document_id);
"""
#: The scope of a bank's global card in ``ledger_rank``; a profile's card uses the profile's name.
GLOBAL_SCOPE = ""


def _rank_source(dialect: Dialect) -> str:
    """A card's ledger fields that rank it, and the profiles it belongs to (a JSON list)."""
    profiles = dialect.json_group.format(value="p.profile")
    return (
        "SELECT l.document_id, l.upstream_bank, l.kind, l.source_ids, l.reinforcements, l.promoted_at, "
        f"(SELECT {profiles} FROM ledger_profiles p WHERE p.document_id = l.document_id) "
        "FROM ledger l"
    )

_PUT_RANK = (
    "INSERT INTO ledger_rank (upstream_bank, scope, tier, neg_reinforcements, neg_sources, "
    "neg_promoted, document_id) VALUES (?, ?, ?, ?, ?, ?, ?)"
)


def _rank_rows(row: Sequence[Any]) -> list[tuple[Any, ...]]:
    """One card's rank rows from its :func:`_rank_source` row: its bank's, then one per profile.

    A damaged value (a time or a source list that does not parse) ranks as the oldest card without
    sources rather than failing the commit or the upgrade: the card itself is reported as damaged
    where it is read (``state_errors``)."""
    document_id, bank, kind, source_ids, reinforcements, promoted_at, profiles = row
    try:
        sources = json.loads(source_ids)
        set(sources)  # as the card reads back (``_card``): the list as stored
    except (TypeError, ValueError):
        sources = []
    try:
        promoted = datetime.fromisoformat(promoted_at)
    except (TypeError, ValueError):
        promoted = datetime.fromtimestamp(0, UTC)
    tier, neg_reinforcements, neg_sources, neg_promoted, _ = rank_key(
        str(kind), int(reinforcements or 0), sources, promoted, document_id
    )
    return [
        (bank, scope, tier, neg_reinforcements, neg_sources, neg_promoted, document_id)
        for scope in dict.fromkeys((GLOBAL_SCOPE, *json.loads(profiles or "[]")))
    ]


def rerank(conn: Any, document_id: str, dialect: Dialect = SQLITE) -> None:
    """Rewrite a card's rank rows from what the ledger now says of it (its row and its profiles),
    in the caller's transaction: after it is promoted, reinforced or gains a profile."""
    row = conn.execute(_rank_source(dialect) + " WHERE l.document_id = ?", (document_id,)).fetchone()
    conn.execute("DELETE FROM ledger_rank WHERE document_id = ?", (document_id,))
    if row is not None:
        conn.executemany(_PUT_RANK, _rank_rows(row))


def fill_ranks(conn: Any, dialect: Dialect = SQLITE) -> None:
    """Every card's rank rows (the upgrade to schema 5, a copy into PostgreSQL), read and written a
    batch at a time."""
    batch: list[tuple[Any, ...]] = []
    for row in conn.execute(_rank_source(dialect)):
        batch += _rank_rows(row)
        if len(batch) >= 10_000:
            conn.executemany(_PUT_RANK, batch)
            batch.clear()
    conn.executemany(_PUT_RANK, batch)


def ranked_chunk(
    conn: Any, upstream_bank: str, scope: str, after: RankPosition | None, limit: int
) -> tuple[list[LedgerCard], RankPosition | None]:
    """The next ``limit`` cards of a peer card's ``scope`` (a profile, or :data:`GLOBAL_SCOPE` for
    the bank's every card) in rank order, after ``after``, and the position to read on from (None
    at the end). Read through the rank rows' primary key, so a chunk costs its own cards, however
    many the scope holds."""
    columns = "tier, neg_reinforcements, neg_sources, neg_promoted, document_id"
    sql = f"SELECT {columns} FROM ledger_rank WHERE upstream_bank = ? AND scope = ?"
    params: list[Any] = [upstream_bank, scope]
    if after is not None:
        sql += f" AND ({columns}) > (?, ?, ?, ?, ?)"
        params.extend(after)
    rows = conn.execute(f"{sql} ORDER BY {columns} LIMIT ?", [*params, limit]).fetchall()
    if not rows:
        return [], None
    ids = [r[4] for r in rows]
    found = conn.execute(f"SELECT {CARD_COLUMNS} FROM ledger WHERE document_id IN ({marks(ids)})", ids)
    by_id = {card.document_id: card for card in map(card_from_row, found)}
    last = rows[-1]
    return [by_id[i] for i in ids if i in by_id], (last[0], last[1], last[2], last[3], last[4])


def ranked_count(
    conn: Any, upstream_bank: str, scope: str, *, superseded: bool, dialect: Dialect = SQLITE
) -> int:
    """How many cards a peer card's ``scope`` holds (``superseded`` False: those that no card of
    the bank supersedes). Counts the scope's rank rows and the bank's supersessions only."""
    (total,) = conn.execute(
        "SELECT count(*) FROM ledger_rank WHERE upstream_bank = ? AND scope = ?", (upstream_bank, scope)
    ).fetchone()
    if superseded:
        return int(total)
    (gone,) = conn.execute(
        f"SELECT count(DISTINCT l.supersedes) FROM ledger l{dialect.indexed_by('ledger_by_supersedes')} "
        "WHERE l.supersedes IS NOT NULL AND l.supersedes != l.document_id AND l.upstream_bank = ? "
        "AND EXISTS (SELECT 1 FROM ledger_rank r WHERE r.document_id = l.supersedes "
        "AND r.scope = ? AND r.upstream_bank = ?)",
        (upstream_bank, scope, upstream_bank),
    ).fetchone()
    return int(total) - int(gone)
