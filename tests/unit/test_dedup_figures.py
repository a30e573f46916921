"""A gate-passing pair judged from its figures alone (no analysis of the old text's details) gets
the very verdict, reason and scores a full comparison gives."""

from __future__ import annotations

import dataclasses
import random

import pytest

from dreamer.rollup import dedup
from dreamer.rollup.similarity import Comparison, Sketch, TextProfile, compare_figures

SERVICES = ["Grafana", "Nextcloud", "restic", "nginx", "Postgres"]
HOSTS = ["atlas", "nas01", "gpu-box"]
PEOPLE = ["Caroline", "Melanie", "John"]
EXTRA = ["quickly", "nightly", "again", "museum", "musuem", "cache", "backup", "daily"]
OTHER = ["garden", "violin", "lantern", "harbor", "pepper", "marble", "falcon", "meadow", "copper"]


def texts(rng: random.Random, n: int) -> list[str]:
    """Restatements with changed ports, versions, hosts, dates, typos and extra words: pairs land
    on both sides of every lexical rule and of the conflict rule."""
    out = []
    for _ in range(n):
        if rng.random() < 0.6:
            words = [
                rng.choice(SERVICES),
                "runs on host",
                rng.choice(HOSTS),
                f"at port {rng.choice([80, 443, 8080])}",
                f"version {rng.choice(['1.2', '1.3'])}",
                *rng.sample(EXTRA, rng.randint(0, 3)),
            ]
        elif rng.random() < 0.3:
            words = [rng.choice(SERVICES), *rng.sample(OTHER, rng.randint(2, 6))]
        else:
            words = [
                rng.choice(PEOPLE),
                "visited the",
                rng.choice(["museum", "musuem", "gallery"]),
                f"on {rng.choice(['May 7', 'June 2'])}",
                *rng.sample(EXTRA, rng.randint(0, 2)),
            ]
        out.append(" ".join(words) + ".")
    return out


def full_comparisons(new: TextProfile, old: Sketch, old_shingles: frozenset[str]) -> Comparison:
    """Figures that pass every lexical rule: the judge then compares every pair in full."""
    return dataclasses.replace(compare_figures(new, old, old_shingles), jaccard=1.0)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_verdicts_from_figures_equal_verdicts_from_full_comparisons(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The shortcut only skips pairs that could be nothing but the nearest card; with every pair
    compared in full (the shortcut forced off) each verdict is the same, reason and scores included."""
    rng = random.Random(seed)
    ledger = [dedup.CardText(f"l{i}", t) for i, t in enumerate(texts(rng, 120))]
    batches = [[dedup.CardText(f"n{b}-{i}", t) for i, t in enumerate(texts(rng, 6))] for b in range(15)]
    thresholds = dedup.DedupThresholds()
    fast = [dedup.judge_batch(batch, ledger, [], thresholds) for batch in batches]
    monkeypatch.setattr(dedup, "compare_figures", full_comparisons)
    full = [dedup.judge_batch(batch, ledger, [], thresholds) for batch in batches]
    assert fast == full
    kinds = {v.kind for batch in full for v in batch}
    reasons = " ".join(v.reason for batch in full for v in batch)
    assert kinds == {dedup.VerdictKind.NEW, dedup.VerdictKind.DUPLICATE, dedup.VerdictKind.CONFLICT}
    assert "nearest is" in reasons
