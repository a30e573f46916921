"""Hybrid recall in the embedded store: the full-text ranking fused with the vector ranking.

:func:`hybrid_search` takes the bank's best full-text rows (:func:`lexical_rows`, read first and
maybe on another connection: :func:`~.search.search_bank`) and its
nearest vectors (:func:`dreamer.embeddings.vectors.top_k` over the cached matrix), applies the same
fact-type and tag filters to both, and fuses the two rankings by reciprocal rank (:func:`fuse`, pure).
Each hit carries the fused score, scaled to (0, 1], and the cosine between the query and the unit
(None when the unit has no vector of the model yet).

Why: ``docs/design/embedded-store.md`` (Hybrid recall).
"""

from __future__ import annotations

import functools
import json
import sqlite3
from collections.abc import Callable, Sequence
from contextlib import closing
from dataclasses import dataclass
from typing import TYPE_CHECKING

import structlog

from dreamer.backends.base import TagsMatch
from dreamer.backends.embedded.schema import UNIT_COLUMNS
from dreamer.backends.embedded.search import search_bank, tags_filter
from dreamer.backends.embedded.vector_cache import VectorCache
from dreamer.backends.embedded.vector_matrix import MatrixView
from dreamer.backends.embedded.vector_store import exact_by_vec_no, exact_cosines

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

__all__ = [
    "MIN_COSINE",
    "RRF_K",
    "HybridHit",
    "SegmentHits",
    "fuse",
    "fusion_depth",
    "hybrid_search",
    "lexical_rows",
    "recall_hits",
    "search_ahead",
]

log = structlog.get_logger("dreamer.backends.embedded")

#: The segments' nearest keys of a query found ahead, when found for at least this many (else None).
SegmentHits = Callable[[int], "list[tuple[int, float]] | None"]

#: Reciprocal-rank fusion's constant: a hit's share is ``1 / (RRF_K + rank)`` in each ranking.
RRF_K = 60
#: Nearest units below this cosine are not semantic candidates (for all-MiniLM-L6-v2, unrelated
#: sentences score about -0.1 to 0.2); a full-text hit keeps its cosine whatever it is.
MIN_COSINE = 0.3
#: Each ranking contributes its best ``max(want, MIN_DEPTH)`` hits to the fusion: deeper full-text
#: lists cost joins (docs/design/embedded-store.md) and a hit ranked below ``want`` in both
#: rankings could not make the cut anyway.
MIN_DEPTH = 10
#: Rows rescored beyond the ``k`` a search keeps: the codes' scores are within about 0.01 of the
#: cosines, so a unit of the true ``k`` nearest could rank a few places lower by its code.
RESCORE_MARGIN = 16
#: How far below :data:`MIN_COSINE` a code's score may be and its unit still be rescored.
RESCORE_SLACK = 0.05


@dataclass(frozen=True)
class HybridHit:
    """One fused hit: the unit's row, its score in (0, 1] and its cosine to the query (or None)."""

    row: sqlite3.Row
    score: float
    cosine: float | None


def fusion_depth(want: int) -> int:
    """How many hits of each ranking enter the fusion for ``want`` results."""
    return max(want, MIN_DEPTH)


def fuse(rankings: Sequence[Sequence[str]]) -> dict[str, float]:
    """Reciprocal-rank fusion of id rankings (best first): id → score scaled so 1.0 is first in all."""
    best = len(rankings) / (RRF_K + 1)
    fused: dict[str, float] = {}
    for ranking in rankings:
        for rank, unit_id in enumerate(ranking, start=1):
            fused[unit_id] = fused.get(unit_id, 0.0) + 1.0 / (RRF_K + rank)
    return {unit_id: value / best for unit_id, value in fused.items()}


def lexical_rows(
    conn: sqlite3.Connection,
    bank_id: str,
    match: str,
    *,
    types: Sequence[str] | None,
    tags: Sequence[str] | None,
    tags_match: TagsMatch,
    want: int,
) -> list[sqlite3.Row]:
    """The full-text side of a hybrid recall: the bank's best rows for ``match``, as many as enter
    the fusion. It reads the file alone (no vector cache), so a recall may read it on the spare
    connection while another recall holds the first."""
    depth = fusion_depth(want)
    lexical: list[sqlite3.Row] = []
    rows = search_bank(conn, bank_id, match, types=types, tags=tags, tags_match=tags_match, want=depth)
    with closing(rows):
        for row in rows:
            lexical.append(row)
            if len(lexical) >= depth:
                break
    return lexical


def hybrid_search(
    conn: sqlite3.Connection,
    bank_id: str,
    lexical: Sequence[sqlite3.Row],
    query_vector: NDArray[np.float32],
    bank: MatrixView | None,
    *,
    types: Sequence[str] | None,
    tags: Sequence[str] | None,
    tags_match: TagsMatch,
    want: int,
    model_id: str,
    ahead: SegmentHits | None = None,
) -> list[HybridHit]:
    """The bank's fused hits, best first (ties newest first, then by id): ``lexical``, the
    full-text side (:func:`lexical_rows`, read beforehand, maybe on another connection), fused with
    the vector side. Every cosine is the stored vector's own (:func:`exact_cosines`), not its
    code's. ``ahead`` gives the segments' hits when they were found for a batch of queries at once
    (:meth:`VectorCache.prefetch`). ``OSError`` when a segment of the bank can no longer be read."""
    depth = fusion_depth(want)
    semantic = _nearest(conn, bank_id, query_vector, bank, model_id, types, tags, tags_match, depth, ahead)

    by_id = {row["id"]: row for row in lexical}
    cosines: dict[str, float] = {}
    for row, cosine in semantic:
        by_id.setdefault(row["id"], row)
        cosines[row["id"]] = cosine
    if bank is not None:
        unscored = [r for r in lexical if r["id"] not in cosines]
        exact = exact_cosines(conn, model_id, [int(row["seq"]) for row in unscored], query_vector)
        for row in unscored:
            if int(row["seq"]) in exact:
                cosines[row["id"]] = exact[int(row["seq"])]
    scores = fuse([[row["id"] for row in lexical], [row["id"] for row, _ in semantic]])
    # Stable sorts, last key first: score, then newest created_at, then id.
    order = sorted(scores)
    order.sort(key=lambda unit_id: by_id[unit_id]["created_at"], reverse=True)
    order.sort(key=lambda unit_id: scores[unit_id], reverse=True)
    return [HybridHit(by_id[unit_id], scores[unit_id], cosines.get(unit_id)) for unit_id in order]


def recall_hits(
    conn: sqlite3.Connection,
    cache: VectorCache,
    bank_id: str,
    lexical: Sequence[sqlite3.Row],
    query_vector: NDArray[np.float32],
    *,
    types: Sequence[str] | None,
    tags: Sequence[str] | None,
    tags_match: TagsMatch,
    want: int,
    model_id: str,
) -> list[HybridHit]:
    """:func:`hybrid_search` of the full-text rows ``lexical`` over the bank's vectors as ``cache``
    holds them now, with the segment hits it found ahead for this query; a segment removed or cut
    short since it was opened is logged and the bank read again from the store, once."""

    def search() -> list[HybridHit]:
        bank = cache.refresh(conn, bank_id, model_id, int(query_vector.shape[0])).bank
        ahead = (
            None if bank is None else functools.partial(cache.ahead, bank_id, model_id, bank, query_vector)
        )
        return hybrid_search(
            conn, bank_id, lexical, query_vector, bank, types=types, tags=tags, tags_match=tags_match,
            want=want, model_id=model_id, ahead=ahead,
        )  # fmt: skip

    try:
        return search()
    except OSError as exc:
        log.warning("vector segments lost; reading the bank's vectors again", bank=bank_id, problem=str(exc))
        cache.forget(bank_id, model_id)
        return search()


def search_ahead(
    conn: sqlite3.Connection,
    cache: VectorCache,
    bank_id: str,
    model_id: str,
    queries: NDArray[np.float32],
    want: int,
) -> None:
    """Stream the bank's segments once for all ``queries`` (their ``want`` best hits each), for
    the recalls of them that follow (:meth:`VectorCache.prefetch`); a lost segment is logged and
    left to those recalls."""
    bank = cache.refresh(conn, bank_id, model_id, int(queries.shape[1])).bank
    if bank is not None and bank.segments:
        try:
            cache.prefetch(bank_id, model_id, bank, queries, want)
        except OSError as exc:
            log.warning("vector segments lost while searching ahead", bank=bank_id, problem=str(exc))


def _nearest(
    conn: sqlite3.Connection,
    bank_id: str,
    query_vector: NDArray[np.float32],
    bank: MatrixView | None,
    model_id: str,
    types: Sequence[str] | None,
    tags: Sequence[str] | None,
    tags_match: TagsMatch,
    depth: int,
    ahead: SegmentHits | None = None,
) -> list[tuple[sqlite3.Row, float]]:
    """Up to ``depth`` of the nearest units passing the filters, nearest first, with their cosines.

    The codes' scores choose the nearest ``k`` (and :data:`RESCORE_MARGIN` more, for the codes'
    rounding), their stored vectors rescore them exactly (a vector dropped since is left out).
    The filters run in SQL on those units; when they leave too few, ``k`` widens once (×10) and
    then to the whole bank.
    """
    if bank is None or bank.size == 0:
        return []
    tag_sql, tag_params = tags_filter(tags, tags_match)
    where = ["u.bank_id = ?"]
    params: list[object] = [bank_id]
    if types:
        where.append("u.fact_type IN (SELECT value FROM json_each(?))")
        params.append(json.dumps(list(types)))
    # CROSS JOIN keeps SQLite from walking the bank's units by bank_id and probing the key list.
    sql = (
        f"SELECT {UNIT_COLUMNS}, u.seq AS seq FROM json_each(?) k CROSS JOIN units u ON u.seq = k.value"
        f" WHERE {' AND '.join(where)} {tag_sql}"
    )
    k = depth
    while True:
        k = min(k, bank.size)
        taken = min(bank.size, k + RESCORE_MARGIN)
        found_ahead = None if ahead is None else ahead(taken)
        approximate = bank.nearest(query_vector, taken, None if found_ahead is None else [found_ahead])[0]
        rows = [
            key for key, score in approximate if score >= MIN_COSINE - RESCORE_SLACK
        ]  # none below could reach it
        exact = exact_by_vec_no(conn, model_id, rows, query_vector)
        ranked = sorted(exact.items(), key=lambda kc: (-kc[1], kc[0]))[:k]
        nearest = [(key, cosine) for key, cosine in ranked if cosine >= MIN_COSINE]
        found = {
            int(row["seq"]): row
            for row in conn.execute(sql, [json.dumps([key for key, _ in nearest]), *params, *tag_params])
        }
        hits = [(found[key], cosine) for key, cosine in nearest if key in found]
        if len(hits) >= depth or k >= bank.size or len(nearest) < k:
            return hits[:depth]
        k = bank.size if k > depth else k * 10
