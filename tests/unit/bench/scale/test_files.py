"""The scale benchmark's daemon configuration."""

from __future__ import annotations

from pathlib import Path

from bench.scale.files import config_text
from dreamer.config import load_config


class TestFiles:
    def test_config_is_valid(self, tmp_path: Path) -> None:
        """The daemon's configuration loads: one profile, first run at start, a day's interval, the
        lexical dedup (provider "none", not the local model where it is installed)."""
        path = tmp_path / "dreamer.toml"
        path.write_text(config_text(tmp_path / "state"), encoding="utf-8")
        config = load_config(path)
        assert list(config.profiles) == ["homelab"]
        assert config.schedule.first_run_delay_s == 0
        assert config.schedule.interval_minutes == 1440
        assert config.embeddings.provider == "none"
