"""The pure parts of the embedded store's hybrid recall: reciprocal-rank fusion and the bank matrix."""

from __future__ import annotations

import numpy as np
import pytest

from dreamer.backends.embedded.hybrid import RRF_K, fuse, fusion_depth
from dreamer.backends.embedded.vector_store import BankMatrix


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


class TestBankMatrix:
    def _bank(self) -> BankMatrix:
        return BankMatrix(
            "b", 1, "m", 4, matrix=np.empty((0, 4), dtype=np.float32), keys=np.empty(0, dtype=np.int64)
        )

    def test_rows_are_appended_in_order_and_found_by_key(self) -> None:
        """Appended rows fill the view in order; each key maps to its row."""
        bank = self._bank()
        bank.append([10, 11], np.eye(4, dtype=np.float32)[:2])
        bank.append([12], np.eye(4, dtype=np.float32)[2:3])
        assert bank.size == 3
        assert [int(k) for k in bank.keys[:3]] == [10, 11, 12]
        assert np.array_equal(bank.view()[bank.row_of_key[12]], np.eye(4, dtype=np.float32)[2])

    def test_a_key_seen_again_is_overwritten_not_duplicated(self) -> None:
        """A re-embedded unit replaces its row; the matrix does not grow."""
        bank = self._bank()
        bank.append([10, 11], np.eye(4, dtype=np.float32)[:2])
        bank.append([10], np.full((1, 4), 0.5, dtype=np.float32))
        assert bank.size == 2
        assert np.allclose(bank.view()[0], 0.5)

    def test_growth_keeps_every_row(self) -> None:
        """Past its capacity the matrix reallocates and keeps the rows it had."""
        bank = self._bank()
        rng = np.random.default_rng(0)
        rows = rng.standard_normal((3000, 4)).astype(np.float32)
        for start in range(0, 3000, 700):
            bank.append(list(range(start, min(3000, start + 700))), rows[start : start + 700])
        assert bank.size == 3000 and bank.matrix.shape[0] >= 3000
        assert np.array_equal(bank.view(), rows)
