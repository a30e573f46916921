"""The judge's on-disk segments against its exact search, on a real state file's ledger vectors:
``python -m bench.segments STATE_FILE [--bank BANK] [--sample 200] [--json]`` (the bank: bench.scale's
global one unless named).

Both sides are the judge's own :class:`~dreamer.rollup.ledgervectors.LedgerVectors`: one with every
row in memory (exact), one with a segment folder in a scratch directory (what the daemon builds
under ``<state_dir>/vectors``), refreshed until every full page is a segment. The queries are
``--sample`` of the ledger's own vectors, chosen at random with a fixed seed; each asks for its 11
nearest and its own card is left out, so recall@10 is over the ten others. Reported: the build
time, the rows left in memory, the share of the exact ten found, the queries whose top hit
differs, and per-query search time on each side.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench._common import BenchError, machine_info, machine_line, quiet_logs, render_table, report
from bench.scale.files import GLOBAL_BANK

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

K = 10


#: The HNSW graphs ``--hnsw`` builds over the same pages, as the first version of the segments did
#: (connectivity M, ef_construction, candidates searched).
HNSW = ((16, 128, 64), (16, 128, 512), (32, 256, 512))


def hnsw_rows(
    matrix: NDArray[np.float32], chosen: NDArray[np.int64], want: list[set[int]], page: int
) -> list[dict[str, Any]]:
    """Each of `HNSW` built over ``page``-row pieces of ``matrix`` (usearch, float16, cosine) and
    searched for the ``chosen`` rows (each piece asked for k + 8, the hits rescored exactly, the
    query's own row left out): build seconds, recall@10 against ``want``, ms per query."""
    import numpy as np

    try:
        from usearch.index import Index
    except ImportError:
        raise BenchError("--hnsw needs usearch (pip install usearch==2.26.6, in the test extra)") from None
    queries, rows = matrix[chosen], []
    for connectivity, expansion_add, expansion_search in HNSW:
        started, pieces = time.perf_counter(), []
        for start in range(0, len(matrix), page):
            piece = Index(ndim=matrix.shape[1], metric="cos", dtype="f16", connectivity=connectivity,
                          expansion_add=expansion_add, expansion_search=expansion_search)
            piece.add(np.arange(start, min(start + page, len(matrix)), dtype=np.uint64),
                      matrix[start : start + page], threads=os.cpu_count() or 1)
            pieces.append(piece)
        build_s, started = time.perf_counter() - started, time.perf_counter()
        hits: list[set[int]] = [set() for _ in chosen]
        for piece in pieces:
            found = piece.search(queries, min(len(piece), K + 1 + 8), threads=1)
            for row, keys in enumerate(found.keys.reshape(len(chosen), -1)):
                hits[row].update(int(key) for key in keys)
        found_ids = []
        for row, mine in enumerate(chosen):
            candidates = np.array(sorted(hits[row] - {int(mine)}), dtype=np.int64)
            order = np.argsort(-(matrix[candidates] @ queries[row]), kind="stable")
            found_ids.append(set(candidates[order[:K]].tolist()))
        rows.append({
            "method": f"M {connectivity}, ef_construction {expansion_add}, {expansion_search} candidates",
            "build_s": round(build_s, 1),
            "recall_at_10": round(sum(len(w & g) for w, g in zip(want, found_ids, strict=True))
                                  / (K * len(chosen)), 4),
            "ms_per_query": round((time.perf_counter() - started) * 1000 / len(chosen), 2),
        })
    return rows


def measure(state_file: Path, bank: str, sample: int, *, hnsw: bool = False) -> dict[str, Any]:
    import numpy as np

    from dreamer.embeddings.segments import SegmentIndex
    from dreamer.rollup.ledgervectors import LedgerVectors
    from dreamer.state import StateStore

    if not state_file.is_file():
        raise BenchError(f"{state_file}: no such state file")
    with StateStore.open(state_file) as state, tempfile.TemporaryDirectory() as scratch:
        models = state.vector_models()
        if not models:
            raise BenchError(f"{state_file}: holds no vectors")
        model, dimension, _ = models[0]
        rows: list[dict[str, Any]] = []
        for upstream in [bank]:
            exact = LedgerVectors(upstream, model, dimension)
            started = time.perf_counter()
            exact.refresh(state)
            exact_load_s = time.perf_counter() - started
            if not exact.in_memory:
                continue
            identity: dict[str, str | int] = {"bank": upstream, "model": model, "dimension": dimension}
            index = SegmentIndex(Path(scratch) / upstream, identity, dimension, writable=True)
            segmented = LedgerVectors(upstream, model, dimension, index)
            started = time.perf_counter()
            segmented.refresh(state)  # every full page read becomes a segment, as a run's refresh does
            build_s = time.perf_counter() - started
            count = min(sample, exact.in_memory)
            chosen = np.random.default_rng(7).choice(exact.in_memory, count, replace=False)
            queries = np.ascontiguousarray(exact.matrix[chosen])
            own = [exact.ids[int(i)] for i in chosen]
            started = time.perf_counter()
            want = exact.nearest(queries, K + 1)
            exact_ms = (time.perf_counter() - started) * 1000 / len(queries)
            started = time.perf_counter()
            got = segmented.nearest(queries, K + 1, state)
            segment_ms = (time.perf_counter() - started) * 1000 / len(queries)
            found = first_differs = 0
            want_rows: list[set[int]] = []
            row_of = {doc: i for i, doc in enumerate(exact.ids)}
            for mine, w, g in zip(own, want, got, strict=True):
                w_ids = [d for d, _ in w if d != mine][:K]
                want_rows.append({row_of[d] for d in w_ids})
                g_ids = [d for d, _ in g if d != mine][:K]
                found += len(set(w_ids) & set(g_ids))
                first_differs += int(w_ids[:1] != g_ids[:1])
            rows.append(
                {
                    "bank": upstream,
                    "vectors": len(exact),
                    "segments": len(index.segments),
                    "in_memory": segmented.in_memory,
                    "build_s": round(build_s, 1),
                    "exact_load_s": round(exact_load_s, 2),
                    "queries": len(queries),
                    "recall_at_10": round(found / (K * len(queries)), 4),
                    "top1_differs": first_differs,
                    "exact_ms_per_query": round(exact_ms, 2),
                    "segments_ms_per_query": round(segment_ms, 2),
                    "hnsw": hnsw_rows(exact.matrix, chosen, want_rows, index.segment_rows) if hnsw else [],
                }
            )
    return {"machine": machine_info(), "state_file": str(state_file), "model": model, "rows": rows}


def render(result: Mapping[str, Any]) -> str:
    return render_table(
        f"The judge's segments against its exact search ({result['model']}, {result['state_file']}; "
        "queries are the ledger's own vectors, their own card left out)",
        ["bank", "vectors", "segments", "in memory", "build s", "queries", "recall@10", "top-1 differs",
         "exact ms/q", "segments ms/q"],
        [
            [r["bank"], r["vectors"], r["segments"], r["in_memory"], r["build_s"], r["queries"],
             r["recall_at_10"], r["top1_differs"], r["exact_ms_per_query"], r["segments_ms_per_query"]]
            for r in result["rows"]
        ],
    ) + "".join(
        "\n" + render_table(
            f"HNSW graphs over the same pages of {r['bank']} (usearch, float16; hits rescored exactly)",
            ["method", "build s", "recall@10", "ms/q"],
            [[h["method"], h["build_s"], h["recall_at_10"], h["ms_per_query"]] for h in r["hnsw"]],
        )
        for r in result["rows"] if r.get("hnsw")
    ) + "\n" + machine_line()


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.segments",
        description="Recall of the judge's on-disk segments against its exact search, on a state file.",
    )
    parser.add_argument(
        "state_file", type=Path, help="a state file whose ledger has vectors (bench.scale's cache)"
    )
    parser.add_argument("--bank", default=GLOBAL_BANK, help=f"the upstream bank (default {GLOBAL_BANK})")
    parser.add_argument("--sample", type=int, default=200, help="queries drawn from the ledger (default 200)")
    parser.add_argument(
        "--hnsw",
        action="store_true",
        help="also build usearch HNSW graphs over the same pages and measure them the same way "
        "(what the segments were before; minutes at 100k vectors)",
    )
    parser.add_argument("--json", action="store_true", help="print the result as JSON instead of a table")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    quiet_logs()
    return report(
        "bench.segments",
        lambda: measure(args.state_file, args.bank, args.sample, hnsw=args.hnsw),
        render,
        as_json=args.json,
        errors=(BenchError,),
    )


if __name__ == "__main__":
    raise SystemExit(main())
