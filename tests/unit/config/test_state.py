"""``[state]``: SQLite by default; PostgreSQL with a connection string that holds no password, the
password from a variable or a file and never shown, a plain schema name, bounded lease times."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support.configs import SOURCE, config_with, problems, section

DSN = "postgresql://dreamer@127.0.0.1:5432/dreamer"
PASSWORD = "pg-s3cret word!"


def postgres(**settings: object) -> Callable[[dict[str, Any]], None]:
    """A change that makes the state PostgreSQL's, with ``settings``."""
    return lambda d: section(d, "state").update(backend="postgres", dsn=DSN, **settings)


class TestState:
    def test_sqlite_is_the_default(self) -> None:
        cfg = config_with(lambda d: None)
        assert cfg.state.backend == "sqlite" and cfg.state.password is None

    def test_postgres_with_a_password_from_a_variable(self) -> None:
        cfg = config_with(postgres(password_env="PGPW", schema="dreamer_b"), environ={"PGPW": PASSWORD})
        assert cfg.state.password is not None and cfg.state.password.get_secret_value() == PASSWORD
        assert cfg.state.schema_name == "dreamer_b"
        assert PASSWORD in cfg.secrets()  # so the log redactor hides it
        assert cfg.redacted()["state"]["password"] == "**********"
        assert PASSWORD not in repr(cfg) and PASSWORD not in str(cfg.redacted())

    def test_a_password_file(self, tmp_path: Path) -> None:
        (tmp_path / "pw").write_text(PASSWORD + "\n")
        cfg = config_with(postgres(password_file=str(tmp_path / "pw")))
        assert cfg.state.password is not None and cfg.state.password.get_secret_value() == PASSWORD

    @pytest.mark.parametrize(
        "dsn",
        [
            "postgresql://dreamer:hunter2@db/dreamer",
            "postgres://u:hunter2@db:5432/x",
            "host=db user=dreamer password=hunter2",
            "postgresql://dreamer@db/dreamer?password=hunter2",
        ],
    )
    def test_a_password_in_the_connection_string_is_refused_unshown(self, dsn: str) -> None:
        (line,) = problems(lambda d: section(d, "state").update(backend="postgres", dsn=dsn))
        assert line.startswith(f"{SOURCE}: state.dsn: holds a password") and "hunter2" not in line

    def test_a_password_in_the_toml_is_refused(self) -> None:
        (line,) = problems(lambda d: section(d, "state").update(password=PASSWORD))
        assert line.startswith(f"{SOURCE}: state.password: ") and "password_env" in line
        assert PASSWORD not in line

    def test_postgres_needs_a_dsn(self) -> None:
        (line,) = problems(lambda d: section(d, "state").update(backend="postgres"))
        assert "needs state.dsn" in line

    @pytest.mark.parametrize("schema", ["Dreamer", "dreamer; drop", "1abc", 'x"y', "a" * 64, ""])
    def test_a_schema_name_that_is_not_plain_is_refused(self, schema: str) -> None:
        (line,) = problems(postgres(schema=schema))
        assert line.startswith(f"{SOURCE}: state.schema: ")

    @pytest.mark.parametrize(("key", "value"), [("lease_ttl_s", 1), ("lease_ttl_s", 1e9), ("pool_size", 0)])
    def test_bounds(self, key: str, value: object) -> None:
        (line,) = problems(postgres(**{key: value}))
        assert line.startswith(f"{SOURCE}: state.{key}: ")

    def test_a_password_with_a_control_character_is_refused_unshown(self) -> None:
        (line,) = problems(postgres(password_env="PGPW"), environ={"PGPW": "bad\x07pw"})
        assert "state.password_env" in line and "control character" in line and "bad" not in line
