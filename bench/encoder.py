"""The local model on each runtime: ``python -m bench.encoder [--data DIR] [--texts N] [--threads 1,2]
[--batch 32] [--json] [--quick]``.

LocoMo's memories (observations, summary sentences and events of the five conversations, in their
order; ``--data DIR``, else ``$DREAMER_LOCOMO_DIR``, else ``shared/data/locomo`` beside the
repository) are embedded by :class:`dreamer.embeddings.local.LocalEmbedder`
with ``runtime = "numpy"`` and ``runtime = "onnx"``, each at each thread count, each in a fresh child
process (``OPENBLAS_NUM_THREADS`` / ``OMP_NUM_THREADS`` set for it), so that its load time and its
memory are its own. Per child: the import and model load with a first embedding (cold), texts per
second over all of ``--texts`` in batches of ``--batch`` (best of 3), one text alone (median of 20),
CPU seconds of the timed pass, RSS with the model loaded, the peak, and RSS after
:meth:`LocalEmbedder.release`. Then the two runtimes' vectors are compared: the largest difference
of a coordinate, the smallest cosine of a text's two vectors, and the largest difference between a
cosine of two texts under one runtime and under the other (over every pair of the first 500 texts).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from bench._common import BenchError, machine_info, machine_line, quiet_logs, render_table, report
from bench.locomo.data import load_conversations
from bench.scale.ledgers import default_data_dir

RUNTIMES = ("numpy", "onnx")
THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def memories(directory: Path, limit: int) -> list[str]:
    """The first ``limit`` memories of the conversations in ``directory``, in order."""
    texts = [
        unit.text
        for conversation in load_conversations(directory)
        for session in conversation.sessions
        for unit in session.units
    ]
    if not texts:
        raise BenchError(f"{directory}: the conversations hold no memories")
    return texts[:limit]


def _rss_mib() -> tuple[float, float]:
    """VmRSS and VmHWM of this process, in MiB."""
    fields = {}
    with open("/proc/self/status", encoding="ascii") as handle:
        for line in handle:
            name, _, rest = line.partition(":")
            if name in ("VmRSS", "VmHWM"):
                fields[name] = int(rest.split()[0]) / 1024
    return fields.get("VmRSS", 0.0), fields.get("VmHWM", 0.0)


def child(runtime: str, texts_file: Path, vectors_file: Path, batch: int) -> dict[str, Any]:
    """One runtime in this process: the measurements, and the vectors written to ``vectors_file``."""
    started = time.perf_counter()
    import numpy as np

    from dreamer.embeddings.local import LocalEmbedder

    texts: list[str] = json.loads(texts_file.read_text(encoding="utf-8"))
    embedder = LocalEmbedder(batch_size=batch, runtime=runtime)
    embedder.embed_sync(texts[:1])
    cold_s = time.perf_counter() - started
    loaded_rss, _ = _rss_mib()
    best, cpu = float("inf"), 0.0
    vectors = np.zeros((0, 0), dtype=np.float32)
    for _ in range(3):
        t0, c0 = time.perf_counter(), time.process_time()
        vectors = embedder.embed_sync(texts)
        elapsed, used = time.perf_counter() - t0, time.process_time() - c0
        if elapsed < best:
            best, cpu = elapsed, used
    singles = []
    for text in texts[:20]:
        t0 = time.perf_counter()
        embedder.embed_sync([text])
        singles.append(time.perf_counter() - t0)
    singles.sort()
    run_rss, peak = _rss_mib()
    embedder.release()
    released_rss, _ = _rss_mib()
    np.save(vectors_file, vectors, allow_pickle=False)
    return {
        "runtime": embedder.runtime,
        "cold_s": round(cold_s, 3),
        "texts_per_s": round(len(texts) / best, 1),
        "cpu_s": round(cpu, 3),
        "one_text_ms": round(singles[len(singles) // 2] * 1000, 2),
        "rss_loaded_mib": round(loaded_rss, 1),
        "rss_after_mib": round(run_rss, 1),
        "peak_rss_mib": round(peak, 1),
        "rss_released_mib": round(released_rss, 1),
    }


def _spawn(runtime: str, threads: int, texts_file: Path, vectors_file: Path, batch: int) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if k not in THREAD_VARIABLES}
    env.update({name: str(threads) for name in THREAD_VARIABLES})
    command = [sys.executable, "-m", "bench.encoder", "--child", runtime, str(texts_file), str(vectors_file)]
    done = subprocess.run(
        [*command, "--batch", str(batch)], env=env, capture_output=True, text=True, check=False, timeout=1800
    )
    if done.returncode != 0:
        raise BenchError(f"the {runtime} child failed (exit {done.returncode}): {done.stderr.strip()[-600:]}")
    row: dict[str, Any] = json.loads(done.stdout)
    return {"threads": threads, **row}


def agreement(a: Any, b: Any, pairs_of: int = 500) -> dict[str, float]:
    """How far two runtimes' vectors of the same texts are apart."""
    import numpy as np

    head_a, head_b = a[:pairs_of], b[:pairs_of]
    return {
        "max_abs_diff": float(np.abs(a - b).max()),
        "min_self_cosine": float((a * b).sum(axis=1).min()),
        "max_cosine_diff": float(np.abs(head_a @ head_a.T - head_b @ head_b.T).max()),
    }


def measure(data: Path, n_texts: int, threads: Sequence[int], batch: int) -> dict[str, Any]:
    import numpy as np

    texts = memories(data, n_texts)
    rows, vectors = [], {}
    with tempfile.TemporaryDirectory(prefix="bench-encoder-") as scratch:
        texts_file = Path(scratch) / "texts.json"
        texts_file.write_text(json.dumps(texts), encoding="utf-8")
        for count in threads:
            for runtime in RUNTIMES:
                out = Path(scratch) / f"{runtime}-{count}.npy"
                rows.append(_spawn(runtime, count, texts_file, out, batch))
                vectors[(runtime, count)] = np.load(out)
    first = threads[0]
    return {
        "texts": len(texts),
        "batch": batch,
        "rows": rows,
        "agreement": agreement(vectors[("onnx", first)], vectors[("numpy", first)]),
        "machine": machine_info(),
    }


def render(result: Mapping[str, Any]) -> str:
    columns = [
        ("runtime", "runtime"),
        ("threads", "threads"),
        ("cold s", "cold_s"),
        ("texts/s", "texts_per_s"),
        ("CPU s", "cpu_s"),
        ("one text ms", "one_text_ms"),
        ("RSS loaded MiB", "rss_loaded_mib"),
        ("RSS after MiB", "rss_after_mib"),
        ("peak MiB", "peak_rss_mib"),
        ("RSS released MiB", "rss_released_mib"),
    ]
    agree = result["agreement"]
    speed = {(r["runtime"], r["threads"]): r["texts_per_s"] for r in result["rows"]}
    ratios = ", ".join(
        f"{t} thread{'s' if t > 1 else ''} {speed[('onnx', t)] / speed[('numpy', t)]:.2f}x"
        for t in sorted({r["threads"] for r in result["rows"]})
    )
    notes = [
        f"onnx / numpy texts per second: {ratios}",
        f"vectors: largest coordinate difference {agree['max_abs_diff']:.2e}, smallest cosine of a"
        f" text's two vectors {agree['min_self_cosine']:.7f}, largest difference of a cosine between"
        f" two texts {agree['max_cosine_diff']:.2e}",
        machine_line(),
    ]
    return render_table(
        f"The local model on each runtime: {result['texts']} LoCoMo memories, batches of {result['batch']}",
        [c for c, _ in columns],
        [[row[k] for _, k in columns] for row in result["rows"]],
        notes,
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.encoder", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--data",
        type=Path,
        default=None,
        help="the LoCoMo folder (default: $DREAMER_LOCOMO_DIR, else shared/data/locomo)",
    )
    parser.add_argument("--texts", type=int, default=2000, help="memories embedded (default 2000)")
    parser.add_argument("--threads", default="1,2", help="thread counts, comma-separated (default 1,2)")
    parser.add_argument("--batch", type=int, default=32, help="texts per forward pass (default 32)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.add_argument("--quick", action="store_true", help="200 texts, one thread (CI)")
    parser.add_argument("--child", nargs=3, metavar=("RUNTIME", "TEXTS", "VECTORS"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    quiet_logs()
    if args.child:
        runtime, texts_file, vectors_file = args.child
        print(json.dumps(child(runtime, Path(texts_file), Path(vectors_file), args.batch)))
        return 0
    try:
        threads = [int(t) for t in args.threads.split(",") if t.strip()]
    except ValueError:
        parser.error(f"--threads {args.threads!r}: whole numbers, comma-separated")
    if not threads or any(t < 1 or t > 64 for t in threads):
        parser.error("--threads: from 1 to 64")
    if args.texts < 2 or not 1 <= args.batch <= 2048:
        parser.error("--texts at least 2, --batch from 1 to 2048")
    n_texts, threads = (200, [1]) if args.quick else (args.texts, threads)
    data = args.data or default_data_dir()
    return report(
        "bench.encoder", lambda: measure(data, n_texts, threads, args.batch), render, as_json=args.json
    )


if __name__ == "__main__":
    raise SystemExit(main())
