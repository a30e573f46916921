"""A bank's vector matrix in the embedded store: rows appended in order, replaced by key, grown
without losing any."""

from __future__ import annotations

import numpy as np

from dreamer.backends.embedded.vector_store import BankMatrix


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

    def test_a_full_bank_grows_by_an_eighth_not_by_a_copy_of_itself(self) -> None:
        """A bank loaded to exactly its size (as a load reserves it) that gets one more row
        allocates an eighth more rows, not twice as many: at 1M vectors doubling held a second
        1.5 GB matrix from the first append on."""
        bank = self._bank()
        bank.reserve(80_000)
        bank.append(list(range(80_000)), np.zeros((80_000, 4), dtype=np.float32))
        assert bank.matrix.shape[0] == 80_000
        bank.append([80_000], np.ones((1, 4), dtype=np.float32))
        assert bank.matrix.shape[0] == 90_000
        assert bank.size == 80_001 and np.allclose(bank.view()[80_000], 1.0)
