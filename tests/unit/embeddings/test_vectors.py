"""The vector helpers: float16 blobs that keep their cosines, and top-k neighbours."""

from __future__ import annotations

import numpy as np
import pytest

from dreamer.embeddings.vectors import from_blobs, grown_capacity, normalise, to_blob, top_k


class TestVectors:
    def test_blob_round_trip_keeps_cosines(self) -> None:
        """Stored as float16, vectors keep their cosines to about 1e-3."""
        rng = np.random.default_rng(7)
        v = normalise(rng.standard_normal((50, 384)).astype(np.float32))
        back = from_blobs([to_blob(row) for row in v], 384).astype(np.float32)
        assert np.abs(back @ back.T - v @ v.T).max() < 3e-3

    def test_a_blob_of_the_wrong_length_is_named(self) -> None:
        """A damaged vector is refused with its position, never read as garbage."""
        with pytest.raises(ValueError, match="vector 1 has 10 bytes"):
            from_blobs([b"\0" * 768, b"\0" * 10], 384)

    def test_top_k_equals_a_full_sort(self) -> None:
        """top_k returns the same neighbours, best first, as sorting every cosine (across chunks)."""
        rng = np.random.default_rng(3)
        matrix = normalise(rng.standard_normal((40_000, 32)).astype(np.float32)).astype("<f2")
        queries = normalise(rng.standard_normal((5, 32)).astype(np.float32))
        _idx, scores = top_k(queries, matrix, 7)
        full = matrix.astype(np.float32) @ queries.T
        for q in range(5):
            expected = np.argsort(-full[:, q], kind="stable")[:7]
            assert np.allclose(np.sort(full[expected, q]), np.sort(scores[q]), atol=1e-5)
            assert list(scores[q]) == sorted(scores[q], reverse=True)

    def test_top_k_of_an_empty_matrix_is_empty(self) -> None:
        """No stored vectors: no neighbours, no error."""
        idx, scores = top_k(np.ones((2, 4), dtype=np.float32), np.zeros((0, 4), dtype="<f2"), 5)
        assert idx.shape == (2, 0) and scores.shape == (2, 0)


class TestGrownCapacity:
    def test_room_grows_by_an_eighth_and_at_least_by_1024_rows(self) -> None:
        """Small matrices grow by 1,024 rows, large ones by an eighth; a larger need is met at once."""
        assert grown_capacity(0, 1) == 1024
        assert grown_capacity(8_000, 8_001) == 9_024
        assert grown_capacity(1_000_000, 1_000_001) == 1_125_000
        assert grown_capacity(1_000, 50_000) == 50_000

    def test_appending_one_row_at_a_time_reallocates_rarely(self) -> None:
        """Amortised O(1): a million single-row appends reallocate fewer than 70 times."""
        capacity, reallocations = 0, 0
        for needed in range(1, 1_000_001):
            if needed > capacity:
                capacity, reallocations = grown_capacity(capacity, needed), reallocations + 1
        assert reallocations < 70
