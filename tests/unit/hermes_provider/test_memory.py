"""The provider's memory: its system-prompt block (a peer card at a FIFO skipped, not waited on), and
the bank a profile's turns go to, or why none."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dreamer.hermes_provider.memory import DreamerMemory
from dreamer.hermes_provider.settings import load_settings, settings_from_hermes_json


class TestPeerCardFile:
    def test_a_fifo_at_the_peer_card_path_is_skipped_not_waited_on(self, tmp_path: Path) -> None:
        """The system-prompt block reads the peer card file without blocking: a FIFO there (which
        would hang the agent's start) gives the block without a card; a regular file is shown."""
        from dreamer.hermes_provider.memory import DreamerMemory
        from dreamer.hermes_provider.settings import ProviderSettings
        from tests.support.configs import config_data, loaded

        writable = {"access": "read_write"}
        data = config_data(
            {"global": {}, "shared": {}, "homelab": writable},
            {"homelab": {"peer_card_path": "cards/homelab.md"}},
            topology={"global": "global", "shared": "shared"},
        )
        config = loaded(tmp_path, data)
        card = config.profiles["homelab"].peer_card_path
        assert card is not None
        card.parent.mkdir(parents=True)
        os.mkfifo(card)
        memory = DreamerMemory(ProviderSettings(config, "homelab", "config.toml", auto_retain=False))
        block = memory.system_prompt_block()
        assert block.startswith("# Dreamer memory") and "PEER CARD" not in block
        card.unlink()
        card.write_text("PEER CARD (homelab)\n- runs restic at 02:30\n", encoding="utf-8")
        assert "PEER CARD (homelab)" in memory.system_prompt_block()


class TestUseConfigDefaults:
    def test_the_shipped_example_stores_a_profiles_turns_in_its_own_bank(self, tmp_path: Path) -> None:
        """``--use-config config.example.toml --profile research``: the example names ``global`` (a
        roll-up bank) as ``default_bank``; the profile's own bank still takes unnamed retains, so
        turn retention is on."""
        example = Path(__file__).resolve().parents[3] / "config.example.toml"
        settings = load_settings(
            hermes_home=tmp_path, config_path=example, profile="research", environ={"HOME": str(tmp_path)}
        )
        memory = DreamerMemory(settings)
        assert memory.policy.default_for("retain") == "research"
        assert memory.turns is not None

    def test_no_writable_default_is_said_at_start(
        self, tmp_path: Path, caplog: pytest.LogCaptureFixture
    ) -> None:
        """A profile whose own bank is read-only: the provider starts, says turns are not stored and
        why, and keeps no turn writer."""
        data = {"bank_id": "main", "banks": {"main": {"bankId": "m", "access": "read_only"}}}
        settings = settings_from_hermes_json(data, source="t.json", environ={})
        with caplog.at_level("WARNING", logger="dreamer.hermes_provider"):
            memory = DreamerMemory(settings)
        assert memory.turns is None
        assert "conversation turns will not be stored" in caplog.text and "read-only" in caplog.text
