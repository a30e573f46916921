"""The command: ``python -m bench.scale [--quick] [--json] [--sizes 10000,100000] [--embedder none|local
[--vectors seeded|model]] [--ledger synthetic|realistic [--data DIR]]``.

``--quick`` is the CI size: 1k and 10k cards.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from bench._common import BenchError, machine_info, machine_line, quiet_logs, render_table, report
from bench.notify_socket import NotificationTimeout
from bench.postgres import DSN_ENV, loopback
from bench.scale.files import EMBEDDERS
from bench.scale.ledgers import DATA_DIR_ENV, LEDGERS, NEW_UNITS, VECTORS, ledger_spec
from bench.scale.measures import targets
from bench.scale.run import WATCHDOG_USEC, measure

FULL_SIZES = (10_000, 100_000, 1_000_000)
QUICK_SIZES = (1_000, 10_000)


def render(result: Mapping[str, Any]) -> str:
    rows = result["rows"]
    return render_table(
        f"Scale: one roll-up run ({NEW_UNITS} new units) as the ledger and the global bank grow "
        f"(dreamer run, embedded store, [embeddings] provider = {result.get('embedder', 'none')!r}, "
        f"{result.get('ledger', 'synthetic')} ledger, "
        + ("" if result.get("embedder", "none") == "none" else f"{result.get('vectors', 'seeded')} vectors, ")
        + f"{result.get('state', 'sqlite')} state)",
        [
            "cards",
            "run s",
            "run CPU s",
            "checkpoint s",
            "peak RSS MiB",
            "state MiB",
            "store MiB",
            "watchdog gap s",
            "floor s",
            "run / floor",
            "gate passers",
            "recall ms",
            "one-tier recall ms",
            "setup s",
        ],
        [
            [
                r["cards"],
                r["run_s"],
                r["run_cpu_s"],
                r.get("checkpoint_s"),
                r["peak_rss_mib"],
                r["state_mib"],
                r["store_mib"],
                r["watchdog_gap_s"],
                r["floor_s"],
                r["run_over_floor"],
                r.get("gate_passers"),
                r["recall_ms"],
                r["recall_one_tier_ms"],
                r["setup_s"],
            ]
            for r in rows
        ],
        [
            "cards: roll-up cards in the global bank and rows of the state file's ledger (4 profiles);",
            "run s: the job-finished record's duration_s; run CPU s: the daemon's utime+stime from",
            "READY to that record (the first run's lazy imports included); checkpoint s: the daemon's",
            "checkpoint of the state file once the run has finished (not on PostgreSQL), outside the run;",
            "peak RSS: VmHWM before SIGTERM, after that checkpoint;",
            "state/store MiB: the state file and the embedded store after the run (with their WAL);",
            "with --state postgres, state MiB is the schema's tables and indexes, and the run's state is",
            "the file copied into a new schema by `dreamer state copy` (the floor still reads the file);",
            f"watchdog gap s: longest time between WATCHDOG=1 pings from READY to the run's end "
            f"(WATCHDOG_USEC={WATCHDOG_USEC}: a ping every {WATCHDOG_USEC / 2e6:g} s);",
            f"floor s: on the same files, list the {NEW_UNITS} new units and commit their ledger rows",
            "with the watermark (StateStore.commit_rollup), store and state file opened as a run opens",
            "them; median of 3.",
            f"gate passers: ledger cards passing the dedup gate of the {NEW_UNITS} new cards, summed (what",
            "the verdicts must read and compare; counted before the run);",
            "recall ms: the run's dedup recall on the global bank (its arguments, limit 8), median over the",
            f"{NEW_UNITS} new units' texts; one-tier: the same with every term ranked over all its matches",
            "(the search before the two-tier plan), the baseline.",
            *[
                f"{r['cards']} cards: outcome {r['outcome']}, promoted {r['promoted']}, "
                f"reinforced {r['reinforced']}; {r['watchdog_pings']} pings; "
                f"READY after {r['ready_s']:.2f} s, exit {r['exit_s']:.2f} s after SIGTERM"
                + (f"; state copied in {r['state_copy_s']:.1f} s" if r.get("state_copy_s") else "")
                + (
                    f"; {r['index_segments']} on-disk segments written before the run in "
                    f"{r['index_build_s']:.1f} s"
                    if r.get("index_build_s") is not None
                    else ""
                )
                for r in rows
            ],
            *targets(rows),
            machine_line(),
        ],
    )


def run_benchmark(args: argparse.Namespace) -> dict[str, Any]:
    sizes: Sequence[int] = QUICK_SIZES if args.quick else FULL_SIZES
    if args.sizes:
        try:
            sizes = [int(x) for x in args.sizes.split(",") if x.strip()]
        except ValueError:
            raise BenchError(
                f"--sizes takes comma-separated card counts, e.g. 10000,100000: {args.sizes!r}"
            ) from None
        if not sizes or min(sizes) < 1:
            raise BenchError(f"--sizes needs positive card counts: {args.sizes!r}")
    if args.embedder == "none" and (args.cold_index or args.model_change or args.vectors != "seeded"):
        given = (
            "--cold-index"
            if args.cold_index
            else "--model-change"
            if args.model_change
            else f"--vectors {args.vectors}"
        )
        raise BenchError(f"{given} is about the judge's vectors: it needs --embedder local")
    spec = ledger_spec(args.ledger, args.data, args.vectors)
    spec.open()  # a missing LoCoMo directory is said before anything is built
    started = time.monotonic()
    cache = Path(args.cache) if args.cache else None
    dsn = None
    if args.state == "postgres":
        dsn = loopback(args.dsn or os.environ.get(DSN_ENV, ""))
    rows = [
        measure(size, cache, args.embedder, spec, dsn, args.cold_index, args.model_change)
        for size in sorted(sizes)
    ]
    return {
        "benchmark": "scale",
        "quick": args.quick,
        "embedder": args.embedder,
        "ledger": spec.kind,
        "vectors": spec.vectors,
        "state": args.state,
        "cold_index": args.cold_index,
        "model_change": args.model_change,
        "new_units": NEW_UNITS,
        "rows": rows,
        "targets": targets(rows),
        "total_wall_s": time.monotonic() - started,
        "machine": machine_info(),
    }


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.scale",
        description="One roll-up run of dreamer run as the ledger and the global bank grow.",
    )
    parser.add_argument("--quick", action="store_true", help="1k and 10k cards (CI size)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON instead of a table")
    parser.add_argument("--sizes", help="comma-separated card counts (default 10000,100000,1000000)")
    parser.add_argument(
        "--cache",
        metavar="DIR",
        help="build each size's files once into DIR/SIZE and copy them for every measurement "
        "(the 1M files took about 23 minutes to build here and take 4.6 GiB of disk)",
    )
    parser.add_argument(
        "--embedder",
        choices=EMBEDDERS,
        default="none",
        help='the daemon\'s [embeddings] provider: "none" (the lexical dedup, default) or "local" '
        "(the model; every unit and ledger card of the files has a vector under its id)",
    )
    parser.add_argument(
        "--ledger",
        choices=LEDGERS,
        default="synthetic",
        help='the texts of the cards: "synthetic" (six frames of made-up words, default) or "realistic" '
        "(LoCoMo's memory sentences refilled card by card, with names that grow with the ledger)",
    )
    parser.add_argument(
        "--vectors",
        choices=VECTORS,
        default="seeded",
        help='with --embedder local, the files\' vectors: "seeded" (a random unit vector per text, '
        'default; what 1M cards can be built with) or "model" (the local model\'s own, embedded while '
        "the files are built, about 700 texts a second with onnxruntime installed)",
    )
    parser.add_argument(
        "--state",
        choices=("sqlite", "postgres"),
        default="sqlite",
        help='the daemon\'s state: "sqlite" (the file, default) or "postgres" (the same file copied '
        "by `dreamer state copy` into a new schema, dropped afterwards)",
    )
    parser.add_argument(
        "--cold-index",
        action="store_true",
        help="with --embedder local, measure the first run after turning the embedder on, which "
        "writes the judge's on-disk segments (by default they are written before the run, untimed, "
        "as earlier runs would have)",
    )
    parser.add_argument(
        "--model-change",
        action="store_true",
        help="with --embedder local, measure the first run after a model change: every stored "
        "vector is made another model's before it (no segment of the running model exists yet)",
    )
    parser.add_argument(
        "--dsn",
        help=f"the PostgreSQL of --state postgres, on 127.0.0.1 "
        f"(default: ${DSN_ENV}, as scripts/postgres-dev prints)",
    )
    parser.add_argument(
        "--data",
        metavar="DIR",
        help=f"the LoCoMo folder (<id>.json) --ledger realistic reads (default: ${DATA_DIR_ENV}, "
        "else shared/data/locomo beside the repository)",
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    quiet_logs()
    return report(
        "bench.scale",
        lambda: run_benchmark(args),
        render,
        as_json=args.json,
        errors=(BenchError, NotificationTimeout),
    )


if __name__ == "__main__":
    raise SystemExit(main())
