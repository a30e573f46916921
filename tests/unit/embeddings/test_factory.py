"""The embedder a configuration asks for: built without sending, and its errors as ConfigErrors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dreamer.config import Config
from dreamer.embeddings.factory import describe_embedder, make_embedder
from dreamer.errors import ConfigError
from tests.support.configs import config_data, parsed

SOURCE = "config.toml"
BASE = config_data()


def config_with(embeddings: dict[str, Any], environ: dict[str, str] | None = None) -> Config:
    def change(data: dict[str, Any]) -> None:
        data["embeddings"] = embeddings

    return parsed(BASE, change, source=SOURCE, base_dir=Path("/etc/dreamer"), environ=environ or {})


OPENAI = {"provider": "openai", "url": "http://127.0.0.1:8080", "model": "nomic-embed-text"}


class TestFactory:
    def test_local_with_a_missing_model_directory(self, tmp_path: Path) -> None:
        """A model_path that holds no model is a ConfigError naming the key and the fix."""
        pytest.importorskip("tokenizers")
        cfg = config_with({"provider": "local", "model_path": str(tmp_path / "nowhere")})
        with pytest.raises(ConfigError) as caught:
            make_embedder(cfg)
        assert "embeddings.model_path" in str(caught.value) and "nowhere" in str(caught.value)

    def test_local_model_path_is_resolved_against_the_config_directory(self) -> None:
        """A relative model_path is read from the config file's directory."""
        cfg = config_with({"provider": "local", "model_path": "models/minilm"})
        assert cfg.embeddings.model_path == Path("/etc/dreamer/models/minilm")
        assert describe_embedder(cfg) == "local all-MiniLM-L6-v2"

    def test_openai_builds_without_sending(self) -> None:
        """The openai embedder is built from the config alone; its model id names the model."""
        embedder = make_embedder(config_with(OPENAI))
        assert embedder is not None and embedder.model_id == "openai:nomic-embed-text"
        assert embedder.dimension is None


class TestRuntimePhrase:
    def test_the_status_names_the_runtime(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """The default says numpy, ``onnx`` says onnxruntime where it is installed; with onnxruntime
        blocked as an uninstalled module is, ``onnx`` says what to install, and a runtime that
        cannot run is a ConfigError once the embedder is made."""
        from dreamer.embeddings.factory import runtime_phrase

        pytest.importorskip("onnxruntime")
        assert runtime_phrase(config_with({"provider": "local"})) == "numpy"
        assert runtime_phrase(config_with({"provider": "local", "runtime": "onnx"})) == "onnxruntime"
        monkeypatch.setitem(__import__("sys").modules, "onnxruntime", None)
        assert runtime_phrase(config_with({"provider": "local"})) == "numpy"
        onnx_only = config_with({"provider": "local", "runtime": "onnx"})
        assert runtime_phrase(onnx_only).startswith("onnxruntime (not installed: pip install")
        with pytest.raises(ConfigError) as caught:
            make_embedder(onnx_only)
        (line,) = caught.value.problems
        assert line.startswith("embeddings.runtime: 'onnx' needs onnxruntime"), line  # the key it is
