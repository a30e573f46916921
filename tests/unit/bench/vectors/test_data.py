"""The vector benchmark's data: deterministic unit vectors, exact neighbours, recall@k."""

from __future__ import annotations

import numpy as np
import pytest

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
