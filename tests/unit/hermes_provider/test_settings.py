"""Hermes' ``hindsight/config.json`` read as Dreamer banks and policy, and the turn writer's settings."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from dreamer.errors import ConfigError, PolicyError
from dreamer.hermes_provider.settings import load_settings, settings_from_hermes_json
from dreamer.readside.policy import BankPolicy

SEED_003 = {
    "bank_id": "default",
    "recall_budget": "mid",
    "banks": {
        "default": {"bankId": "hermes", "budget": "mid", "enabled": True, "description": "General."},
        "code": {"bankId": "code", "budget": "mid", "enabled": True},
        "research": {"bankId": "research", "budget": "high", "enabled": True},
        "ops": {"bankId": "ops", "budget": "mid", "enabled": True},
    },
}


def policy_of(data: dict[str, Any], env: dict[str, str] | None = None) -> BankPolicy:
    settings = settings_from_hermes_json(data, source="config.json", environ=env or {})
    return BankPolicy(settings.config, settings.profile)


class TestShapes:
    def test_seed_003_banks_become_aliases_with_the_default_by_alias(self) -> None:
        """Every named bank is offered; ``bank_id: "default"`` names the alias used without ``bank``."""
        policy = policy_of(SEED_003)
        assert policy.aliases == ("default", "code", "research", "ops")
        assert policy.resolve(None, "retain").bank_id == "hermes"
        assert policy.resolve("research", "recall").budget == "high"

    def test_write_banks_make_exactly_those_writable(self) -> None:
        """``write_banks`` (seed 003's policy shape, here nested under "hindsight") decides retain."""
        data = {
            **SEED_003,
            "hindsight": {"read_banks": ["default", "code", "ops"], "write_banks": ["default"]},
        }
        policy = policy_of(data)
        assert policy.aliases_for("retain") == ("default",)
        assert policy.aliases_for("recall") == ("default", "code", "ops")
        with pytest.raises(PolicyError, match="unknown bank 'research'"):
            policy.resolve("research", "recall")

    def test_access_read_only_is_honoured_per_bank(self) -> None:
        """``access: read_only`` on one bank keeps it readable and refuses retain into it."""
        data = json.loads(json.dumps(SEED_003))
        data["banks"]["ops"]["access"] = "read_only"
        with pytest.raises(PolicyError, match="read-only"):
            policy_of(data).resolve("ops", "retain")

    def test_a_bank_id_that_is_an_id_not_an_alias_picks_its_bank(self) -> None:
        """Hermes' own configs give ``bank_id`` as the Hindsight id; it selects the bank holding it."""
        data = {"bank_id": "hermes", "banks": {"main": {"bankId": "hermes"}, "code": {"bankId": "code"}}}
        assert policy_of(data).default_alias() == "main"

    def test_no_file_uses_hermes_environment_fallback(self, tmp_path: Path) -> None:
        """Without any config.json, ``HINDSIGHT_BANK_ID`` and ``HINDSIGHT_BUDGET`` define the one bank."""
        env = {"HOME": str(tmp_path), "HINDSIGHT_BANK_ID": "team-notes", "HINDSIGHT_BUDGET": "high"}
        settings = load_settings(hermes_home=tmp_path / "home", environ=env)
        policy = BankPolicy(settings.config, settings.profile)
        assert settings.source == "environment"
        assert policy.resolve(None, "retain").bank_id == "team-notes"
        assert policy.resolve(None, "recall").budget == "high"

    def test_the_api_key_comes_from_the_environment_and_is_never_in_the_repr(self) -> None:
        """``HINDSIGHT_API_KEY`` reaches the backend configuration as a secret."""
        settings = settings_from_hermes_json(
            SEED_003, source="c.json", environ={"HINDSIGHT_API_KEY": "k-123456789"}
        )
        key = settings.config.backend.hindsight.api_key
        assert key is not None and key.get_secret_value() == "k-123456789"
        assert "k-123456789" not in repr(settings)


class TestGarbage:
    @pytest.mark.parametrize(
        ("text", "expected"),
        [
            ('{"banks": {', "invalid JSON at line 1"),
            ("[1, 2]", "must hold a JSON object, not list"),
            ('{"banks": []}', "banks: must be an object of named banks"),
            ('{"banks": {"Code": {"bankId": "c"}}}', "banks.Code: a bank alias is"),
            ('{"banks": {"code": {}}}', "banks.code.bankId: is missing"),
            ('{"banks": {"code": {"bankId": "c", "access": "admin"}}}', "'admin' is not an access"),
            (
                '{"banks": {"code": {"bankId": "c"}}, "write_banks": ["ops"]}',
                "write_banks: unknown bank alias 'ops'",
            ),
            ('{"recall_budget": "max"}', "recall_budget: 'max' is not a budget"),
            ('{"bank_id_template": "hermes-{profile}"}', "bank_id_template: is not supported"),
            ('{"banks": {"code": {"bankId": "a b"}}}', "banks.code.bank_id"),
            ('{"timeout": 1e308}', "timeout: must be a number of seconds"),
            ('{"retain_every_n_turns": ' + "9" * 5000 + "}", "not a Hindsight config (ValueError"),
            ("[" * 100_000 + "]" * 100_000, "not a Hindsight config (RecursionError"),
        ],
    )
    def test_a_broken_config_json_names_the_file_and_key(
        self, tmp_path: Path, text: str, expected: str
    ) -> None:
        """Each broken config.json is a ConfigError naming the file and what to fix."""
        home = tmp_path / "home"
        (home / "hindsight").mkdir(parents=True)
        path = home / "hindsight" / "config.json"
        path.write_text(text, encoding="utf-8")
        with pytest.raises(ConfigError) as caught:
            load_settings(hermes_home=home, environ={"HOME": str(tmp_path)})
        assert str(path) in str(caught.value) and expected in str(caught.value)

    def test_a_file_that_is_not_utf8_or_is_huge_is_refused(self, tmp_path: Path) -> None:
        """Binary bytes and a multi-megabyte file are refused without being parsed."""
        home = tmp_path / "home"
        (home / "hindsight").mkdir(parents=True)
        path = home / "hindsight" / "config.json"
        path.write_bytes(b'{"x": "\xff"}')
        with pytest.raises(ConfigError, match="not UTF-8"):
            load_settings(hermes_home=home, environ={"HOME": str(tmp_path)})
        path.write_bytes(b" " * 1_000_001)
        with pytest.raises(ConfigError, match="larger than"):
            load_settings(hermes_home=home, environ={"HOME": str(tmp_path)})

    def test_a_fifo_or_device_in_place_of_the_file_is_refused_without_reading(self, tmp_path: Path) -> None:
        """A FIFO (which would block the agent's start for ever) or a link to /dev/zero (which would
        be read without end) is a ConfigError saying it is not a regular file."""
        home = tmp_path / "home"
        (home / "hindsight").mkdir(parents=True)
        path = home / "hindsight" / "config.json"
        os.mkfifo(path)
        with pytest.raises(ConfigError, match="not a regular file"):
            load_settings(hermes_home=home, environ={"HOME": str(tmp_path)})
        path.unlink()
        path.symlink_to("/dev/zero")
        with pytest.raises(ConfigError, match="not a regular file"):
            load_settings(hermes_home=home, environ={"HOME": str(tmp_path)})


BASE: dict[str, object] = {"bank_id": "default", "banks": {"default": {"bankId": "b-default"}}}


class TestSettings:
    def test_auto_retain_and_every_n_are_read(self) -> None:
        """Hermes' keys auto_retain and retain_every_n_turns reach the provider's settings."""
        s = settings_from_hermes_json({**BASE, "auto_retain": False, "retain_every_n_turns": 3}, source="c")
        assert (s.auto_retain, s.retain_every_n_turns) == (False, 3)
        d = settings_from_hermes_json(BASE, source="c")
        assert (d.auto_retain, d.retain_every_n_turns) == (True, 1)

    @pytest.mark.parametrize(
        ("key", "value"),
        [
            ("auto_retain", "yes"),
            ("retain_every_n_turns", 0),
            ("retain_every_n_turns", 10**9),
            ("retain_every_n_turns", True),
            ("retain_every_n_turns", 2.5),
        ],
    )
    def test_bad_values_name_the_file_and_key(self, key: str, value: object) -> None:
        """A wrong type or an out-of-range count is a ConfigError naming source and key."""
        with pytest.raises(ConfigError, match=f"^cfg.json: {key}: "):
            settings_from_hermes_json({**BASE, key: value}, source="cfg.json")
