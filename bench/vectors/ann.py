"""The approximate indexes beside numpy's exact search: usearch's HNSW in a file of its own, searched
memory-mapped (``Index.restore(view=True)``: its pages read as the search touches them, not loaded),
and pgvector's HNSW in a PostgreSQL table (``scripts/postgres-dev``; the server on 127.0.0.1 named
by ``DREAMER_TEST_POSTGRES_URL``).

Both are built with their libraries' defaults but for the graph's width (``M`` 16) and the
candidates kept while building (``ef_construction`` 128); searched with 64 candidates
(``expansion_search`` / ``hnsw.ef_search``). Each is built in the benchmark's process and searched
in a fresh one (bench.vectors.worker), as the numpy rows are.
"""

from __future__ import annotations

import json
import os
import secrets
import time
from pathlib import Path
from typing import Any

from bench.postgres import DSN_ENV, drop_schema, loopback
from bench.vectors.data import DIMENSION, K

__all__ = ["build_pgvector", "build_usearch", "drop_pgvector", "pgvector_search", "usearch_search"]

CONNECTIVITY = 16
EXPANSION_ADD = 128
EXPANSION_SEARCH = 64
USEARCH_FILE = "vectors.usearch"
PGVECTOR_FILE = "pgvector.json"


def build_usearch(folder: Path, stored: Any) -> dict[str, Any]:
    """The index of ``stored`` (float16, cosine) saved beside the other files: its build time and size."""
    from usearch.index import Index

    started = time.perf_counter()
    index = Index(
        ndim=DIMENSION,
        metric="cos",
        dtype="f16",
        connectivity=CONNECTIVITY,
        expansion_add=EXPANSION_ADD,
        expansion_search=EXPANSION_SEARCH,
    )
    index.add(list(range(len(stored))), stored, threads=2)
    index.save(str(folder / USEARCH_FILE))
    return {
        "insert_s": time.perf_counter() - started,
        "file_mib": (folder / USEARCH_FILE).stat().st_size / 1024 / 1024,
    }


def usearch_search(folder: Path) -> dict[str, Any]:
    """Cold: map the saved index and run the 20 queries; warm: run them again; one at a time."""
    import numpy as np
    from usearch.index import Index

    from bench.vectors.worker import median_ms, ms_since, rss_mib

    queries = np.load(folder / "queries.npy").astype(np.float32)
    before = rss_mib()
    started = time.perf_counter()
    index = Index.restore(str(folder / USEARCH_FILE), view=True)
    if index is None:
        raise RuntimeError(f"{folder / USEARCH_FILE} is not a usearch index")
    index.expansion_search = EXPANSION_SEARCH  # type: ignore[misc]  # settable; typed read-only
    load_ms = ms_since(started)

    def search() -> list[list[int]]:
        return [[int(k) for k in row] for row in index.search(queries, K, threads=1).keys]

    found = search()
    cold_ms = ms_since(started)
    warm_ms = median_ms(search)
    one_ms = median_ms(lambda: [index.search(q, K) for q in queries]) / len(queries)
    return {
        "load_ms": load_ms,
        "cold_ms": cold_ms,
        "warm_ms": warm_ms,
        "per_query_ms": one_ms,
        "rss_delta_mib": rss_mib() - before,
        "found": found,
    }


def build_pgvector(folder: Path, stored: Any) -> dict[str, Any]:
    """A table of ``stored`` (pgvector ``vector(384)``) in a new schema, its HNSW index built after
    the rows (as an index added to a full table is): the time of both and the table's size."""
    import psycopg

    dsn = os.environ.get(DSN_ENV, "")
    if not dsn:
        raise RuntimeError(f"no PostgreSQL: ${DSN_ENV} is not set (scripts/postgres-dev up)")
    loopback(dsn)
    schema = f"bench_vectors_{secrets.token_hex(4)}"
    (folder / PGVECTOR_FILE).write_text(json.dumps({"dsn": dsn, "schema": schema}))
    started = time.perf_counter()
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
        conn.execute(f'CREATE TABLE "{schema}".vec (id integer PRIMARY KEY, embedding vector({DIMENSION}))')
        with conn.cursor().copy(f'COPY "{schema}".vec (id, embedding) FROM STDIN') as copy:
            for i, row in enumerate(stored):
                copy.write_row((i, "[" + ",".join(f"{x:.6g}" for x in row) + "]"))
        loaded_s = time.perf_counter() - started
        conn.execute(
            f'CREATE INDEX ON "{schema}".vec USING hnsw (embedding vector_cosine_ops) '
            f"WITH (m = {CONNECTIVITY}, ef_construction = {EXPANSION_ADD})"
        )
        size = conn.execute(f"SELECT pg_total_relation_size('\"{schema}\".vec')").fetchone()
    return {
        "insert_s": time.perf_counter() - started,
        "load_s": loaded_s,
        "file_mib": float(size[0] if size else 0) / 1024 / 1024,
    }


def pgvector_search(folder: Path) -> dict[str, Any]:
    """Cold: connect and run the 20 queries; warm: again. RSS is the client's: the server holds the index."""
    import numpy as np
    import psycopg

    from bench.vectors.worker import median_ms, ms_since, rss_mib

    where = json.loads((folder / PGVECTOR_FILE).read_text())
    queries = np.load(folder / "queries.npy")
    literals = ["[" + ",".join(f"{x:.6g}" for x in q) + "]" for q in queries]
    before = rss_mib()
    started = time.perf_counter()
    with psycopg.connect(where["dsn"], autocommit=True) as conn:
        conn.execute(f"SET hnsw.ef_search = {EXPANSION_SEARCH}")
        # The index, not the planner's choice: on a small table it would scan and sort instead.
        conn.execute("SET enable_seqscan = off")
        sql = f'SELECT id FROM "{where["schema"]}".vec ORDER BY embedding <=> %s::vector LIMIT {K}'

        def search() -> list[list[int]]:
            return [[int(r[0]) for r in conn.execute(sql, (q,))] for q in literals]

        found = search()
        cold_ms = ms_since(started)
        warm_ms = median_ms(search)
        plan = "\n".join(r[0] for r in conn.execute("EXPLAIN " + sql, (literals[0],)))
    return {
        "load_ms": None,
        "cold_ms": cold_ms,
        "warm_ms": warm_ms,
        "per_query_ms": warm_ms / len(queries),
        "rss_delta_mib": rss_mib() - before,
        "uses_index": "Index Scan" in plan,
        "found": found,
    }


def drop_pgvector(folder: Path) -> None:
    path = folder / PGVECTOR_FILE
    if path.exists():
        where = json.loads(path.read_text())
        drop_schema(where["dsn"], where["schema"])
