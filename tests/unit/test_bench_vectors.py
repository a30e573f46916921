"""The vector benchmark's pure parts: its data, recall@k, the table, and its arguments."""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np
import pytest

from bench._common import BenchError
from bench.vectors.__main__ import render, run_benchmark
from bench.vectors.data import DIMENSION, clustered, exact_top_k, recall_at_k


class TestData:
    def test_vectors_are_deterministic_unit_rows(self) -> None:
        """The same seed gives the same unit vectors; queries can share the stored set's centres."""
        a, centres = clustered(50, seed=1)
        b, _ = clustered(50, seed=1)
        queries, _ = clustered(5, seed=2, centres=centres)
        assert a.shape == (50, DIMENSION) and np.array_equal(a, b)
        assert np.allclose(np.linalg.norm(queries, axis=1), 1.0, atol=1e-5)

    def test_exact_neighbours_and_recall(self) -> None:
        """A query equal to a stored row finds it; recall@k counts the share of exact neighbours found."""
        stored, _ = clustered(100, seed=3)
        exact = exact_top_k(stored[:2], stored, 3)
        assert 0 in exact[0] and 1 in exact[1]
        first = sorted(exact[0])
        assert recall_at_k([first, sorted(exact[1])], exact) == 1.0
        assert recall_at_k([[*first[:1], -1, -2], sorted(exact[1])], exact) == pytest.approx((1 / 3 + 1) / 2)


class TestReport:
    def _result(self) -> dict[str, Any]:
        return {
            "queries": 20,
            "k": 10,
            "dimension": DIMENSION,
            "cards": 20,
            "search": [
                {
                    "method": "numpy top_k, float16 matrix",
                    "vectors": 10_000,
                    "cold_ms": 80.0,
                    "warm_ms": 10.0,
                    "per_query_ms": 9.0,
                    "rss_delta_mib": 40.0,
                    "recall_at_10": 1.0,
                    "insert_s": None,
                    "file_mib": 23.0,
                },
                {
                    "method": "sqlite-vec vec0 float32",
                    "vectors": 10_000,
                    "unavailable": "ModuleNotFoundError: No module named 'sqlite_vec'",
                    "recall_at_10": None,
                    "insert_s": None,
                    "file_mib": 23.0,
                },
            ],
            "embedder": {"unavailable": "EmbeddingsUnavailableError: needs the model package"},
            "recall": [{"unavailable": "OSError: disk full"}],
            "load_average": (1.0, 2.0, 3.0),
        }

    def test_unavailable_parts_say_why_instead_of_failing(self) -> None:
        """A missing sqlite-vec, model or store is a line in the output with its reason, not a crash."""
        text = render(self._result())
        assert "sqlite-vec unavailable: ModuleNotFoundError" in text
        assert "Local embedder: unavailable (EmbeddingsUnavailableError" in text
        assert "Embedded recall: unavailable (OSError: disk full)" in text
        assert "load average 1.0 2.0 3.0" in text


class TestArguments:
    @pytest.mark.parametrize("sizes", ["abc", "5", ",", "10000,-3"])
    def test_bad_sizes_are_refused_with_an_example(self, sizes: str) -> None:
        """Sizes that are not counts of at least k stop the run before anything is built."""
        args = argparse.Namespace(quick=False, json=False, sizes=sizes)
        with pytest.raises(BenchError, match="--sizes"):
            run_benchmark(args)
