"""bench.segments on a real state file: it builds the judge's segments in a scratch folder,
measures them against the exact search, and refuses a file that is missing or holds no vectors."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

from bench import segments as bench_segments
from bench._common import BenchError
from dreamer.embeddings import segments
from dreamer.embeddings.vectors import to_blob
from dreamer.state import LedgerCard, StateStore, StoredVector
from tests.support.ledger import commit_run

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def card(i: int, vector: bool = True) -> LedgerCard:
    v = np.random.default_rng(i).standard_normal(16).astype(np.float32)
    return LedgerCard(
        document_id=f"d{i}", profile="p", upstream_bank="global", text=f"Card {i}.",
        normalized=f"card {i}", promoted_at=NOW, last_seen_at=NOW, run_id="r",
        vector=StoredVector("m:a", 16, to_blob(v / np.linalg.norm(v))) if vector else None,
    )


def test_it_measures_the_segments_against_the_exact_search(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(segments, "SEGMENT_ROWS", 64)
    with StateStore.open(tmp_path / "state.sqlite3") as state:
        commit_run(state, [card(i) for i in range(300)])
    result = bench_segments.measure(tmp_path / "state.sqlite3", "global", 50)
    (row,) = result["rows"]
    assert (row["vectors"], row["queries"]) == (300, 50)
    assert row["segments"] >= 4 and row["in_memory"] < 64  # refreshed until every full page is built
    assert row["recall_at_10"] == 1.0 and row["top1_differs"] == 0  # a scan finds what exact finds
    assert row["hnsw"] == [] and "recall@10" in bench_segments.render(result)


def test_with_hnsw_it_measures_the_graphs_over_the_same_pages(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--hnsw`` adds one row per graph of `HNSW`, each with a recall between 0 and 1."""
    pytest.importorskip("usearch")
    monkeypatch.setattr(segments, "SEGMENT_ROWS", 64)
    with StateStore.open(tmp_path / "state.sqlite3") as state:
        commit_run(state, [card(i) for i in range(300)])
    result = bench_segments.measure(tmp_path / "state.sqlite3", "global", 30, hnsw=True)
    (row,) = result["rows"]
    assert [h["method"].split(",")[0] for h in row["hnsw"]] == ["M 16", "M 16", "M 32"]
    assert all(0.0 < h["recall_at_10"] <= 1.0 and h["build_s"] >= 0 for h in row["hnsw"])
    assert "HNSW graphs over the same pages" in bench_segments.render(result)


def test_a_missing_file_or_one_without_vectors_is_refused(tmp_path: Path) -> None:
    with pytest.raises(BenchError, match="no such state file"):
        bench_segments.measure(tmp_path / "none.sqlite3", "global", 10)
    with StateStore.open(tmp_path / "state.sqlite3") as state:
        commit_run(state, [card(1, vector=False)])
    with pytest.raises(BenchError, match="holds no vectors"):
        bench_segments.measure(tmp_path / "state.sqlite3", "global", 10)
