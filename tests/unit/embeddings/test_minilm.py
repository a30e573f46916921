"""The numpy encoder's pieces that can be checked without the model files.

The forward pass as a whole is checked against the published reference cosines in test_local.py.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from dreamer.embeddings.minilm import GELU_ROWS, gelu_in_place


def _gelu_reference(x: np.ndarray) -> np.ndarray:
    """The GELU as one plain expression, a new array per operation (the encoder's before)."""
    z = x / math.sqrt(2.0)
    sign = np.sign(z)
    a = np.abs(z)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    erf = sign * (1.0 - poly * np.exp(-a * a))
    out: np.ndarray = 0.5 * x * (1.0 + erf)
    return out


SPECIAL = [float("nan"), float("inf"), -float("inf"), 0.0, -0.0, 1e-30, -1e-30, 1e-7, -1e-7]
SPECIAL += [0.5, -0.5, 3.0, -3.0, 9.0, -9.0, 40.0, -40.0, 1e4, -1e4]


class TestGeluInPlace:
    @pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")  # NaN and inf, both ways
    @pytest.mark.parametrize("shape", [(1, 1, 7), (3, 50, 37), (2, GELU_ROWS, 16), (5, 29, 1536)])
    @pytest.mark.parametrize("seed", [0, 1])
    def test_the_same_bits_as_the_plain_expression(self, shape: tuple[int, int, int], seed: int) -> None:
        """More rows than one chunk and a last chunk cut short, with the values where the formula
        turns: NaN, infinities, zeros of both signs, tiny, large and exp's underflow."""
        rng = np.random.default_rng(seed)
        x = (rng.standard_normal(shape) * rng.choice([0.1, 1.0, 4.0], size=shape)).astype(np.float32)
        flat = x.reshape(-1)
        flat[: len(SPECIAL)] = np.array(SPECIAL, dtype=np.float32)[: flat.size]
        expected = _gelu_reference(x.copy())
        got = gelu_in_place(x)
        assert got is x
        assert got.dtype == np.float32
        assert np.array_equal(got.view(np.uint32), expected.view(np.uint32))

    def test_within_the_approximation_of_the_exact_gelu(self) -> None:
        values = np.linspace(-8.0, 8.0, 4001, dtype=np.float32).reshape(1, -1)
        exact = np.array([0.5 * v * (1.0 + math.erf(v / math.sqrt(2.0))) for v in values[0].tolist()])
        got = gelu_in_place(values.copy())[0].astype(np.float64)
        assert np.max(np.abs(got - exact)) < 2e-6

    def test_a_view_that_cannot_be_written_through_is_refused(self) -> None:
        """A transposed view would be reshaped into a copy, and the result lost."""
        x = np.ones((4, 6), dtype=np.float32).T
        with pytest.raises(ValueError, match="C-contiguous"):
            gelu_in_place(x)
