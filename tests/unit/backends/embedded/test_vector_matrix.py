"""A bank's vector matrix in the embedded store: rows appended in order, grown without losing any,
let go once they are in a segment, kept as int8 codes within half a step of each row, and scored as its rows'
cosines within that rounding."""

from __future__ import annotations

import numpy as np

from dreamer.backends.embedded.vector_matrix import BankMatrix, MatrixView, quantise


class TestBankMatrix:
    def _bank(self) -> BankMatrix:
        return BankMatrix(
            "b", 1, "m", 4,
            codes=np.empty((0, 4), dtype=np.int8),
            scales=np.empty(0, dtype=np.float32),
            keys=np.empty(0, dtype=np.int64),
        )  # fmt: skip

    def test_rows_are_appended_in_order(self) -> None:
        """Appended rows fill the view in order, each with its stored number."""
        bank = self._bank()
        bank.append([10, 11], np.eye(4, dtype=np.float32)[:2])
        bank.append([12], np.eye(4, dtype=np.float32)[2:3])
        assert bank.size == 3
        assert [int(k) for k in bank.keys[:3]] == [10, 11, 12]
        assert np.array_equal(bank.view(), np.eye(4, dtype=np.float32)[:3])

    def test_cleared_rows_are_let_go_and_appending_starts_again(self) -> None:
        """Once its rows are in a segment the bank holds none, and the next rows start at row 0."""
        bank = self._bank()
        bank.append([10, 11], np.eye(4, dtype=np.float32)[:2])
        bank.spill_at = 5
        bank.clear()
        assert (bank.size, bank.capacity, bank.nbytes, bank.spill_at) == (0, 0, 0, 0)
        bank.append([12], np.eye(4, dtype=np.float32)[2:3])
        assert [int(k) for k in bank.keys[: bank.size]] == [12]

    def test_growth_keeps_every_row(self) -> None:
        """Past its capacity the matrix reallocates and keeps the rows it had."""
        bank = self._bank()
        rng = np.random.default_rng(0)
        rows = rng.standard_normal((3000, 4)).astype(np.float32)
        for start in range(0, 3000, 700):
            bank.append(list(range(start, min(3000, start + 700))), rows[start : start + 700])
        assert bank.size == 3000 and bank.capacity >= 3000
        steps = np.abs(rows).max(axis=1, keepdims=True) / 127
        assert (np.abs(bank.view() - rows) <= steps / 2 + 1e-6).all()  # each row within half a step

    def test_a_full_bank_grows_by_an_eighth_not_by_a_copy_of_itself(self) -> None:
        """A bank loaded to exactly its size (as a load reserves it) that gets one more row
        allocates an eighth more rows, not twice as many: at 1M vectors doubling held a second
        1.5 GB matrix from the first append on."""
        bank = self._bank()
        bank.reserve(80_000)
        bank.append(list(range(80_000)), np.zeros((80_000, 4), dtype=np.float32))
        assert bank.capacity == 80_000
        bank.append([80_000], np.ones((1, 4), dtype=np.float32))
        assert bank.capacity == 90_000
        assert bank.size == 80_001 and np.allclose(bank.view()[80_000], 1.0)


class TestCodes:
    def test_the_codes_take_a_quarter_of_float32s_memory(self) -> None:
        """One byte a dimension and four a row for its scale: a 100k x 384 bank holds 37 MiB of
        codes where a float32 matrix held 147 MiB."""
        codes, scales = quantise(np.ones((10, 384), dtype=np.float32))
        assert codes.dtype == np.int8 and codes.nbytes == 10 * 384 and scales.nbytes == 40

    def test_zero_and_extreme_rows_quantise_without_nan(self) -> None:
        """A zero row gets scale 1 and zero codes; a row of huge or tiny values keeps its shape."""
        rows = np.array([[0, 0, 0], [1e30, -1e30, 5e29], [1e-30, 0, -1e-30]], dtype=np.float32)
        codes, scales = quantise(rows)
        assert np.isfinite(scales).all() and (scales > 0).all()
        assert codes[0].tolist() == [0, 0, 0] and codes[1].tolist() == [127, -127, 64]
        assert codes[2].tolist() == [127, 0, -127]

    def test_scores_are_the_cosines_within_the_rounding(self) -> None:
        """A view's scores, computed a chunk at a time (more rows than one chunk here), are within
        0.02 of the exact cosines of unit rows, and rank the nearest row first."""
        rng = np.random.default_rng(1)
        rows = rng.standard_normal((9000, 384)).astype(np.float32)
        rows /= np.linalg.norm(rows, axis=1, keepdims=True)
        codes, scales = quantise(rows)
        view = MatrixView(codes, scales, np.arange(9000, dtype=np.int64), 9000)
        query = rows[1234]
        scores = view.scores(query)
        assert scores.shape == (9000,) and np.abs(scores - rows @ query).max() < 0.02
        assert int(np.argmax(scores)) == 1234
