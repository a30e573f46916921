"""The pure part of the embedded store's hybrid recall: reciprocal-rank fusion of the two rankings."""

from __future__ import annotations

import pytest

from dreamer.backends.embedded.hybrid import RRF_K, fuse, fusion_depth


class TestFuse:
    def test_first_in_both_rankings_scores_one(self) -> None:
        """The scale puts a hit ranked first by full text and by vectors at exactly 1.0."""
        assert fuse([["a", "b"], ["a", "c"]])["a"] == pytest.approx(1.0)

    def test_agreement_beats_a_single_first_place(self) -> None:
        """Second in both rankings outranks first in one ranking only."""
        scores = fuse([["x", "both"], ["y", "both"]])
        assert scores["both"] > scores["x"] == scores["y"]

    def test_scores_follow_the_reciprocal_rank_formula(self) -> None:
        """Each ranking adds 1/(RRF_K + rank); the sum is divided by the best possible sum."""
        scores = fuse([["a", "b", "c"], ["c"]])
        best = 2 / (RRF_K + 1)
        assert scores["b"] == pytest.approx((1 / (RRF_K + 2)) / best)
        assert scores["c"] == pytest.approx((1 / (RRF_K + 3) + 1 / (RRF_K + 1)) / best)

    def test_empty_rankings_give_nothing(self) -> None:
        """No hits on either side, no scores (and no division by zero)."""
        assert fuse([[], []]) == {}

    def test_depth_follows_the_limit_with_a_floor(self) -> None:
        """Each side contributes as many hits as asked for, and never fewer than 10."""
        assert fusion_depth(1) == 10
        assert fusion_depth(100) == 100
