"""The command: ``python -m bench.vectors [--quick] [--json] [--sizes 10000,100000]``.

``--quick`` is the CI size: 10k vectors, and the embedded store's recall at 10k units.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bench._common import BenchError, machine_info, machine_line, progress, quiet_logs, render_table, report
from bench.vectors.ann import build_pgvector, build_usearch, drop_pgvector
from bench.vectors.data import CARDS, DIMENSION, QUERIES, K, clustered, exact_top_k, recall_at_k
from bench.vectors.worker import open_sqlite_vec

FULL_SIZES = (10_000, 100_000)
QUICK_SIZES = (10_000,)
#: The store's recall is measured at the largest size only (building it is the slow part).
RECALL_MODEL_ID = "bench:clustered-384"
METHODS = {
    "numpy": "numpy top_k, float16 matrix",
    "numpy32": "numpy top_k, float32 cache",
    "sqlite-vec": "sqlite-vec vec0 float32",
    "usearch": "usearch HNSW f16, mapped",
    "pgvector": "pgvector HNSW, PostgreSQL",
}
#: The approximate indexes, built after the exact files (bench.vectors.ann).
ANN_BUILDERS = {"usearch": build_usearch, "pgvector": build_pgvector}
REPO_ROOT = Path(__file__).resolve().parents[2]
#: The machine's two cores: the thread pools numpy's BLAS may use in a worker.
THREADS = "2"


def worker(task: str, folder: Path) -> dict[str, Any]:
    """Run one measurement in a fresh interpreter; its JSON answer."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])),
        "OMP_NUM_THREADS": THREADS,
        "OPENBLAS_NUM_THREADS": THREADS,
        "MKL_NUM_THREADS": THREADS,
    }
    done = subprocess.run(
        [sys.executable, "-m", "bench.vectors.worker", task, str(folder)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=1800,
    )
    if done.returncode != 0 or not done.stdout.strip():
        raise BenchError(
            f"the {task} measurement failed (exit {done.returncode}): {done.stderr.strip()[-400:]}"
        )
    answer: dict[str, Any] = json.loads(done.stdout)
    return answer


def build_vectors(folder: Path, size: int) -> dict[str, Any]:
    """The stored vectors (float16 blobs, and a sqlite-vec table when it loads) and the queries."""
    stored, centres = clustered(size, seed=1)
    queries, _ = clustered(QUERIES, seed=2, centres=centres)
    np.save(folder / "queries.npy", queries)
    path = folder / "vectors.sqlite3"
    plain = sqlite3.connect(path)
    try:
        with plain:
            plain.execute("CREATE TABLE vectors (id INTEGER PRIMARY KEY, vector BLOB NOT NULL)")
            plain.executemany(
                "INSERT INTO vectors (id, vector) VALUES (?, ?)",
                ((i, row.astype("<f2").tobytes()) for i, row in enumerate(stored)),
            )
    finally:
        plain.close()
    info: dict[str, Any] = {"exact": exact_top_k(queries, stored, K), "built": {}, "unavailable": {}}
    try:
        conn = open_sqlite_vec(path)
    except Exception as exc:  # not installed, or this SQLite cannot load extensions
        info["unavailable"]["sqlite-vec"] = f"{type(exc).__name__}: {exc}"
    else:
        started = time.perf_counter()
        conn.execute(
            f"CREATE VIRTUAL TABLE vec USING vec0(embedding float[{DIMENSION}] distance_metric=cosine)"
        )
        conn.execute("BEGIN")
        for i, row in enumerate(stored):
            conn.execute("INSERT INTO vec (rowid, embedding) VALUES (?, ?)", (i + 1, row.tobytes()))
        conn.execute("COMMIT")
        conn.close()
        info["built"]["sqlite-vec"] = {"insert_s": time.perf_counter() - started}
    for method, build in ANN_BUILDERS.items():
        progress(f"vectors {size}: building the {method} index")
        try:
            info["built"][method] = build(folder, stored)
        except Exception as exc:  # not installed, no server: the row says which
            info["unavailable"][method] = f"{type(exc).__name__}: {exc}"
    return info


def search_rows(size: int, scratch: Path) -> list[dict[str, Any]]:
    folder = scratch / f"search-{size}"
    folder.mkdir()
    progress(f"vectors {size}: writing {size} vectors")
    built = build_vectors(folder, size)
    size_mib = (folder / "vectors.sqlite3").stat().st_size / 1024 / 1024
    rows = []
    try:
        for method in METHODS:
            progress(f"vectors {size}: {method}")
            if method in built["unavailable"]:
                measured: dict[str, Any] = {"unavailable": built["unavailable"][method]}
            else:
                measured = worker(method, folder)
            found = measured.pop("found", None)
            made = built["built"].get(method, {})
            rows.append(
                {
                    "method": METHODS[method],
                    "vectors": size,
                    **measured,
                    f"recall_at_{K}": None if found is None else recall_at_k(found, built["exact"]),
                    "insert_s": made.get("insert_s"),
                    "file_mib": made.get("file_mib", size_mib),
                }
            )
    finally:
        drop_pgvector(folder)
    return rows


async def build_store(folder: Path, size: int) -> None:
    """An embedded store with ``size`` units in one bank, each with a clustered vector."""
    from bench.gating.banks import varied_text
    from dreamer.backends.base import RetainItem
    from dreamer.backends.embedded.backend import EmbeddedBackend

    path = folder / "store" / "memory.sqlite3"
    store = await EmbeddedBackend.open(path)
    try:
        for start in range(0, size, 5_000):
            items = [
                RetainItem(varied_text(i), tags=("rollup",)) for i in range(start, min(size, start + 5_000))
            ]
            await store.retain("global", items)
    finally:
        await store.aclose()
    stored, centres = clustered(size, seed=3)
    queries, _ = clustered(QUERIES, seed=4, centres=centres)
    np.save(folder / "queries.npy", queries)
    conn = sqlite3.connect(path)
    try:
        with conn:
            keys = [row[0] for row in conn.execute("SELECT seq FROM units ORDER BY seq")]
            conn.executemany(
                "INSERT INTO unit_vectors (unit_key, model_id, vector) VALUES (?, ?, ?)",
                (
                    (key, RECALL_MODEL_ID, row.astype("<f2").tobytes())
                    for key, row in zip(keys, stored, strict=True)
                ),
            )
        # A long-lived store has its WAL checkpointed; a fresh 100k-row WAL would slow every read.
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()
    meta = {"bank": "global", "units": size, "model_id": RECALL_MODEL_ID}
    (folder / "store.json").write_text(json.dumps(meta), encoding="utf-8")


def recall_row(size: int, scratch: Path) -> dict[str, Any]:
    folder = scratch / f"recall-{size}"
    folder.mkdir()
    progress(f"recall {size}: building the store")
    asyncio.run(build_store(folder, size))
    progress(f"recall {size}: measuring")
    return {"units": size, **worker("recall", folder)}


def run_benchmark(args: argparse.Namespace) -> dict[str, Any]:
    sizes: Sequence[int] = QUICK_SIZES if args.quick else FULL_SIZES
    if args.sizes:
        try:
            sizes = sorted({int(x) for x in args.sizes.split(",") if x.strip()})
        except ValueError:
            raise BenchError(
                f"--sizes takes comma-separated vector counts, e.g. 10000,100000: {args.sizes!r}"
            ) from None
        if not sizes or min(sizes) < K:
            raise BenchError(f"--sizes needs counts of at least {K}: {args.sizes!r}")
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="bench-vectors-") as tmp:
        scratch = Path(tmp)
        search = [row for size in sizes for row in search_rows(size, scratch)]
        progress("embedder: the local model on 20 cards")
        embedder = worker("embedder", scratch)
        recall = [recall_row(max(sizes), scratch)]
    return {
        "benchmark": "vectors",
        "quick": args.quick,
        "queries": QUERIES,
        "k": K,
        "dimension": DIMENSION,
        "search": search,
        "embedder": embedder,
        "cards": len(CARDS),
        "recall": recall,
        "total_wall_s": time.monotonic() - started,
        "load_average": os.getloadavg(),
        "machine": machine_info(),
    }


def render(result: Mapping[str, Any]) -> str:
    search = result["search"]
    unavailable = sorted({r["unavailable"] for r in search if "unavailable" in r})
    tables = [
        render_table(
            f"Nearest neighbours: {result['queries']} queries, k={result['k']}, "
            f"{result['dimension']}-d vectors",
            [
                "method",
                "vectors",
                "cold ms",
                "warm ms (20)",
                "ms/query",
                "RSS Δ MiB",
                f"recall@{result['k']}",
                "insert s",
                "file MiB",
            ],
            [
                [
                    r["method"],
                    r["vectors"],
                    r.get("cold_ms"),
                    r.get("warm_ms"),
                    r.get("per_query_ms"),
                    r.get("rss_delta_mib"),
                    r.get(f"recall_at_{result['k']}"),
                    r.get("insert_s"),
                    r["file_mib"],
                ]
                for r in search
            ],
            [
                "cold: a fresh process reads the float16 blobs from SQLite into a matrix (numpy; the",
                "float32 cache widens it once, as the embedded store's recall cache does) or opens the file",
                "and loads the extension (sqlite-vec), then answers the 20 queries; warm: the 20 again",
                "(median of 5); ms/query: one query at a time, as a recall asks; RSS Δ: the process's",
                "resident memory after minus before; recall@k: share of the exact float32 neighbours found.",
                "Vectors: 256 clustered centres + noise, unit length. file MiB: float16 blobs and, when",
                "sqlite-vec loads, its float32 vec0 table in the same file; for usearch its own index file,",
                "for pgvector the table with its index (the server's, on 127.0.0.1). Both are HNSW (M 16,",
                "ef_construction 128, searched with 64 candidates); insert s builds the index; usearch's",
                "cold maps the file (view=True) rather than loading it; pgvector's RSS is the client's.",
                *[f"sqlite-vec unavailable: {reason}" for reason in unavailable],
            ],
        )
    ]
    e = result["embedder"]
    if "unavailable" in e:
        tables.append(f"Local embedder: unavailable ({e['unavailable']})")
    else:
        tables.append(
            render_table(
                f"Local embedder ({e['model_id']}), {result['cards']} LoCoMo-like cards, 2 threads",
                [
                    "cold ms (import + load + embed)",
                    "warm ms",
                    "one card ms",
                    "RSS before MiB",
                    "RSS loaded MiB",
                ],
                [[e["cold_ms"], e["warm_ms"], e["one_card_ms"], e["rss_before_mib"], e["rss_mib"]]],
            )
        )
    for r in result["recall"]:
        if "unavailable" in r:
            tables.append(f"Embedded recall: unavailable ({r['unavailable']})")
            continue
        tables.append(
            render_table(
                f"Embedded store recall, limit 8, one bank of {r['units']} units (median of 20 queries)",
                ["full text ms", "hybrid cold ms", "hybrid warm ms", "cache RSS MiB"],
                [[r["lexical_ms"], r["hybrid_cold_ms"], r["hybrid_warm_ms"], r["cache_rss_mib"]]],
                [
                    "hybrid: every unit has a vector; the query vector is precomputed (the model's own",
                    "time is the embedder table's one card); cold: the first recall, loading the bank's",
                    "matrix.",
                ],
            )
        )
    load = result.get("load_average")
    tables.append(
        machine_line() + (f"; load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}" if load else "")
    )
    return "\n\n".join(tables)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.vectors",
        description="Vector search (numpy float16 vs sqlite-vec), the local embedder, and hybrid recall.",
    )
    parser.add_argument("--quick", action="store_true", help="10k vectors and a 10k-unit store (CI size)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON instead of tables")
    parser.add_argument("--sizes", help="comma-separated vector counts (default 10000,100000)")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    quiet_logs()
    return report("bench.vectors", lambda: run_benchmark(args), render, as_json=args.json)


if __name__ == "__main__":
    raise SystemExit(main())
