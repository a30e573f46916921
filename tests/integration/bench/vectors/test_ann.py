"""bench.vectors' approximate indexes on real libraries: usearch's HNSW saved to a file and searched
memory-mapped in a fresh call, and pgvector's on the test PostgreSQL (scripts/postgres-dev). Each
finds the exact neighbours of clustered vectors, and the pgvector search uses its index."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from bench._common import BenchError
from bench.postgres import DSN_ENV
from bench.vectors import ann
from bench.vectors.data import K, clustered, exact_top_k, recall_at_k


def files(folder: Path, size: int = 2000) -> tuple[np.ndarray, list[set[int]]]:
    stored, centres = clustered(size, seed=1)
    queries, _ = clustered(20, seed=2, centres=centres)
    np.save(folder / "queries.npy", queries)
    return stored, exact_top_k(queries, stored, K)


def test_usearch_finds_the_exact_neighbours_from_its_mapped_file(tmp_path: Path) -> None:
    pytest.importorskip("usearch")
    stored, exact = files(tmp_path)
    built = ann.build_usearch(tmp_path, stored)
    assert built["file_mib"] > 0 and (tmp_path / ann.USEARCH_FILE).exists()
    measured = ann.usearch_search(tmp_path)
    assert recall_at_k(measured["found"], exact) >= 0.95
    assert all(len(row) == K for row in measured["found"])


def test_pgvector_finds_them_through_its_hnsw_index(
    tmp_path: Path, postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(DSN_ENV, postgres_url)
    stored, exact = files(tmp_path)
    try:
        ann.build_pgvector(tmp_path, stored)
        measured = ann.pgvector_search(tmp_path)
    finally:
        ann.drop_pgvector(tmp_path)
    assert measured["uses_index"], "the search read the table, not the HNSW index"
    assert recall_at_k(measured["found"], exact) >= 0.95


def test_a_server_elsewhere_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(DSN_ENV, "postgresql://u@db.example/x")
    with pytest.raises(BenchError, match=r"127\.0\.0\.1"):
        ann.build_pgvector(tmp_path, np.zeros((3, 384), dtype=np.float32))
