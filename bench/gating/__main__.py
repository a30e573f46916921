"""The command of the gating and scale benchmarks: options, the runs, the two tables or JSON.

    python -m bench.gating [--quick] [--json] [--backend hindsight --url URL --api-key-env VAR]

``--quick`` is the CI size: 10 and 100 profiles; 1k and 10k units.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Mapping, Sequence
from typing import Any

from bench._common import add_backend_arguments, machine_info, machine_line, quiet_logs, render_table, report
from bench.gating.gate import BASELINE_SAMPLE, gating_once, gating_targets
from bench.gating.scale import SCALE_NEW_UNITS, SCALE_OVERLAP_S, scale_once


def render(result: Mapping[str, Any]) -> str:
    gating = result["gating"]
    gate_table = render_table(
        "Gating: one cycle over N profiles, 5% with new units",
        [
            "backend",
            "profiles",
            "active",
            "gate req",
            "gate s",
            "per-profile req",
            "per-profile s",
            "runs",
            "reflect",
            "summarise",
            "cycle req",
            "cycle s",
        ],
        [
            [
                r["backend"],
                r["profiles"],
                r["active"],
                r["gate_requests"],
                r["gate_s"],
                r["baseline_requests"],
                r["baseline_s"],
                r["runs"],
                r["reflect_calls"],
                r["summarise_calls"],
                r["cycle_requests"],
                r["cycle_s"],
            ]
            for r in gating
        ],
        [
            "gate req/s: the daemon's gating (shared ActivityCache snapshot + Rollup.decide), all N;",
            "per-profile req/s: the baseline asking each profile's activity on its own (same banks);",
            "cycle req: every backend request of the cycle, the active profiles' runs included.",
            *[
                f"{r['backend']} {r['profiles']}: the server's bank list held {r['server_banks']} banks, "
                f"{r['page_size']} per page"
                for r in gating
                if r["server_banks"] is not None
            ],
            *[
                f"{r['backend']} {r['profiles']}: per-profile baseline measured on "
                f"{BASELINE_SAMPLE} profiles, scaled to N"
                for r in gating
                if r["baseline_sampled"]
            ],
            *gating_targets(gating),
        ],
    )
    scale = result["scale"]
    scale_table = render_table(
        f"Scale: one run with {SCALE_NEW_UNITS} new units as the bank grows (embedded store)",
        [
            "units in bank",
            "new",
            "units seen",
            "run s",
            "of which recall s",
            "run peak MiB",
            "no-watermark s",
            "no-watermark MiB",
            "seen",
        ],
        [
            [
                r["units_before"],
                r["new_units"],
                r["units_seen"],
                r["run_s"],
                r["run_recall_s"],
                r["run_peak_mib"],
                r["full_scan_s"],
                r["full_scan_peak_mib"],
                r["full_scan_units"],
            ]
            for r in scale
        ],
        [
            "run: the real run after a watermark (time), and its dry run under tracemalloc (peak memory);",
            f"watermark_overlap_s = {SCALE_OVERLAP_S:g} (default 300): the bank was loaded just before;",
            "of which recall s: the run's upstream recalls (the dedup candidates), one per drafted card;",
            "no-watermark: the baseline, a dry run that reads the whole bank (since = the beginning).",
            machine_line(),
        ],
    )
    return gate_table + "\n\n" + scale_table


async def run_benchmark(args: argparse.Namespace) -> dict[str, Any]:
    counts = [10, 100] if args.quick else [10, 100, 1000]
    if args.profiles:
        counts = [int(x) for x in args.profiles.split(",")]
    sizes = [1000, 10_000] if args.quick else [1000, 10_000, 100_000]
    if args.sizes:
        sizes = [int(x) for x in args.sizes.split(",")]
    started = time.monotonic()
    gating = []
    backends = [] if args.skip_gating else ["embedded"] + (["hindsight"] if args.url else [])
    for backend in backends:
        run_args = argparse.Namespace(**{**vars(args), "backend": backend})
        for n in counts:
            gating.append((await gating_once(run_args, n)).to_json())
    scale = [(await scale_once(size)).to_json() for size in sizes] if not args.skip_scale else []
    return {
        "benchmark": "gating",
        "quick": args.quick,
        "gating": gating,
        "scale": scale,
        "targets": gating_targets(gating),
        "total_wall_s": time.monotonic() - started,
        "machine": machine_info(),
    }


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.gating",
        description="Gating cost over many profiles, and one run's cost as a bank grows.",
    )
    parser.add_argument(
        "--quick", action="store_true", help="10 and 100 profiles; 1k and 10k units (CI size)"
    )
    parser.add_argument("--json", action="store_true", help="print the result as JSON instead of tables")
    parser.add_argument("--profiles", help="comma-separated profile counts (default 10,100,1000)")
    parser.add_argument(
        "--sizes", help="comma-separated bank sizes for the scale part (default 1000,10000,100000)"
    )
    parser.add_argument("--skip-scale", action="store_true", help="only the gating part")
    parser.add_argument("--skip-gating", action="store_true", help="only the scale part")
    add_backend_arguments(parser)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    quiet_logs()
    return report("bench.gating", lambda: asyncio.run(run_benchmark(args)), render, as_json=args.json)


if __name__ == "__main__":
    raise SystemExit(main())
