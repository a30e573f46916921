"""The Hermes plugin directory: written, idempotent, and removed only where it is ours."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from dreamer.errors import UsageError
from dreamer.hermes_provider.install import (
    MANIFEST,
    configured_provider,
    install_plugin,
    plugin_files,
    uninstall_plugin,
)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    home = tmp_path / "hermes"
    home.mkdir()
    (home / "config.yaml").write_text("model: x\n", encoding="utf-8")
    return home


class TestInstall:
    def test_install_writes_a_plugin_hermes_recognises(self, home: Path) -> None:
        """The directory holds ``__init__.py`` with ``register_memory_provider`` (Hermes' discovery
        scans for it), ``plugin.yaml`` and the manifest."""
        report = install_plugin(home)
        target = home / "plugins" / "dreamer"
        assert report.actions == {"__init__.py": "written", "plugin.yaml": "written"}
        assert "register_memory_provider" in (target / "__init__.py").read_text(encoding="utf-8")
        assert sorted(p.name for p in target.iterdir()) == sorted([MANIFEST, "__init__.py", "plugin.yaml"])

    def test_installing_twice_changes_nothing(self, home: Path) -> None:
        """A second install finds every file as it would write it."""
        install_plugin(home)
        assert set(install_plugin(home).actions.values()) == {"unchanged"}

    def test_the_recorded_config_and_profile_reach_the_plugin(self, home: Path, tmp_path: Path) -> None:
        """``--use-config --profile`` are written into the plugin as constructor arguments."""
        text = plugin_files(config_path=tmp_path / "c.toml", profile="coder")["__init__.py"]
        assert f"config_path={str(tmp_path / 'c.toml')!r}" in text and "profile='coder'" in text

    def test_not_a_hermes_home_is_refused(self, tmp_path: Path) -> None:
        """An empty directory is not a Hermes home: nothing is written."""
        with pytest.raises(UsageError, match="is not a Hermes home"):
            install_plugin(tmp_path)
        assert list(tmp_path.iterdir()) == []

    def test_a_symlink_planted_at_the_target_is_refused(self, home: Path, tmp_path: Path) -> None:
        """``plugins/dreamer`` as a symbolic link (to anywhere) is not written through."""
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir()
        (home / "plugins").mkdir()
        (home / "plugins" / "dreamer").symlink_to(elsewhere)
        with pytest.raises(UsageError, match="symbolic link"):
            install_plugin(home)
        assert list(elsewhere.iterdir()) == []

    def test_a_symlinked_file_inside_the_plugin_is_refused(self, home: Path, tmp_path: Path) -> None:
        """A link planted at ``__init__.py`` is refused rather than followed."""
        install_plugin(home)
        victim = tmp_path / "victim.py"
        victim.write_text("mine\n", encoding="utf-8")
        init = home / "plugins" / "dreamer" / "__init__.py"
        init.unlink()
        init.symlink_to(victim)
        with pytest.raises(UsageError, match="symbolic link"):
            install_plugin(home)
        assert victim.read_text(encoding="utf-8") == "mine\n"

    def test_a_foreign_directory_of_the_same_name_is_left_alone(self, home: Path) -> None:
        """A ``plugins/dreamer`` that the install did not write is not overwritten."""
        foreign = home / "plugins" / "dreamer"
        foreign.mkdir(parents=True)
        (foreign / "__init__.py").write_text("# someone else's\n", encoding="utf-8")
        with pytest.raises(UsageError, match="not written by dreamer hermes install"):
            install_plugin(home)
        assert (foreign / "__init__.py").read_text(encoding="utf-8") == "# someone else's\n"

    @pytest.mark.parametrize("name", ["hindsight", "Bad-Name", "../x", ""])
    def test_a_bundled_or_malformed_name_is_refused(self, home: Path, name: str) -> None:
        """A bundled provider's name would shadow the plugin; a path-like name is not a name."""
        with pytest.raises(UsageError, match="--name"):
            install_plugin(home, name=name)

    @pytest.mark.skipif(os.geteuid() == 0, reason="root writes through any permission bits")
    def test_an_unwritable_home_is_reported(self, home: Path) -> None:
        """A Hermes home without write permission gives a message naming the path and the fix."""
        home.chmod(0o555)
        try:
            with pytest.raises(UsageError, match="permission denied"):
                install_plugin(home)
        finally:
            home.chmod(0o755)

    def test_a_home_whose_name_is_too_long_is_a_usage_error(self, tmp_path: Path) -> None:
        """A --home the file system cannot name is refused like any other non-directory."""
        with pytest.raises(UsageError, match="is not a directory"):
            install_plugin(tmp_path / ("h" * 300))
        with pytest.raises(UsageError, match="is not a directory"):
            uninstall_plugin(tmp_path / ("h" * 300))

    def test_plugins_being_a_file_is_reported(self, home: Path) -> None:
        """``plugins`` that is a file, not a directory, gives a clear error, no traceback."""
        (home / "plugins").write_text("not a directory\n", encoding="utf-8")
        with pytest.raises(UsageError, match="cannot write"):
            install_plugin(home)


class TestUninstall:
    def test_uninstall_removes_what_it_wrote_and_keeps_the_rest(self, home: Path) -> None:
        """Files the user added or changed stay; the install's own unchanged files go."""
        install_plugin(home)
        target = home / "plugins" / "dreamer"
        (target / "notes.txt").write_text("mine\n", encoding="utf-8")
        (target / "plugin.yaml").write_text("edited\n", encoding="utf-8")
        report = uninstall_plugin(home)
        assert report.actions == {"__init__.py": "removed", "plugin.yaml": "kept (changed since the install)"}
        assert sorted(p.name for p in target.iterdir()) == ["notes.txt", "plugin.yaml"]

    def test_uninstall_of_a_clean_install_removes_the_directory(self, home: Path) -> None:
        """Nothing else in it: the plugin directory itself is gone."""
        install_plugin(home)
        uninstall_plugin(home)
        assert not (home / "plugins" / "dreamer").exists()

    def test_uninstall_without_an_install_is_refused(self, home: Path) -> None:
        """No manifest: nothing is removed, and the message says so."""
        with pytest.raises(UsageError, match="nothing to uninstall"):
            uninstall_plugin(home)

    def test_a_damaged_manifest_is_reported_not_trusted(self, home: Path) -> None:
        """A manifest that is not the install's JSON removes nothing."""
        install_plugin(home)
        (home / "plugins" / "dreamer" / MANIFEST).write_text('{"../../config.yaml": 1}', encoding="utf-8")
        with pytest.raises(UsageError, match="damaged"):
            uninstall_plugin(home)
        assert (home / "config.yaml").exists()


class TestReinstall:
    def test_a_user_edited_init_is_kept_on_reinstall(self, home: Path, tmp_path: Path) -> None:
        """An ``__init__.py`` edited since the install survives an install with other arguments; the
        report says how to get the new one, and uninstall still keeps the edit."""
        install_plugin(home)
        init = home / "plugins" / "dreamer" / "__init__.py"
        edited = init.read_text(encoding="utf-8") + "# my logging tweak\n"
        init.write_text(edited, encoding="utf-8")
        report = install_plugin(home, profile="coder")
        assert report.actions["__init__.py"].startswith("kept (changed since the install")
        assert init.read_text(encoding="utf-8") == edited
        assert uninstall_plugin(home).actions["__init__.py"] == "kept (changed since the install)"
        assert init.read_text(encoding="utf-8") == edited

    def test_an_unedited_init_is_rewritten_with_the_new_arguments(self, home: Path) -> None:
        install_plugin(home)
        assert install_plugin(home, profile="coder").actions["__init__.py"] == "written"
        assert "profile='coder'" in (home / "plugins" / "dreamer" / "__init__.py").read_text(encoding="utf-8")


class TestConfiguredProvider:
    @pytest.mark.parametrize(
        ("yaml_text", "provider"),
        [
            ("model: x\n", None),
            ("memory:\n  provider: dreamer\n", "dreamer"),
            ("memory:\n  memory_enabled: true\n  provider: 'dreamer'  # ours\n", "dreamer"),
            ('memory:\n  provider: ""\n', ""),
            ("memory:\n  x: 1\nother:\n  provider: dreamer\n", None),
            ("memory: [unclosed\n", None),
        ],
    )
    @pytest.mark.parametrize("with_pyyaml", [True, False])
    def test_read_as_hermes_reads_it(
        self,
        home: Path,
        yaml_text: str,
        provider: str | None,
        with_pyyaml: bool,
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        """The same answer with PyYAML and, where Dreamer runs without it, from the line scan."""
        if not with_pyyaml:
            monkeypatch.setitem(sys.modules, "yaml", None)
        (home / "config.yaml").write_text(yaml_text, encoding="utf-8")
        assert configured_provider(home) == provider

    def test_a_missing_file_says_nothing(self, tmp_path: Path) -> None:
        assert configured_provider(tmp_path) is None
