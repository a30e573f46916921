"""Full-text search in the embedded store: from a user's query to a bank's ranked rows.

:func:`query_terms` cuts a query into terms and :func:`fts_match_expression` quotes and OR-s them
(stopwords left out unless the query holds nothing else), so no user text is ever read as FTS5
syntax. :func:`search_bank` ranks the MATCH inside the bank's key range by BM25 first, takes a
bounded set of the best candidates and only then joins them to ``units`` and applies Hindsight's
fact-type and ``tags_match`` filters (:func:`tags_filter`, on the indexed ``unit_tags`` table),
widening the candidate set when the filters leave too few. :func:`bm25_to_score` maps BM25 to a
score in [0, 1) and :func:`estimate_tokens` is the rough count recall's ``max_tokens`` is measured in.

The functions take a connection and plain values; opening it and turning rows into results is the
backend's. Why the search is confined by key range and ranked before it joins:
``docs/design/embedded-store.md``.
"""

from __future__ import annotations

import json
import math
import sqlite3
import unicodedata
from collections.abc import Generator, Sequence
from typing import NamedTuple

from dreamer.backends.base import TagsMatch
from dreamer.backends.embedded.schema import UNIT_COLUMNS, bank_key_range
from dreamer.errors import PermanentBackendError

__all__ = [
    "CHARS_PER_TOKEN",
    "COMMON_MATCHES",
    "MAX_QUERY_TERMS",
    "STOPWORDS",
    "MatchPlan",
    "bm25_to_score",
    "candidate_limits",
    "estimate_tokens",
    "fts_match_expression",
    "match_plan",
    "query_terms",
    "search_bank",
    "tags_filter",
]

#: Longer queries are cut to their first terms: BM25 over hundreds of OR-ed terms ranks no better.
MAX_QUERY_TERMS = 128
#: English function words left out of the match expression: they match most units, so scoring them
#: costs a pass over most of the bank while adding almost nothing to BM25 (docs/design/embedded-store.md).
STOPWORDS = frozenset(
    """
    a about above after again against all am an and any are as at be because been before being below
    between both but by can could did do does doing down during each few for from further had has have
    having he her here hers herself him himself his how i if in into is it its itself just me more most
    my myself no nor not now of off on once only or other our ours ourselves out over own same she
    should so some such than that the their theirs them themselves then there these they this those
    through to too under until up very was we were what when where which while who whom why will with
    would you your yours yourself yourselves
    """.split()
)
#: The first candidate set holds the best ``max(want * CANDIDATE_FACTOR, MIN_CANDIDATES)`` matches;
#: when the filters leave fewer than wanted it widens once by ``WIDEN_FACTOR``, then to every match.
CANDIDATE_FACTOR = 20
MIN_CANDIDATES = 200
WIDEN_FACTOR = 10
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

    :data:`STOPWORDS` are left out, unless the query is made of nothing else (then all its terms are
    kept, so "to be or not to be" still finds itself). Each term is an FTS5 string literal (``"``
    doubled inside), so no user text is ever read as FTS5 syntax: ``AND``, ``NEAR``, ``*``, ``^``,
    ``col:`` and quotes are plain words or separators.
    """
    terms = query_terms(query)
    if not terms:
        return None
    terms = [term for term in terms if term.casefold() not in STOPWORDS] or terms
    return " OR ".join('"' + term.replace('"', '""') + '"' for term in terms)


def candidate_limits(want: int) -> tuple[int, ...]:
    """How many BM25 candidates each pass takes for ``want`` hits; -1 (SQLite's "no limit") last."""
    first = max(want * CANDIDATE_FACTOR, MIN_CANDIDATES)
    return first, first * WIDEN_FACTOR, -1


def search_bank(
    conn: sqlite3.Connection,
    bank_id: str,
    match: str,
    *,
    types: Sequence[str] | None,
    tags: Sequence[str] | None,
    tags_match: TagsMatch,
    want: int,
    common_matches: int | None = None,
) -> Generator[sqlite3.Row]:
    """Rows matching ``match`` (an expression of :func:`fts_match_expression`) in the bank, best
    BM25 first, ties newest first.

    Sized for a caller that stops after about ``want`` rows. FTS5 ranks the bank's matches on its own
    (no join) and keeps the best :func:`candidate_limits` of them; only those are joined to
    ``units`` and filtered. When the caller reads past what the candidates yielded, the next pass
    widens the candidate set (once, then to every match) and carries on where the last one stopped.
    The rowid range confines FTS5 to the bank's rows (docs/design/embedded-store.md); ``u.bank_id``
    is checked as well, so the range only ever saves work and never decides what matches.

    In a large bank, ranking every match of a term that most units hold costs a pass over most of
    the bank. So when some terms match more than ``common_matches`` of the bank's units (default
    :data:`COMMON_MATCHES`) and others fewer, the rows come in two tiers (:class:`MatchPlan`): first
    the rows holding at least one of the rarer terms, then the rows holding only common ones, each
    tier in BM25 order. Every row keeps the very score the one-tier query gives it (FTS5 computes
    both, up to float rounding); what changes is that a row holding only common terms comes after
    the rarer terms' rows even when it would score higher. A bank where no term is that common is
    searched in one tier, exactly as before.
    """
    tag_sql, tag_params = tags_filter(tags, tags_match)  # an unknown tags_match fails in any bank
    bank = conn.execute("SELECT bank_no, unit_count FROM banks WHERE bank_id = ?", (bank_id,)).fetchone()
    if bank is None or bank["bank_no"] is None:
        return
    first_key, last_key = bank_key_range(int(bank["bank_no"]))
    where = ["u.bank_id = ?"]
    filter_params: list[object] = [bank_id]
    if types:
        where.append("u.fact_type IN (SELECT value FROM json_each(?))")
        filter_params.append(json.dumps(list(types)))
    filter_params.extend(tag_params)
    # Candidates are cut in (rank, newest key) order, the final order (rank, newest created_at, id)
    # among them: the same order, because within a bank keys and created_at both grow in write order.
    joined = f"""
        SELECT {UNIT_COLUMNS}, c.rank AS rank, c.seq AS seq
        FROM candidates c JOIN units u ON u.seq = c.seq
        WHERE {" AND ".join(where)} {tag_sql}
        ORDER BY c.rank, u.created_at DESC, u.id
        """
    bounds = [first_key, last_key]
    limit = COMMON_MATCHES if common_matches is None else common_matches
    # A bank of at most ``limit`` units holds no common term: its terms need not be counted.
    few = bank["unit_count"] is not None and int(bank["unit_count"]) <= limit
    plan = MatchPlan(match, None) if few else match_plan(conn, match, first_key, last_key, limit)
    # Each tier: its candidates' SQL, their parameters, and the expression whose matches they are.
    if plan.common is None or plan.rare is None:
        tiers = [(_RANKED, [match, *bounds], match)]
    else:
        mixed = f"({plan.common}) AND ({plan.rare})"
        only_common = f"({plan.common}) NOT ({plan.rare})"
        tiers = [
            (_RARE_FIRST, [plan.rare, *bounds, mixed, *bounds], plan.rare),
            (_RANKED, [only_common, *bounds], only_common),
        ]
    for candidates, params, counted in tiers:
        yielded = 0
        for cut in candidate_limits(want):
            rows = conn.execute(f"WITH {candidates} {joined}", [*params, cut, *filter_params])
            try:
                for index, row in enumerate(rows):
                    if index >= yielded:
                        yielded += 1
                        yield row
            finally:
                rows.close()  # ends the read snapshot now, not when the cursor is collected
            if cut < 0 or not _more_matches(conn, counted, first_key, last_key, cut):
                break


#: A term matching more of a bank's units than this is common: in a larger bank, the rows holding
#: only such terms come after those holding a rarer one (:func:`search_bank`).
COMMON_MATCHES = 5_000

# The best matches of one expression, by BM25 then newest key: the candidates of one tier.
_RANKED = """candidates (seq, rank) AS MATERIALIZED (
            SELECT rowid, bm25(units_fts) FROM units_fts
            WHERE units_fts MATCH ? AND rowid BETWEEN ? AND ?
            ORDER BY 2, rowid DESC LIMIT ?
        )"""
# The rows holding a rare term, each with its full score: FTS5 scores the rare terms alone on every
# such row, and all terms on those that also hold a common one (an AND that seeks the common terms'
# lists at the rare rows instead of reading them). Both expressions hold every phrase at most once
# and FTS5's BM25 sums per phrase, so a row gets the score of the one-tier expression.
_RARE_FIRST = """rare (seq, rank) AS MATERIALIZED (
            SELECT rowid, bm25(units_fts) FROM units_fts WHERE units_fts MATCH ? AND rowid BETWEEN ? AND ?
        ),
        mixed (seq, rank) AS MATERIALIZED (
            SELECT rowid, bm25(units_fts) FROM units_fts WHERE units_fts MATCH ? AND rowid BETWEEN ? AND ?
        ),
        candidates (seq, rank) AS MATERIALIZED (
            SELECT r.seq, coalesce(m.rank, r.rank) FROM rare r LEFT JOIN mixed m ON m.seq = r.seq
            ORDER BY 2, 1 DESC LIMIT ?
        )"""


class MatchPlan(NamedTuple):
    """A match expression cut in two: the terms at most ``COMMON_MATCHES`` units of the bank hold
    (``rare``) and the others (``common``); either is None when no term is of that kind."""

    rare: str | None
    common: str | None


def match_plan(conn: sqlite3.Connection, match: str, first_key: int, last_key: int, limit: int) -> MatchPlan:
    """Which terms of ``match`` are common in the bank's key range: each term's matches are counted
    up to ``limit`` + 1, so the count costs at most that many rows of its list."""
    # fts_match_expression's terms never hold whitespace, so " OR " only ever separates them.
    phrases = match.split(" OR ")
    if len(phrases) < 2:
        return MatchPlan(match, None)
    rare: list[str] = []
    common: list[str] = []
    for phrase in phrases:
        (count,) = conn.execute(
            "SELECT count(*) FROM (SELECT 1 FROM units_fts WHERE units_fts MATCH ? AND rowid BETWEEN ? AND ?"
            " LIMIT ?)",
            (phrase, first_key, last_key, limit + 1),
        ).fetchone()
        (common if count > limit else rare).append(phrase)
    return MatchPlan(" OR ".join(rare) or None, " OR ".join(common) or None)


def _more_matches(conn: sqlite3.Connection, match: str, first_key: int, last_key: int, limit: int) -> bool:
    """Whether the bank holds more than ``limit`` matches (the candidate set was cut)."""
    row = conn.execute(
        "SELECT 1 FROM units_fts WHERE units_fts MATCH ? AND rowid BETWEEN ? AND ? LIMIT 1 OFFSET ?",
        (match, first_key, last_key, limit),
    ).fetchone()
    return row is not None


def tags_filter(tags: Sequence[str] | None, tags_match: TagsMatch) -> tuple[str, list[object]]:
    """An ``AND …`` clause on the unit's tags (``unit_tags`` rows of ``u.seq``), Hindsight's meaning.

    Mirrors ``hindsight_api/engine/search/tags.py``: ``any`` = overlap or untagged, ``all`` = every
    requested tag present or untagged, ``any_strict``/``all_strict`` = the same without untagged
    units, ``exact`` = the unit's tag set equals the requested set. No tags means no filter, except
    for ``exact``, where the empty set selects untagged units.
    """
    untagged = "NOT EXISTS (SELECT 1 FROM unit_tags t WHERE t.unit_key = u.seq)"
    overlap = (
        "EXISTS (SELECT 1 FROM unit_tags t WHERE t.unit_key = u.seq"
        " AND t.tag IN (SELECT value FROM json_each(?)))"
    )
    contains_all = (
        "NOT EXISTS (SELECT 1 FROM json_each(?) q WHERE NOT EXISTS"
        " (SELECT 1 FROM unit_tags t WHERE t.unit_key = u.seq AND t.tag = q.value))"
    )
    within = (
        "NOT EXISTS (SELECT 1 FROM unit_tags t WHERE t.unit_key = u.seq"
        " AND t.tag NOT IN (SELECT value FROM json_each(?)))"
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
