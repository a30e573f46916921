"""The vector benchmark's run: the table it renders, and its arguments."""

from __future__ import annotations

import argparse
from typing import Any

import pytest

from bench._common import BenchError
from bench.vectors.__main__ import render, run_benchmark
from bench.vectors.data import DIMENSION


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
