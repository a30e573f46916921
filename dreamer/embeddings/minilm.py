"""A BERT sentence encoder (all-MiniLM-L6-v2) in plain numpy: no torch, no network.

The forward pass of a BERT encoder with mean pooling and L2 normalisation, which is what
sentence-transformers runs for this model. Weights come from a ``model.safetensors`` file and the
tokenizer from ``tokenizer.json`` (the Hugging Face ``tokenizers`` package); see
:mod:`dreamer.embeddings.local` for where they are found.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dreamer.embeddings.weightsfile import RowsOnDisk

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    Array = NDArray[np.float32]


@dataclass(frozen=True, slots=True)
class EncoderShape:
    """The sizes read from the model's ``config.json``."""

    layers: int
    heads: int
    hidden: int
    layer_norm_eps: float
    max_positions: int

    @classmethod
    def read(cls, path: Path) -> EncoderShape:
        raw = json.loads(path.read_text(encoding="utf-8"))
        if raw.get("model_type") != "bert" or raw.get("hidden_act", "gelu") != "gelu":
            raise ValueError(f"{path}: not a BERT encoder with GELU (model_type {raw.get('model_type')!r})")
        return cls(
            layers=int(raw["num_hidden_layers"]),
            heads=int(raw["num_attention_heads"]),
            hidden=int(raw["hidden_size"]),
            layer_norm_eps=float(raw.get("layer_norm_eps", 1e-12)),
            max_positions=int(raw.get("max_position_embeddings", 512)),
        )


def _layer_norm(x: Array, weight: Array, bias: Array, eps: float) -> Array:
    import numpy as np

    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    out: Array = ((x - mean) / np.sqrt(var + eps)) * weight + bias
    return out


#: Rows of a layer's inner activations :func:`gelu_in_place` works through at a time: its four
#: buffers of 64 x 1536 float32 (384 KiB each) stay in the cache, where a temporary of the whole
#: pass per operation (1.5 MiB each at 256 tokens) held 14.6 MB at once.
GELU_ROWS = 64


def gelu_in_place(x: Array) -> Array:
    """The exact (erf) GELU that BERT uses, written over ``x`` (C-contiguous) and returned.

    ``math.erf`` is exact but scalar; the rational form of Abramowitz-Stegun 7.1.26 is within
    1.5e-7. Each operation is the one the plain expression
    ``0.5 * x * (1 + sign(z) * (1 - poly(t) * exp(-a * a)))`` (``z = x / sqrt(2)``, ``a = |z|``,
    ``t = 1 / (1 + p * a)``) does, in the same order, so the result is the same bit for bit; only
    the buffers are reused, ``GELU_ROWS`` rows at a time.
    """
    import numpy as np

    if not x.flags.c_contiguous:
        raise ValueError("gelu_in_place writes over a C-contiguous array only")
    flat = x.reshape(-1, x.shape[-1])
    rows = min(GELU_ROWS, len(flat))
    a, sign, t, poly = (np.empty((rows, flat.shape[1]), dtype=flat.dtype) for _ in range(4))
    for start in range(0, len(flat), GELU_ROWS):
        part = flat[start : start + GELU_ROWS]
        n = len(part)
        za, zs, zt, zp = a[:n], sign[:n], t[:n], poly[:n]
        np.divide(part, math.sqrt(2.0), out=za)
        np.sign(za, out=zs)
        np.abs(za, out=za)
        np.multiply(za, 0.3275911, out=zt)
        zt += 1.0
        np.divide(1.0, zt, out=zt)
        np.multiply(zt, 1.061405429, out=zp)
        for coefficient in (-1.453152027, 1.421413741, -0.284496736, 0.254829592):
            zp += coefficient
            zp *= zt
        np.negative(za, out=zt)
        np.multiply(zt, za, out=za)
        np.exp(za, out=za)
        zp *= za
        np.subtract(1.0, zp, out=zp)
        zp *= zs
        zp += 1.0
        part *= 0.5
        part *= zp
    return x


def required_tensors(shape: EncoderShape, inner: int) -> dict[str, tuple[int | None, ...]]:
    """Every tensor the forward pass reads, and its shape (None: any size; ``inner`` is the
    feed-forward width, None-sized when 0)."""
    h, ff = shape.hidden, (inner or None)
    names: dict[str, tuple[int | None, ...]] = {
        "embeddings.word_embeddings.weight": (None, h),
        "embeddings.position_embeddings.weight": (None, h),
        "embeddings.token_type_embeddings.weight": (None, h),
        "embeddings.LayerNorm.weight": (h,),
        "embeddings.LayerNorm.bias": (h,),
    }
    for i in range(shape.layers):
        p = f"encoder.layer.{i}."
        for part, (out, into) in {
            "attention.self.query": (h, h),
            "attention.self.key": (h, h),
            "attention.self.value": (h, h),
            "attention.output.dense": (h, h),
            "intermediate.dense": (ff, h),
            "output.dense": (h, ff),
        }.items():
            names[f"{p}{part}.weight"], names[f"{p}{part}.bias"] = (out, into), (out,)
        for norm in ("attention.output.LayerNorm", "output.LayerNorm"):
            names[f"{p}{norm}.weight"], names[f"{p}{norm}.bias"] = (h,), (h,)
    return names


def check_weights(weights: Mapping[str, Any], shape: EncoderShape) -> None:
    """ValueError naming the first problem when ``weights`` cannot be the encoder ``config.json``
    describes: a tensor missing, a tensor of another shape (a config.json of another model), a
    hidden size the heads do not divide, or fewer than one position. Both runtimes check this at
    load, so a mismatch is a model file error then, not a failed embedding later."""
    if shape.heads < 1 or shape.hidden % shape.heads or shape.layers < 1:
        raise ValueError(
            f"config.json: hidden_size {shape.hidden} in {shape.heads} attention heads and "
            f"{shape.layers} layers is not an encoder (the heads must divide the hidden size)"
        )
    ff = weights.get("encoder.layer.0.intermediate.dense.weight")
    inner = int(ff.shape[0]) if ff is not None and len(ff.shape) == 2 else 0
    wanted = required_tensors(shape, inner)
    missing = [name for name in wanted if name not in weights]
    if missing:
        raise ValueError(f"model weights lack {len(missing)} tensors, e.g. {missing[0]!r}")
    for name, dims in wanted.items():
        got = tuple(int(d) for d in weights[name].shape)
        if len(got) != len(dims) or any(w is not None and w != g for w, g in zip(dims, got, strict=True)):
            expected = "x".join("n" if d is None else str(d) for d in dims)
            raise ValueError(
                f"tensor {name!r} is {'x'.join(map(str, got))}, config.json's encoder needs {expected}: "
                "the weights and config.json are of different models"
            )
    if int(weights["embeddings.position_embeddings.weight"].shape[0]) < 1:
        raise ValueError("the model has no position embeddings")


#: The word embedding table's tensor name.
WORD_TABLE = "embeddings.word_embeddings.weight"


class BertEncoder:
    """Mean-pooled, normalised sentence vectors from token ids; weights held as float32 arrays.

    The word embedding table may be anything whose ``table[ids]`` gives the rows as float32, such
    as :class:`dreamer.embeddings.weightsfile.RowsOnDisk`, which leaves it in the model file.
    """

    def __init__(self, weights: dict[str, Any], shape: EncoderShape) -> None:
        import numpy as np

        self.shape = shape
        check_weights(weights, shape)
        table = weights[WORD_TABLE]
        #: The word embedding table: in memory, or left in the model file and read row by row.
        self._table: RowsOnDisk | Array = (
            table if isinstance(table, RowsOnDisk) else np.asarray(table, dtype=np.float32)
        )
        self._w: dict[str, Array] = {
            name: np.asarray(value, dtype=np.float32)
            for name, value in weights.items()
            if name != WORD_TABLE and not name.endswith("position_ids")
        }
        self.dimension = shape.hidden
        self.vocab_size = int(self._table.shape[0])
        # Each linear layer's weight is kept as its transposed view, its kernel: BLAS multiplies by
        # a transposed 2-D array as fast as by a contiguous copy, which would cost 42 MiB more while
        # the encoder is built.
        self._kernels: dict[str, Array] = {}
        for name in [n.removesuffix(".weight") for n in self._required() if self._is_linear(n)]:
            self._kernels[name] = self._w.pop(f"{name}.weight").T

    @property
    def held_bytes(self) -> int:
        """Bytes of weights held in memory; a table left on disk (`RowsOnDisk`) counts nothing."""
        held = sum(int(a.nbytes) for a in [*self._kernels.values(), *self._w.values()])
        return held if isinstance(self._table, RowsOnDisk) else held + int(self._table.nbytes)

    @property
    def table_on_disk(self) -> bool:
        """Whether the word embedding table is left in the model file."""
        return isinstance(self._table, RowsOnDisk)

    def _required(self) -> list[str]:
        return list(required_tensors(self.shape, inner=0))

    @staticmethod
    def _is_linear(name: str) -> bool:
        return name.endswith(".weight") and name.startswith("encoder.") and "LayerNorm" not in name

    def _linear(self, x: Array, name: str) -> Array:
        # A 2-D product with the transposed weight: numpy sends it to BLAS (a 3-D stack times a
        # transposed view takes a slow generic loop, ~30x slower).
        kernel = self._kernels[name]
        flat = x.reshape(-1, x.shape[-1]) @ kernel + self._w[f"{name}.bias"]
        out: Array = flat.reshape(*x.shape[:-1], kernel.shape[1])
        return out

    def _attention(self, x: Array, p: str, bias: Array) -> Array:
        """Layer ``p``'s self-attention with its residual and layer norm."""
        import numpy as np

        s = self.shape
        batch, length = x.shape[0], x.shape[1]
        head = s.hidden // s.heads

        def split(t: Array) -> Array:
            return t.reshape(batch, length, s.heads, head).transpose(0, 2, 1, 3)

        q = split(self._linear(x, p + "attention.self.query"))
        k = split(self._linear(x, p + "attention.self.key"))
        v = split(self._linear(x, p + "attention.self.value"))
        scores = (q @ k.transpose(0, 1, 3, 2)) / math.sqrt(head) + bias
        scores = scores - scores.max(axis=-1, keepdims=True)
        probs = np.exp(scores)
        probs /= probs.sum(axis=-1, keepdims=True)
        context = (probs @ v).transpose(0, 2, 1, 3).reshape(batch, length, s.hidden)
        attended = self._linear(context, p + "attention.output.dense")
        w = self._w
        return _layer_norm(
            attended + x,
            w[p + "attention.output.LayerNorm.weight"],
            w[p + "attention.output.LayerNorm.bias"],
            s.layer_norm_eps,
        )

    def _feed_forward(self, x: Array, p: str) -> Array:
        """Layer ``p``'s feed-forward block with its residual and layer norm."""
        inner = gelu_in_place(self._linear(x, p + "intermediate.dense"))
        w = self._w
        return _layer_norm(
            self._linear(inner, p + "output.dense") + x,
            w[p + "output.LayerNorm.weight"],
            w[p + "output.LayerNorm.bias"],
            self.shape.layer_norm_eps,
        )

    def encode(self, ids: NDArray[Any], mask: NDArray[Any]) -> Array:
        """Token ids and attention mask, both (batch, length) → unit vectors (batch, hidden)."""
        import numpy as np

        w, s = self._w, self.shape
        length = ids.shape[1]
        x = (
            self._table[ids]
            + w["embeddings.position_embeddings.weight"][np.arange(length)][None, :, :]
            + w["embeddings.token_type_embeddings.weight"][0][None, None, :]
        )
        x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], s.layer_norm_eps)
        bias = ((1.0 - mask.astype(np.float32)) * -1e9)[:, None, None, :]
        # One method per half of a layer, so that each half's temporaries are let go before the
        # next half allocates its own.
        for i in range(s.layers):
            x = self._attention(x, f"encoder.layer.{i}.", bias)
            x = self._feed_forward(x, f"encoder.layer.{i}.")
        m = mask.astype(np.float32)[:, :, None]
        pooled = (x * m).sum(axis=1) / np.clip(m.sum(axis=1), 1e-9, None)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        out: Array = (pooled / np.clip(norms, 1e-12, None)).astype(np.float32)
        return out
