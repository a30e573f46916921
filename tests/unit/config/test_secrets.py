"""API keys: from a variable or a key file (a systemd credential), never from the TOML, never shown,
and refused when an HTTP header could not carry them."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.configs import SOURCE, config_with, problems, section

SECRET = "hs-0123456789abcdef"





class TestSecrets:
    def test_api_key_in_the_file_is_refused(self) -> None:
        """A literal api_key in the TOML is refused with where to put it instead."""
        (line,) = problems(lambda d: section(d, "backend", "hindsight").update(api_key=SECRET))
        assert line.startswith(f"{SOURCE}: backend.hindsight.api_key: ")
        assert "api_key_env" in line and "api_key_file" in line
        assert SECRET not in line

    def test_missing_secret_file(self, tmp_path: Path) -> None:
        """An api_key_file that does not exist names the key, the path, and the fix."""
        missing = tmp_path / "nope"
        (line,) = problems(lambda d: section(d, "backend", "hindsight").update(api_key_file=str(missing)))
        assert line.startswith(f"{SOURCE}: backend.hindsight.api_key_file: cannot read '{missing}'")
        assert "create the file" in line

    def test_empty_secret_file(self, tmp_path: Path) -> None:
        """An empty key file is an error, not an empty key."""
        empty = tmp_path / "key"
        empty.write_text("\n")
        (line,) = problems(lambda d: section(d, "backend", "hindsight").update(api_key_file=str(empty)))
        assert line.startswith(f"{SOURCE}: backend.hindsight.api_key_file: ")
        assert "is empty" in line

    def test_secret_file_under_credentials_directory(self, tmp_path: Path) -> None:
        """`${CREDENTIALS_DIRECTORY}/name` reads the systemd credential; the key never shows in output."""
        (tmp_path / "hindsight-api-key").write_text(SECRET + "\n")
        config = config_with(
            lambda d: section(d, "backend", "hindsight").update(
                api_key_file="${CREDENTIALS_DIRECTORY}/hindsight-api-key"
            ),
            environ={"CREDENTIALS_DIRECTORY": str(tmp_path)},
        )
        key = config.backend.hindsight.api_key
        assert key is not None and key.get_secret_value() == SECRET
        assert SECRET not in repr(config)
        assert SECRET not in str(config.redacted())
        assert config.redacted()["backend"]["hindsight"]["api_key"] == "**********"

    def test_secret_from_environment_variable(self) -> None:
        """Without a key file the key comes from api_key_env."""
        config = config_with(lambda d: None, environ={"HINDSIGHT_API_KEY": SECRET})
        key = config.backend.hindsight.api_key
        assert key is not None and key.get_secret_value() == SECRET

    def test_unset_variable_in_a_path(self) -> None:
        """A `${VAR}` that is not set names the variable and the key."""
        (line,) = problems(lambda d: d.update(state_dir="${NOPE}/state"))
        assert line.startswith(f"{SOURCE}: state_dir: environment variable ${{NOPE}} is not set")


class TestUnusableKeys:
    """A key an HTTP header cannot carry is refused at load, without being shown."""

    @pytest.mark.parametrize("key", ["hs-key\ninjected", "hs-ключ-1234", "hs key", "hs-\x00-key"])
    def test_refused_without_showing_it(self, key: str) -> None:
        environ = {"HS_KEY": key}
        (line,) = problems(
            lambda d: d.update(backend={"kind": "hindsight", "hindsight": {"api_key_env": "HS_KEY"}}),
            environ,
        )
        assert line.startswith(f"{SOURCE}: backend.hindsight.api_key_env: the key in $HS_KEY holds ")
        for piece in (key, "hs-key", "injected", "ключ"):
            assert piece not in line

    def test_a_binary_key_file_is_refused(self, tmp_path: Path) -> None:
        key_file = tmp_path / "key"
        key_file.write_bytes(b"\xff\xfe\x00secret")
        (line,) = problems(
            lambda d: d.update(
                backend={"kind": "hindsight", "hindsight": {"api_key_file": str(key_file)}}
            )
        )
        assert "backend.hindsight.api_key_file" in line and "secret" not in line

    def test_an_embedded_install_ignores_an_unusable_variable(self) -> None:
        config = config_with(lambda d: None, {"HINDSIGHT_API_KEY": "bad\nkey"})
        assert config.backend.hindsight.api_key is None
