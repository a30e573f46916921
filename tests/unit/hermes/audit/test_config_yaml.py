"""Hermes' config.yaml as the audit reads it: the agent's model name in each shape Hermes accepts, or
none, or an error naming the file."""

from __future__ import annotations

from pathlib import Path

import pytest

from dreamer.hermes.audit.config_yaml import ConfigYamlError, parse_model_name, read_model_name


class TestConfigYamlModel:
    """The tiny config.yaml reader finds `model:` in both of Hermes' shapes."""

    def test_scalar_model(self) -> None:
        """'model: name' at top level."""
        assert parse_model_name("provider: x\nmodel: gpt-4o  # main\n") == "gpt-4o"

    def test_mapping_with_default(self) -> None:
        """'model:' mapping with a quoted 'default:' child, comments and blank lines around."""
        text = (
            'x: 1\nmodel:\n  # Default model\n  default: "anthropic/claude-opus-4.6"\n\n'
            '  provider: "auto"\ny: 2\n'
        )
        assert parse_model_name(text) == "anthropic/claude-opus-4.6"

    def test_mapping_with_model_key(self) -> None:
        """Hermes accepts 'model:' as the child key too."""
        assert parse_model_name("model:\n  provider: auto\n  model: qwen3:32b\n") == "qwen3:32b"

    def test_nested_keys_are_not_children(self) -> None:
        """A 'default' deeper than the first child level is ignored."""
        text = "model:\n  provider: x\n  extra:\n    default: wrong\n  default: right\n"
        assert parse_model_name(text) == "right"

    def test_indented_model_key_is_not_top_level(self) -> None:
        """'model:' under another section (e.g. a provider entry) is not the agent's model."""
        assert parse_model_name("providers:\n  dbx:\n    model: other\n") is None

    def test_flow_mapping_is_not_guessed(self) -> None:
        """'model: {default: x}' is outside the supported shapes and yields None."""
        assert parse_model_name("model: {default: x}\n") is None

    def test_missing_file_is_a_typed_error(self, tmp_path: Path) -> None:
        """An absent config.yaml raises ConfigYamlError naming the path."""
        with pytest.raises(ConfigYamlError, match=r"config\.yaml"):
            read_model_name(tmp_path / "config.yaml")
