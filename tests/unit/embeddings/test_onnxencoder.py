"""The model on onnxruntime gives the numpy encoder's vectors: real model files, no network."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from dreamer.embeddings.local import LocalEmbedder, default_model_dir
from dreamer.embeddings.minilm import EncoderShape
from dreamer.embeddings.onnxencoder import OnnxEncoder, onnxruntime_installed

pytest.importorskip("onnxruntime")
safetensors_numpy = pytest.importorskip("safetensors.numpy")

#: Memory-like texts of several lengths, punctuation, digits, a currency, a non-Latin script.
TEXTS = [
    "Caroline went to the LGBTQ support group on 7 May 2023 and found it powerful.",
    "Melanie paints a sunrise over the lake.",
    "Jon lost his job as a banker and opened a dance studio for $12,500.",
    "Gina encourages Jon to keep going after his dreams.",
    "Gina encourages Jon to keep pushing, assuring him he'll reach his dreams.",
    "ok",
    "Die Wohnung in Köln kostet 1.200 € im Monat; 東京の部屋は狭い。",
    "Sam has another health checkup where the doctor warns him about health risks due to his weight. " * 3,
]


def _model_dir() -> Path:
    try:
        return default_model_dir()
    except ImportError as exc:  # pragma: no cover - CI installs the model package
        pytest.skip(str(exc))


@pytest.fixture(scope="module")
def pair() -> tuple[LocalEmbedder, LocalEmbedder]:
    where = _model_dir()
    return LocalEmbedder(where, runtime="onnx"), LocalEmbedder(where, runtime="numpy")


def test_vectors_and_cosines_equal_the_numpy_encoders(pair: tuple[LocalEmbedder, LocalEmbedder]) -> None:
    """Each vector is within 1e-4 of numpy's (cosine to it at least 1 - 1e-6), and every cosine
    between two texts is the same to 1e-4: the dedup's verdicts cannot tell the runtimes apart."""
    fast, slow = pair
    a, b = fast.embed_sync(TEXTS), slow.embed_sync(TEXTS)
    assert a.shape == b.shape == (len(TEXTS), 384)
    assert np.abs(a - b).max() < 1e-4
    assert float(((a * b).sum(axis=1)).min()) > 1 - 1e-6
    assert np.abs(a @ a.T - b @ b.T).max() < 1e-4
    assert fast.model_id == slow.model_id  # the stored vectors stay valid across a runtime change


def test_the_session_owns_the_weights(pair: tuple[LocalEmbedder, LocalEmbedder]) -> None:
    """Building the encoder empties the weights mapping it was given, so they are not held twice,
    and what it computes does not depend on the caller's arrays afterwards."""
    where = _model_dir()
    weights = safetensors_numpy.load_file(str(where / "model.safetensors"))
    encoder = OnnxEncoder(weights, EncoderShape.read(where / "config.json"), environ={})
    assert weights == {}
    assert (encoder.dimension, encoder.vocab_size) == (384, 30522)
    tokenizer = pair[1].tokenizer()
    (encoded,) = tokenizer.encode_batch(["Melanie paints a sunrise over the lake."])
    ids = np.array([encoded.ids], dtype=np.int64)
    got = encoder.encode(ids, np.ones_like(ids))
    assert np.abs(got[0] - pair[1].embed_sync(["Melanie paints a sunrise over the lake."])[0]).max() < 1e-4


def test_making_a_session_writes_nothing_to_stderr(capfd: pytest.CaptureFixture[str]) -> None:
    """onnxruntime's warnings about merging shapes would land in journald on every load; they are off."""
    where = _model_dir()
    weights = safetensors_numpy.load_file(str(where / "model.safetensors"))
    OnnxEncoder(weights, EncoderShape.read(where / "config.json"))
    captured = capfd.readouterr()
    assert captured.err == "" and captured.out == ""


def test_onnxruntime_hidden_is_told_apart(monkeypatch: pytest.MonkeyPatch) -> None:
    """With the module blocked the way an uninstalled one is, it is reported missing (no import made)."""
    assert onnxruntime_installed()
    monkeypatch.setitem(__import__("sys").modules, "onnxruntime", None)
    assert not onnxruntime_installed()


def test_a_thread_count_asked_for_is_the_sessions() -> None:
    """``LocalEmbedder(threads=2)`` on onnxruntime makes a session of two threads, whatever the
    environment says; without it, the environment's count (one by default)."""
    where = _model_dir()
    two = LocalEmbedder(where, runtime="onnx", threads=2)
    two.embed_sync(["warm"])
    session = two._load()._session  # type: ignore[union-attr]
    assert session.get_session_options().intra_op_num_threads == 2
    weights = safetensors_numpy.load_file(str(where / "model.safetensors"))
    default = OnnxEncoder(weights, EncoderShape.read(where / "config.json"), environ={})
    assert default._session.get_session_options().intra_op_num_threads == 1
