"""``dreamer hermes install``: the next step it advises, and a warning when no turns would be stored."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from dreamer.commands.hermes import hermes_install_command
from tests.support.configs import config_data, toml_text


@pytest.fixture
def home(tmp_path: Path) -> Path:
    home = tmp_path / "hermes"
    home.mkdir()
    (home / "config.yaml").write_text("model: x\n", encoding="utf-8")
    return home


class TestCommandAdvice:
    def test_next_step_only_when_the_provider_is_not_set(self, home: Path) -> None:
        """Install says "next: set memory.provider" while config.yaml does not name it, and says it
        is set once it does; uninstall then says exactly what to run."""
        out = io.StringIO()
        assert hermes_install_command(home=home, out=out) == 0
        assert "next: in" in out.getvalue() and "provider: dreamer" in out.getvalue()
        (home / "config.yaml").write_text("memory:\n  provider: dreamer\n", encoding="utf-8")
        out = io.StringIO()
        hermes_install_command(home=home, out=out)
        assert "next:" not in out.getvalue() and "memory.provider is already dreamer" in out.getvalue()
        out = io.StringIO()
        hermes_install_command(home=home, uninstall=True, out=out)
        assert "hermes config set memory.provider ''" in out.getvalue()

    def test_uninstall_says_nothing_more_when_another_provider_is_set(self, home: Path) -> None:
        hermes_install_command(home=home, out=io.StringIO())
        (home / "config.yaml").write_text("memory:\n  provider: honcho\n", encoding="utf-8")
        out = io.StringIO()
        hermes_install_command(home=home, uninstall=True, out=out)
        assert "next:" not in out.getvalue()

    def test_a_configuration_without_a_writable_default_is_named_at_install(
        self, home: Path, tmp_path: Path
    ) -> None:
        """A Dreamer TOML whose profile's bank is read-only: install warns that no turns are stored."""
        data = config_data(
            ("global", "shared", "research"), ("research",), state_dir=str(tmp_path / "state")
        )
        data["banks"]["research"]["access"] = "read_only"
        path = tmp_path / "c.toml"
        path.write_text(toml_text(data), encoding="utf-8")
        out = io.StringIO()
        hermes_install_command(home=home, config_path=path, profile="research", out=out)
        assert "warning: conversation turns will not be stored" in out.getvalue()
        assert "read-only" in out.getvalue()
