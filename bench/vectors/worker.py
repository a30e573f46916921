"""One measurement in a fresh process: ``python -m bench.vectors.worker TASK DIR``; prints JSON.

Tasks: ``numpy`` and ``sqlite-vec`` (search ``DIR/vectors.sqlite3`` for ``DIR/queries.npy``),
``embedder`` (the local model on the 20 cards), ``recall`` (the embedded store in ``DIR/store``).
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bench.vectors.data import CARDS, DIMENSION, K

#: Warm figures are the median of this many repeats.
REPEATS = 5
RECALL_QUERIES = 20


def rss_mib() -> float:
    """This process's resident set (VmRSS), in MiB."""
    for line in Path("/proc/self/status").read_text(encoding="utf-8").splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def ms_since(started: float) -> float:
    return (time.perf_counter() - started) * 1000


def median_ms(work: Callable[[], object], repeats: int = REPEATS) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        work()
        times.append(ms_since(started))
    return statistics.median(times)


def numpy_search(folder: Path, widen: bool = False) -> dict[str, Any]:
    """Cold: read the float16 blobs from SQLite into a matrix and search; warm: search the matrix.

    With ``widen`` the matrix is widened to float32 once, as the embedded store's cache holds it.
    """
    import sqlite3

    import numpy as np

    from dreamer.embeddings.vectors import top_k

    queries = np.load(folder / "queries.npy")
    before = rss_mib()
    started = time.perf_counter()
    with sqlite3.connect(folder / "vectors.sqlite3") as conn:
        blobs = [row[0] for row in conn.execute("SELECT vector FROM vectors ORDER BY id")]
    matrix: Any = np.frombuffer(b"".join(blobs), dtype="<f2").reshape(len(blobs), DIMENSION).copy()
    del blobs
    if widen:
        matrix = matrix.astype(np.float32)
    load_ms = ms_since(started)
    indices, _ = top_k(queries, matrix, K)
    cold_ms = ms_since(started)
    warm_ms = median_ms(lambda: top_k(queries, matrix, K))
    one_ms = median_ms(lambda: [top_k(q[None, :], matrix, K) for q in queries]) / len(queries)
    return {
        "load_ms": load_ms,
        "cold_ms": cold_ms,
        "warm_ms": warm_ms,
        "per_query_ms": one_ms,
        "rss_delta_mib": rss_mib() - before,
        "found": [[int(i) for i in row] for row in indices],
    }


def open_sqlite_vec(path: Path) -> Any:
    """A connection with sqlite-vec loaded: the stdlib's if it can load extensions, else apsw's."""
    import sqlite3

    import sqlite_vec  # type: ignore[import-not-found,import-untyped,unused-ignore]

    conn: Any = sqlite3.connect(path)
    if hasattr(conn, "enable_load_extension"):
        conn.enable_load_extension(True)
        sqlite_vec.load(conn)
        return conn
    conn.close()
    import apsw  # type: ignore[import-not-found,unused-ignore]

    conn = apsw.Connection(str(path))
    conn.enable_load_extension(True)
    conn.load_extension(sqlite_vec.loadable_path())
    return conn


def sqlite_vec_search(folder: Path) -> dict[str, Any]:
    """Cold: open the file, load the extension, run the 20 KNN queries; warm: run them again."""
    import numpy as np

    queries = np.load(folder / "queries.npy")
    before = rss_mib()
    started = time.perf_counter()
    conn = open_sqlite_vec(folder / "vectors.sqlite3")

    def search() -> list[list[int]]:
        return [
            [
                int(rowid) - 1
                for rowid, _ in conn.execute(
                    "SELECT rowid, distance FROM vec WHERE embedding MATCH ? AND k = ? ORDER BY distance",
                    (q.astype(np.float32).tobytes(), K),
                )
            ]
            for q in queries
        ]

    found = search()
    cold_ms = ms_since(started)
    warm_ms = median_ms(search)
    return {
        "load_ms": None,
        "cold_ms": cold_ms,
        "warm_ms": warm_ms,
        "per_query_ms": warm_ms / len(queries),
        "rss_delta_mib": rss_mib() - before,
        "found": found,
    }


def embedder(folder: Path) -> dict[str, Any]:
    """The local model: import and load, then 20 cards cold and warm, and the process's memory."""
    del folder
    before = rss_mib()
    started = time.perf_counter()
    from dreamer.embeddings.local import LocalEmbedder

    model = LocalEmbedder()
    model.embed_sync(CARDS)
    cold_ms = ms_since(started)
    warm_ms = median_ms(lambda: model.embed_sync(CARDS))
    one_ms = median_ms(lambda: model.embed_sync(CARDS[:1]))
    return {
        "model_id": model.model_id,
        "cold_ms": cold_ms,
        "warm_ms": warm_ms,
        "one_card_ms": one_ms,
        "rss_before_mib": before,
        "rss_mib": rss_mib(),
    }


class FixedQueryEmbedder:
    """Answers each query with the next of a set of stored-distribution vectors (no model cost)."""

    dimension = DIMENSION

    def __init__(self, model_id: str, vectors: Any) -> None:
        self.model_id = model_id
        self._vectors = vectors
        self._next = 0

    async def embed(self, texts: Sequence[str]) -> Any:
        rows = [self._vectors[(self._next + i) % len(self._vectors)] for i in range(len(texts))]
        self._next += len(texts)
        import numpy as np

        return np.stack(rows).astype(np.float32)

    async def aclose(self) -> None:
        return None


def recall(folder: Path) -> dict[str, Any]:
    """The embedded store's recall (limit 8), full text only and hybrid (cold cache, then warm)."""
    import anyio
    import numpy as np

    from bench.gating.banks import varied_text
    from dreamer.backends.embedded.backend import EmbeddedBackend

    meta = json.loads((folder / "store.json").read_text(encoding="utf-8"))
    queries = [varied_text(meta["units"] * 7 + i) for i in range(RECALL_QUERIES)]
    store_path = folder / "store" / "memory.sqlite3"

    async def run() -> dict[str, Any]:
        plain = await EmbeddedBackend.open(store_path)
        try:
            await plain.recall(meta["bank"], queries[0], limit=8)
            lexical = []
            for query in queries:
                started = time.perf_counter()
                await plain.recall(meta["bank"], query, limit=8)
                lexical.append(ms_since(started))
        finally:
            await plain.aclose()
        fake = FixedQueryEmbedder(meta["model_id"], np.load(folder / "queries.npy"))
        before = rss_mib()
        hybrid = await EmbeddedBackend.open(store_path, embedder=fake)
        try:
            started = time.perf_counter()
            await hybrid.recall(meta["bank"], queries[0], limit=8)
            cold_ms = ms_since(started)
            warm = []
            for query in queries:
                started = time.perf_counter()
                hits = await hybrid.recall(meta["bank"], query, limit=8)
                warm.append(ms_since(started))
            semantic = sum(hit.semantic is not None for hit in hits)
        finally:
            await hybrid.aclose()
        return {
            "lexical_ms": statistics.median(lexical),
            "hybrid_cold_ms": cold_ms,
            "hybrid_warm_ms": statistics.median(warm),
            "cache_rss_mib": rss_mib() - before,
            "last_hits_with_cosine": semantic,
        }

    return anyio.run(run)


TASKS: dict[str, Callable[[Path], dict[str, Any]]] = {
    "numpy": numpy_search,
    "numpy32": lambda folder: numpy_search(folder, widen=True),
    "sqlite-vec": sqlite_vec_search,
    "usearch": lambda folder: _ann().usearch_search(folder),
    "pgvector": lambda folder: _ann().pgvector_search(folder),
    "embedder": embedder,
    "recall": recall,
}


def _ann() -> Any:
    from bench.vectors import ann

    return ann


def main(argv: Sequence[str]) -> int:
    task, folder = argv[0], Path(argv[1])
    try:
        result = TASKS[task](folder)
    except ImportError as exc:
        result = {"unavailable": f"{type(exc).__name__}: {exc}"}
    except Exception as exc:  # reported in the table, not as a traceback
        result = {"unavailable": f"{type(exc).__name__}: {exc}"}
    json.dump(result, sys.stdout)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
