"""The BERT sentence encoder of :mod:`dreamer.embeddings.minilm` as an ONNX graph, for onnxruntime.

The same forward pass, operation for operation: token, position and token-type embeddings, layer
norm, ``layers`` blocks of multi-head self-attention (a padding token gets a bias of -1e9, so its
weight is exactly 0) and an erf-GELU feed-forward, then mean pooling over the mask and L2
normalisation. Inputs ``input_ids`` and ``attention_mask`` (int64, batch × length), output
``vectors`` (float32, batch × hidden). Operator set 18 (``LayerNormalization`` needs 17, reductions
with axes as inputs 18), which onnxruntime has run since 1.14.

Pure: weights in, model bytes out. The weights' arrays are referenced, not copied, until the bytes
are assembled.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from dreamer.embeddings import onnxproto as pb
from dreamer.embeddings.minilm import EncoderShape, check_weights

if TYPE_CHECKING:
    from numpy.typing import NDArray

OPSET = 18
INPUTS = ("input_ids", "attention_mask")
OUTPUT = "vectors"


class _Graph:
    """Nodes and initializers in the order they are added; each node's output gets a fresh name."""

    def __init__(self) -> None:
        self.nodes: list[pb.Chunks] = []
        self.initializers: list[pb.Chunks] = []
        self._count = 0

    def const(self, name: str, array: Any) -> str:
        self.initializers.append(pb.tensor(name, array))
        return name

    def op(self, op_type: str, *inputs: str, **attributes: Any) -> str:
        self._count += 1
        out = f"{op_type.lower()}_{self._count}"
        self.nodes.append(pb.node(op_type, inputs, [out], **attributes))
        return out


def _pool_into_output(g: _Graph, x: str, maskf: str) -> None:
    """Mean pooling of ``x`` over the float mask, then L2 normalisation, into :data:`OUTPUT`."""
    import numpy as np

    mask3 = g.op("Unsqueeze", maskf, g.const("axis2", np.array([2], dtype=np.int64)))
    axis1 = g.const("axis1", np.array([1], dtype=np.int64))
    summed = g.op("ReduceSum", g.op("Mul", x, mask3), axis1, keepdims=0)
    tiny = g.const("tiny", np.array([1e-9], dtype=np.float32))
    pooled = g.op("Div", summed, g.op("Max", g.op("ReduceSum", mask3, axis1, keepdims=0), tiny))
    last = g.const("last", np.array([-1], dtype=np.int64))
    length2 = g.op("ReduceL2", pooled, last, keepdims=1)
    tinier = g.const("tinier", np.array([1e-12], dtype=np.float32))
    g.nodes.append(pb.node("Div", [pooled, g.op("Max", length2, tinier)], [OUTPUT]))


def bert_graph(weights: Mapping[str, NDArray[Any]], shape: EncoderShape) -> bytes:
    """The serialised ONNX model of the encoder whose ``weights`` (safetensors names) are given."""
    import numpy as np

    check_weights(weights, shape)
    g = _Graph()
    f32 = np.float32

    def scalar(name: str, value: float) -> str:
        return g.const(name, np.array([value], dtype=f32))

    def ints(name: str, values: list[int]) -> str:
        return g.const(name, np.array(values, dtype=np.int64))

    def w(name: str) -> str:
        return g.const(name, np.asarray(weights[name], dtype=f32))

    def norm(x: str, prefix: str) -> str:
        return g.op(
            "LayerNormalization", x, w(prefix + ".weight"), w(prefix + ".bias"),
            axis=-1, epsilon=float(shape.layer_norm_eps),
        )  # fmt: skip

    def linear(x: str, prefix: str) -> str:
        weight = np.asarray(weights[prefix + ".weight"], f32)
        kernel = g.const(prefix + ".kernel", np.ascontiguousarray(weight.T))
        return g.op("Add", g.op("MatMul", x, kernel), w(prefix + ".bias"))

    hidden, heads = shape.hidden, shape.heads
    head = hidden // heads
    ids, mask = INPUTS
    length = g.op("Shape", ids, start=1, end=2)
    positions = g.op(
        "Slice", w("embeddings.position_embeddings.weight"), ints("zero", [0]), length, ints("axis0", [0])
    )
    token_types = np.asarray(weights["embeddings.token_type_embeddings.weight"], f32)
    token_type = g.const("token_type0", np.ascontiguousarray(token_types[0]))
    x = g.op("Add", g.op("Gather", w("embeddings.word_embeddings.weight"), ids, axis=0), positions)
    x = norm(g.op("Add", x, token_type), "embeddings.LayerNorm")
    maskf = g.op("Cast", mask, to=pb.FLOAT)
    bias = g.op("Mul", g.op("Sub", scalar("one", 1.0), maskf), scalar("minus_big", -1e9))
    bias = g.op("Unsqueeze", bias, ints("axes12", [1, 2]))
    split = ints("split_heads", [0, -1, heads, head])
    merge = ints("merge_heads", [0, -1, hidden])
    scale = scalar("scale", 1.0 / math.sqrt(head))
    half, root_half = scalar("half", 0.5), scalar("root_half", 1.0 / math.sqrt(2.0))
    one = "one"

    def heads_of(projected: str, perm: list[int]) -> str:
        return g.op("Transpose", g.op("Reshape", projected, split), perm=perm)

    for i in range(shape.layers):
        p = f"encoder.layer.{i}."
        q = heads_of(linear(x, p + "attention.self.query"), [0, 2, 1, 3])
        k = heads_of(linear(x, p + "attention.self.key"), [0, 2, 3, 1])  # transposed for q @ k
        v = heads_of(linear(x, p + "attention.self.value"), [0, 2, 1, 3])
        scores = g.op("Add", g.op("Mul", g.op("MatMul", q, k), scale), bias)
        weighted = g.op("MatMul", g.op("Softmax", scores, axis=-1), v)
        context = g.op("Transpose", weighted, perm=[0, 2, 1, 3])
        attended = linear(g.op("Reshape", context, merge), p + "attention.output.dense")
        x = norm(g.op("Add", attended, x), p + "attention.output.LayerNorm")
        inner = linear(x, p + "intermediate.dense")
        erf = g.op("Erf", g.op("Mul", inner, root_half))
        gelu = g.op("Mul", g.op("Mul", inner, half), g.op("Add", erf, one))
        x = norm(g.op("Add", linear(gelu, p + "output.dense"), x), p + "output.LayerNorm")
    _pool_into_output(g, x, maskf)
    message = pb.model(
        name="sentence_encoder",
        nodes=g.nodes,
        initializers=g.initializers,
        inputs=[pb.value_info(name, pb.INT64, ["batch", "length"]) for name in INPUTS],
        outputs=[pb.value_info(OUTPUT, pb.FLOAT, ["batch", hidden])],
        opset=OPSET,
    )
    return pb.serialise(message)
