"""The real model for the embedder tests of this directory, loaded once per test module and runtime."""

from __future__ import annotations

from pathlib import Path

import pytest

from dreamer.embeddings.local import LocalEmbedder, default_model_dir


def _model_dir() -> Path:
    try:
        return default_model_dir()
    except ImportError as exc:  # pragma: no cover - CI installs the model package
        pytest.skip(str(exc))


@pytest.fixture(scope="module", params=["onnx", "numpy"])
def embedder(request: pytest.FixtureRequest) -> LocalEmbedder:
    """The model on each runtime: every test of it holds for onnxruntime and for numpy."""
    return LocalEmbedder(_model_dir(), runtime=request.param)


@pytest.fixture(scope="session")
def model_dir() -> Path:
    """The installed model's directory (skipped where the model package is not installed)."""
    return _model_dir()
