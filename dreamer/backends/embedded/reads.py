"""The embedded store's reads, each run with the connection in the backend's worker thread: the
banks' counters, the unit listing's query, full-text recall within a token budget, and the units
an extractive reflect answers with.

Plain functions of a connection, apart from the backend class that owns the connection and its
lock (`dreamer.backends.embedded.backend`), so each query can be read on its own.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterable, Sequence
from contextlib import closing
from datetime import datetime
from typing import TypeVar

from dreamer.backends.base import RecallItem, TagsMatch
from dreamer.backends.embedded.rows import recall_item_from_row
from dreamer.backends.embedded.schema import UNIT_COLUMNS, format_time
from dreamer.backends.embedded.search import estimate_tokens, search_bank, tags_filter

__all__ = ["bank_rows", "full_text_recall", "reflect_rows", "units_query", "within_budget"]

_H = TypeVar("_H")


def bank_rows(conn: sqlite3.Connection, wanted: list[str]) -> list[sqlite3.Row]:
    """The counters' rows of the wanted banks that exist, in one query."""
    return conn.execute(
        """
        SELECT b.bank_id, b.last_write_at, b.unit_count
        FROM banks b
        WHERE b.bank_id IN (SELECT value FROM json_each(?))
        """,
        (json.dumps(wanted),),
    ).fetchall()


def units_query(
    bank_id: str, since: datetime | None, exclude_tags: Sequence[str], fact_types: Sequence[str] | None
) -> tuple[str, list[object]]:
    """The listing's SQL and parameters: the bank's units from ``since``, oldest first by
    ``(created_at, id)``, without ``exclude_tags``, of ``fact_types`` (None or empty: all)."""
    where = ["u.bank_id = ?"]
    params: list[object] = [bank_id]
    if since is not None:
        where.append("u.created_at >= ?")
        params.append(format_time(since))
    if exclude_tags:
        where.append(
            "NOT EXISTS (SELECT 1 FROM json_each(u.tags) t WHERE t.value IN (SELECT value FROM json_each(?)))"
        )
        params.append(json.dumps(list(exclude_tags)))
    if fact_types:
        where.append("u.fact_type IN (SELECT value FROM json_each(?))")
        params.append(json.dumps(list(fact_types)))
    sql = f"SELECT {UNIT_COLUMNS} FROM units u WHERE {' AND '.join(where)} ORDER BY u.created_at, u.id"
    return sql, params


def within_budget(
    hits: Iterable[_H],
    text: Callable[[_H], str],
    item: Callable[[_H], RecallItem],
    max_tokens: int,
    limit: int | None,
) -> list[RecallItem]:
    """The hits, best first, up to ``limit``, stopping before the one that would pass ``max_tokens``
    (Hindsight's trim, ~4 characters a token); the best hit is always kept, since an embedded unit
    is a whole item and may alone exceed the budget."""
    items: list[RecallItem] = []
    used_tokens = 0
    for hit in hits:
        tokens = estimate_tokens(text(hit))
        if items and used_tokens + tokens > max_tokens:
            break
        used_tokens += tokens
        items.append(item(hit))
        if limit is not None and len(items) >= limit:
            break
    return items


def full_text_recall(
    conn: sqlite3.Connection,
    bank_id: str,
    match: str,
    *,
    types: Sequence[str] | None,
    tags: Sequence[str] | None,
    tags_match: TagsMatch,
    want: int,
    max_tokens: int,
    limit: int | None,
) -> list[RecallItem]:
    """Recall by full text alone (no embedder, or one that failed), within the token budget."""
    rows = search_bank(conn, bank_id, match, types=types, tags=tags, tags_match=tags_match, want=want)
    with closing(rows):  # ends the read snapshot now, not when the generator is collected
        return within_budget(rows, lambda row: row["text"], recall_item_from_row, max_tokens, limit)


def reflect_rows(
    conn: sqlite3.Connection,
    bank_id: str,
    match: str | None,
    *,
    tags: Sequence[str] | None,
    tags_match: TagsMatch,
    count: int,
) -> list[sqlite3.Row]:
    """The ``count`` units most relevant to the query's ``match``, else (no match, or no hit) the
    most recent ones: an extractive reflect always has something to answer with."""
    rows: list[sqlite3.Row] = []
    if match is not None:
        hits = search_bank(conn, bank_id, match, types=None, tags=tags, tags_match=tags_match, want=count)
        with closing(hits):
            for row in hits:
                rows.append(row)
                if len(rows) >= count:
                    break
    if not rows:
        tag_sql, tag_params = tags_filter(tags, tags_match)
        rows = conn.execute(
            f"SELECT {UNIT_COLUMNS} FROM units u WHERE u.bank_id = ? {tag_sql}"
            " ORDER BY u.created_at DESC, u.id DESC LIMIT ?",
            [bank_id, *tag_params, count],
        ).fetchall()
    return rows
