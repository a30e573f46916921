"""``[embeddings]``: defaults, bounds, and the key from a variable or a file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dreamer.config import Config
from dreamer.embeddings.factory import describe_embedder, make_embedder
from dreamer.errors import ConfigError
from tests.support.configs import config_data, parsed

SOURCE = "config.toml"
KEY = "emb-0123456789abcdef"
BASE = config_data()


def config_with(embeddings: dict[str, Any], environ: dict[str, str] | None = None) -> Config:
    def change(data: dict[str, Any]) -> None:
        data["embeddings"] = embeddings

    return parsed(BASE, change, source=SOURCE, base_dir=Path("/etc/dreamer"), environ=environ or {})


def problems(embeddings: dict[str, Any], environ: dict[str, str] | None = None) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        config_with(embeddings, environ)
    return caught.value.problems


OPENAI = {"provider": "openai", "url": "http://127.0.0.1:8080", "model": "nomic-embed-text"}


class TestEmbeddingsConfig:
    def test_default_is_auto_and_none_is_lexical(self) -> None:
        """Without a provider the configuration says "auto" (the local model where its files are
        found: tests/unit/embeddings/test_factory.py); "none" keeps the dedup lexical, and the
        factory says so with None."""
        assert config_with({}).embeddings.provider == "auto"
        cfg = config_with({"provider": "none"})
        assert make_embedder(cfg) is None
        assert describe_embedder(cfg) == "none (lexical dedup only)"

    def test_openai_needs_url_and_model(self) -> None:
        """provider 'openai' without a URL or a model name says which key to set."""
        (line,) = problems({"provider": "openai", "model": "m"})
        assert line.startswith(f"{SOURCE}: embeddings: ") and "embeddings.url" in line
        (line,) = problems({"provider": "openai", "url": "http://127.0.0.1:1"})
        assert "embeddings.model" in line

    @pytest.mark.parametrize(
        ("key", "value"),
        [
            ("batch_size", 0),
            ("batch_size", 10**9),
            ("timeout_s", float("inf")),
            ("timeout_s", 0),
            ("reembed_batch", 0),
            ("reembed_batch", 10**12),
        ],
    )
    def test_every_number_is_bounded(self, key: str, value: float) -> None:
        """A zero, an infinity or a huge number is refused by key."""
        (line,) = problems({**OPENAI, key: value})
        assert line.startswith(f"{SOURCE}: embeddings.{key}: ")

    def test_unknown_provider_and_key(self) -> None:
        """A misspelt provider lists the allowed ones; an unknown key is named."""
        (line,) = problems({"provider": "fastembed"})
        assert "embeddings.provider" in line and "'openai'" in line
        (line,) = problems({"provider": "none", "modle": "x"})
        assert "embeddings.modle: unknown key" in line

    def test_runtime_and_keep_loaded(self) -> None:
        """``runtime`` defaults to numpy and keep_loaded to false; a runtime that is not one of the
        two (``auto`` included), or a keep_loaded that is not a boolean, is refused by key."""
        cfg = config_with({})
        assert (cfg.embeddings.runtime, cfg.embeddings.keep_loaded) == ("numpy", False)
        assert config_with({"runtime": "onnx", "keep_loaded": True}).embeddings.keep_loaded is True
        (line,) = problems({"runtime": "auto"})
        assert line.startswith(f"{SOURCE}: embeddings.runtime: ")
        (line,) = problems({"runtime": "torch"})
        assert line.startswith(f"{SOURCE}: embeddings.runtime: ") and "'onnx'" in line and "'numpy'" in line
        (line,) = problems({"keep_loaded": "sometimes"})
        assert line.startswith(f"{SOURCE}: embeddings.keep_loaded: ")

    def test_bad_url_and_hostile_model_name(self) -> None:
        """A URL that is not http(s) and a model name with control characters are refused."""
        assert "http:// or https://" in problems({**OPENAI, "url": "file:///etc/passwd"})[0]
        assert "control character" in problems({**OPENAI, "model": "m\nX-Injected: 1"})[0]

    @pytest.mark.parametrize("key", ["embeddings", "backend"])
    def test_a_password_in_a_url_is_refused_without_being_shown(self, key: str) -> None:
        """A URL with user:password@ (embeddings.url or the Hindsight backend's url) is refused,
        pointing at api_key_env; the message never holds the password, since check-config,
        status, every error and every report would print the URL."""
        url = f"http://user:{KEY}@127.0.0.1:8080"

        def change(data: dict[str, Any]) -> None:
            if key == "embeddings":
                data["embeddings"] = {**OPENAI, "url": url}
            else:
                data["backend"] = {"kind": "hindsight", "hindsight": {"url": url}}

        with pytest.raises(ConfigError) as caught:
            parsed(BASE, change, source=SOURCE, base_dir=Path("/etc/dreamer"), environ={})
        (line,) = caught.value.problems
        assert "api_key_env" in line and KEY not in line

    def test_url_with_or_without_v1(self) -> None:
        """The endpoint is {url}/v1/embeddings, and a URL that already ends in /v1 is not doubled."""
        assert config_with(OPENAI).embeddings.endpoint == "http://127.0.0.1:8080/v1/embeddings"
        cfg = config_with({**OPENAI, "url": "http://127.0.0.1:8080/v1/"})
        assert cfg.embeddings.endpoint == "http://127.0.0.1:8080/v1/embeddings"


class TestEmbeddingsKey:
    def test_key_is_never_read_from_the_file(self) -> None:
        """api_key written in the TOML is refused with the two allowed ways."""
        (line,) = problems({**OPENAI, "api_key": KEY})
        assert "embeddings.api_key" in line and "api_key_env" in line and KEY not in line

    def test_key_from_env_is_redacted(self) -> None:
        """The key comes from the named variable, is in secrets() and never in redacted()."""
        cfg = config_with({**OPENAI, "api_key_env": "EMB_KEY"}, {"EMB_KEY": KEY})
        assert cfg.embeddings.api_key is not None and cfg.embeddings.api_key.get_secret_value() == KEY
        assert KEY in cfg.secrets()
        assert KEY not in repr(cfg) and KEY not in str(cfg.redacted())
        assert cfg.redacted()["embeddings"]["api_key"] == "**********"

    def test_key_file(self, tmp_path: Path) -> None:
        """The key comes from api_key_file; a missing or empty file names the key and the path."""
        path = tmp_path / "emb.key"
        path.write_text(KEY + "\n")
        cfg = config_with({**OPENAI, "api_key_file": str(path)})
        assert cfg.embeddings.api_key is not None and cfg.embeddings.api_key.get_secret_value() == KEY
        (line,) = problems({**OPENAI, "api_key_file": str(tmp_path / "missing")})
        assert "embeddings.api_key_file: cannot read" in line
        path.write_text("  \n")
        (line,) = problems({**OPENAI, "api_key_file": str(path)})
        assert "embeddings.api_key_file" in line and "is empty" in line

    def test_a_key_file_linked_to_an_endless_device_is_read_bounded(self, tmp_path: Path) -> None:
        """An api_key_file that is a link to /dev/zero is read only up to its bound, then refused as
        a key an HTTP header cannot carry, instead of being read until memory runs out."""
        path = tmp_path / "emb.key"
        path.symlink_to("/dev/zero")
        (line,) = problems({**OPENAI, "api_key_file": str(path)})
        assert "embeddings.api_key_file" in line and "HTTP header cannot carry" in line

    def test_key_an_http_header_cannot_carry(self) -> None:
        """A key with a newline is refused without being shown, when it would be sent."""
        (line,) = problems({**OPENAI, "api_key_env": "EMB_KEY"}, {"EMB_KEY": "abc\ndef-secret"})
        assert "embeddings.api_key_env" in line and "def-secret" not in line
        # Not sent with provider "none": not an error.
        assert config_with({"api_key_env": "EMB_KEY"}, {"EMB_KEY": "abc\ndef"}).embeddings.api_key is None
