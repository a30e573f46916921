"""Full-text search in the embedded store: from a user's query to a bank's ranked rows.

:func:`query_terms` cuts a query into terms and :func:`fts_match_expression` quotes and OR-s them, so
no user text is ever read as FTS5 syntax. :func:`search_bank` runs the MATCH inside the bank's key
range (FTS5 then reads that bank's rows only), with Hindsight's fact-type and ``tags_match`` filters
(:func:`tags_filter`), best BM25 first, ties by newest. :func:`bm25_to_score` maps BM25 to a score in
[0, 1) and :func:`estimate_tokens` is the rough count recall's ``max_tokens`` is measured in.

The functions take a connection and plain values; opening it and turning rows into results is the
backend's. Why the search is confined by key range: ``docs/design/embedded-store.md``.
"""

from __future__ import annotations

import json
import math
import sqlite3
import unicodedata
from collections.abc import Sequence

from dreamer.backends.base import TagsMatch
from dreamer.backends.embedded.schema import UNIT_COLUMNS, bank_key_range
from dreamer.errors import PermanentBackendError

__all__ = [
    "CHARS_PER_TOKEN",
    "MAX_QUERY_TERMS",
    "bm25_to_score",
    "estimate_tokens",
    "fts_match_expression",
    "query_terms",
    "search_bank",
    "tags_filter",
]

#: Longer queries are cut to their first terms: BM25 over hundreds of OR-ed terms ranks no better.
MAX_QUERY_TERMS = 128
#: Rough token estimate for ``max_tokens`` (no tokenizer dependency): about 4 characters per token.
CHARS_PER_TOKEN = 4


# Unicode categories FTS5's unicode61 tokenizer treats as separators (it keeps letters, numbers,
# marks, private-use and other symbols such as emoji). Splitting on them here lets each term be
# OR-ed on its own; anything this misses is still safe, because FTS5 re-tokenises quoted strings.
_SEPARATOR_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Sm", "Sc", "Sk"})


def query_terms(query: str) -> list[str]:
    """The distinct search terms of ``query`` (case-insensitively), in order, at most ``MAX_QUERY_TERMS``."""
    terms: list[str] = []
    seen: set[str] = set()
    current: list[str] = []

    def flush() -> None:
        if current:
            term = "".join(current)
            current.clear()
            key = term.casefold()
            if key not in seen and any(unicodedata.category(ch)[0] != "M" for ch in term):
                seen.add(key)
                terms.append(term)

    for ch in query:
        category = unicodedata.category(ch)
        if category[0] in "PZ" or category in _SEPARATOR_CATEGORIES:
            flush()
        else:
            current.append(ch)
    flush()
    return terms[:MAX_QUERY_TERMS]


def fts_match_expression(query: str) -> str | None:
    """An FTS5 MATCH expression OR-ing the quoted terms of ``query``; None when it has none.

    Each term is an FTS5 string literal (``"`` doubled inside), so no user text is ever read as
    FTS5 syntax: ``AND``, ``NEAR``, ``*``, ``^``, ``col:`` and quotes are plain words or separators.
    """
    terms = query_terms(query)
    if not terms:
        return None
    return " OR ".join('"' + term.replace('"', '""') + '"' for term in terms)


def search_bank(
    conn: sqlite3.Connection,
    bank_id: str,
    match: str,
    *,
    types: Sequence[str] | None,
    tags: Sequence[str] | None,
    tags_match: TagsMatch,
) -> sqlite3.Cursor:
    """Rows matching ``match`` in the bank, best BM25 first (lazily fetched).

    The rowid range confines FTS5 to the bank's rows (docs/design/embedded-store.md); ``u.bank_id``
    is checked as well, so the range only ever saves work and never decides what matches.
    """
    bank = conn.execute("SELECT bank_no FROM banks WHERE bank_id = ?", (bank_id,)).fetchone()
    unknown = bank is None or bank["bank_no"] is None
    first_key, last_key = (1, 0) if unknown else bank_key_range(int(bank["bank_no"]))
    where = ["units_fts MATCH ?", "units_fts.rowid BETWEEN ? AND ?", "u.bank_id = ?"]
    params: list[object] = [match, first_key, last_key, bank_id]
    if types:
        where.append("u.fact_type IN (SELECT value FROM json_each(?))")
        params.append(json.dumps(list(types)))
    tag_sql, tag_params = tags_filter(tags, tags_match)
    params.extend(tag_params)
    return conn.execute(
        f"""
        SELECT {UNIT_COLUMNS}, bm25(units_fts) AS rank
        FROM units_fts JOIN units u ON u.seq = units_fts.rowid
        WHERE {" AND ".join(where)} {tag_sql}
        ORDER BY rank, u.created_at DESC, u.id
        """,
        params,
    )


def tags_filter(tags: Sequence[str] | None, tags_match: TagsMatch) -> tuple[str, list[object]]:
    """An ``AND …`` clause on ``u.tags`` with Hindsight's ``tags_match`` meaning.

    Mirrors ``hindsight_api/engine/search/tags.py``: ``any`` = overlap or untagged, ``all`` = every
    requested tag present or untagged, ``any_strict``/``all_strict`` = the same without untagged
    units, ``exact`` = the unit's tag set equals the requested set. No tags means no filter, except
    for ``exact``, where the empty set selects untagged units.
    """
    untagged = "json_array_length(u.tags) = 0"
    overlap = "EXISTS (SELECT 1 FROM json_each(u.tags) t WHERE t.value IN (SELECT value FROM json_each(?)))"
    contains_all = (
        "NOT EXISTS (SELECT 1 FROM json_each(?) q WHERE q.value NOT IN (SELECT value FROM json_each(u.tags)))"
    )
    within = (
        "NOT EXISTS (SELECT 1 FROM json_each(u.tags) t WHERE t.value NOT IN (SELECT value FROM json_each(?)))"
    )
    if tags_match == "exact":
        if not tags:
            return f"AND {untagged}", []
        wanted = json.dumps(list(tags))
        return f"AND NOT {untagged} AND {contains_all} AND {within}", [wanted, wanted]
    if not tags:
        return "", []
    wanted = json.dumps(list(tags))
    if tags_match == "any":
        return f"AND ({untagged} OR {overlap})", [wanted]
    if tags_match == "all":
        return f"AND ({untagged} OR {contains_all})", [wanted]
    if tags_match == "any_strict":
        return f"AND NOT {untagged} AND {overlap}", [wanted]
    if tags_match == "all_strict":
        return f"AND NOT {untagged} AND {contains_all}", [wanted]
    raise PermanentBackendError(
        f"unknown tags_match {tags_match!r}; use any, all, any_strict, all_strict or exact",
        status=422,
        operation="recall",
        detail=f"tags_match: {tags_match!r}",
    )


def bm25_to_score(bm25: float) -> float:
    """FTS5's ``bm25()`` (lower is better) as a score in [0, 1), higher is better."""
    strength = max(0.0, -bm25)
    return strength / (1.0 + strength)


def estimate_tokens(text: str) -> int:
    """About how many tokens ``text`` is, at least 1 (``CHARS_PER_TOKEN`` characters a token)."""
    return max(1, math.ceil(len(text) / CHARS_PER_TOKEN))
