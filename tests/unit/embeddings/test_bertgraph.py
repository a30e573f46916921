"""The ONNX graph computes the numpy encoder's forward pass, on a small random BERT of any shape."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from dreamer.embeddings.bertgraph import INPUTS, OPSET, OUTPUT, bert_graph
from dreamer.embeddings.minilm import BertEncoder, EncoderShape, required_tensors

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")


def _random_bert(shape: EncoderShape, vocab: int, seed: int) -> dict[str, Any]:
    """Random weights of every tensor the encoder reads (``required_tensors``), the vocabulary and
    positions sized here, the feed-forward four times the hidden size; layer-norm weights near 1."""
    rng = np.random.default_rng(seed)
    free = {
        "embeddings.word_embeddings.weight": vocab,
        "embeddings.position_embeddings.weight": shape.max_positions,
    }
    weights = {}
    for name, dims in required_tensors(shape, inner=4 * shape.hidden).items():
        sizes = [free.get(name, 2) if d is None else d for d in dims]  # token types: 2
        tensor = rng.normal(0, 0.3, sizes).astype(np.float32)
        weights[name] = 1 + tensor if "LayerNorm.weight" in name else tensor
    return weights


def _run(model: bytes, ids: Any, mask: Any) -> Any:
    session = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    return session.run([OUTPUT], {INPUTS[0]: ids, INPUTS[1]: mask})[0]


@pytest.mark.parametrize(
    ("layers", "heads", "hidden"), [(1, 1, 8), (2, 2, 16), (3, 4, 32)], ids=["1x1x8", "2x2x16", "3x4x32"]
)
def test_the_graph_gives_the_numpy_vectors(layers: int, heads: int, hidden: int) -> None:
    """Padded batches of several lengths: each row equals the numpy encoder's to 1e-5, padding
    positions change nothing, and every row is a unit vector."""
    shape = EncoderShape(layers=layers, heads=heads, hidden=hidden, layer_norm_eps=1e-12, max_positions=40)
    weights = _random_bert(shape, vocab=97, seed=layers)
    model = bert_graph(weights, shape)
    onnx.checker.check_model(onnx.ModelProto.FromString(model))
    rng = np.random.default_rng(7)
    for length in (1, 5, 40):
        ids = rng.integers(0, 97, (3, length), dtype=np.int64)
        mask = np.ones_like(ids)
        mask[1, max(1, length // 2) :] = 0  # a padded row
        got = _run(model, ids, mask)
        want = BertEncoder(weights, shape).encode(ids, mask)
        assert got.shape == (3, hidden) and got.dtype == np.float32
        assert np.abs(got - want).max() < 1e-5, length
        assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    ids = rng.integers(0, 97, (1, 12), dtype=np.int64)
    mask = np.ones_like(ids)
    mask[0, 6:] = 0
    other = ids.copy()
    other[0, 6:] = (other[0, 6:] + 1) % 97  # other tokens under the padding
    assert np.abs(_run(model, ids, mask) - _run(model, other, mask)).max() < 1e-6


def test_the_model_declares_its_opset_and_symbolic_dimensions() -> None:
    """Operator set 18, int64 inputs of (batch, length), a float32 output of (batch, hidden)."""
    shape = EncoderShape(layers=1, heads=2, hidden=8, layer_norm_eps=1e-12, max_positions=16)
    model = onnx.ModelProto.FromString(bert_graph(_random_bert(shape, vocab=11, seed=0), shape))
    assert [o.version for o in model.opset_import] == [OPSET]
    for value in model.graph.input:
        assert value.type.tensor_type.elem_type == onnx.TensorProto.INT64
        assert [d.dim_param for d in value.type.tensor_type.shape.dim] == ["batch", "length"]
    (out,) = model.graph.output
    assert out.name == OUTPUT and [d.dim_value for d in out.type.tensor_type.shape.dim] == [0, 8]


def test_missing_weights_are_named() -> None:
    """Weights without a layer's tensor fail with the tensor's name, before any session is made."""
    shape = EncoderShape(layers=1, heads=1, hidden=8, layer_norm_eps=1e-12, max_positions=8)
    weights = _random_bert(shape, vocab=11, seed=0)
    del weights["encoder.layer.0.output.dense.bias"]
    with pytest.raises(ValueError, match=r"lack 1 tensors.*encoder\.layer\.0\.output\.dense\.bias"):
        bert_graph(weights, shape)


def test_weights_of_another_shape_are_refused_before_a_session() -> None:
    """Weights whose sizes are not the ones config.json gives (another model's config), or a
    config whose heads do not divide its hidden size, fail when the graph is built, naming the
    tensor or the sizes, instead of when a batch runs into a reshape."""
    shape = EncoderShape(layers=1, heads=2, hidden=8, layer_norm_eps=1e-12, max_positions=8)
    weights = _random_bert(shape, vocab=11, seed=0)
    wider = EncoderShape(layers=1, heads=2, hidden=16, layer_norm_eps=1e-12, max_positions=8)
    with pytest.raises(ValueError, match=r"word_embeddings.*11x8.*nx16.*different models"):
        bert_graph(weights, wider)
    odd = EncoderShape(layers=1, heads=3, hidden=8, layer_norm_eps=1e-12, max_positions=8)
    with pytest.raises(ValueError, match="heads must divide the hidden size"):
        bert_graph(weights, odd)
    with pytest.raises(ValueError, match="heads must divide the hidden size"):
        BertEncoder(weights, odd)
