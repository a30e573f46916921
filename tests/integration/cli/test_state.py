"""``dreamer state copy`` as a real process (:mod:`dreamer.cli.state`): its arguments, and each way
it is refused as one line on stderr with its exit status, never a traceback nor the password."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import run_dreamer
from tests.support.configs import write_toml
from tests.support.state_seed import seed

SECRET = "pg-secret-0123456789"


def write_config(tmp_path: Path, state: dict[str, Any]) -> Path:
    data = {"state_dir": str(tmp_path / "state"), "embeddings": {"provider": "none"}, "state": state}
    return write_toml(tmp_path / "config.toml", data)


def one_line(stderr: str) -> str:
    assert stderr.count("\n") == 1 and "Traceback" not in stderr, stderr
    return stderr


def test_a_sqlite_state_is_refused_naming_the_key(tmp_path: Path) -> None:
    done = run_dreamer(write_config(tmp_path, {"backend": "sqlite"}), "state", "copy")
    assert done.returncode == 78 and done.stdout == ""
    line = one_line(done.stderr)
    assert "config.toml: state.backend: is 'sqlite'" in line and 'backend = "postgres"' in line


def test_a_missing_file_is_one_line_naming_it(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"backend": "postgres", "dsn": "postgresql://dreamer@127.0.0.1:1/none"})
    done = run_dreamer(config, "state", "copy", "--from", str(tmp_path / "nowhere.sqlite3"))
    assert done.returncode == 1
    missing = tmp_path / "nowhere.sqlite3"
    assert one_line(done.stderr).startswith(f"dreamer state: {missing}: no state file there")


def test_an_action_is_needed_and_batches_hold_a_row_at_least(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"backend": "postgres", "dsn": "postgresql://dreamer@127.0.0.1:1/none"})
    done = run_dreamer(config, "state")
    assert done.returncode == 2 and "ACTION" in done.stderr
    done = run_dreamer(config, "state", "copy", "--batch-rows", "0")
    assert done.returncode == 2 and "--batch-rows: must be a whole number of rows, at least 1" in done.stderr


def test_an_unreachable_database_is_one_line_without_the_password(tmp_path: Path) -> None:
    (tmp_path / "state").mkdir()
    seed(tmp_path / "state" / "state.sqlite3", 3)
    config = write_config(
        tmp_path,
        {"backend": "postgres", "dsn": "postgresql://dreamer@127.0.0.1:1/dev", "password_env": "PG_PASSWORD"},
    )
    done = run_dreamer(config, "state", "copy", env={"PG_PASSWORD": SECRET})
    assert done.returncode == 1
    assert "(schema dreamer): cannot connect" in one_line(done.stderr)
    logged = run_dreamer(config, "state", "copy", "--log-level", "debug", env={"PG_PASSWORD": SECRET})
    assert logged.returncode == 1 and "Traceback" not in logged.stderr
    assert SECRET not in done.stdout + done.stderr + logged.stdout + logged.stderr


@pytest.mark.postgres
def test_a_copy_through_the_command_line(tmp_path: Path, postgres_url: str, postgres_schema: str) -> None:
    (tmp_path / "state").mkdir()
    path = tmp_path / "state" / "state.sqlite3"
    seed(path, 12)
    config = write_config(tmp_path, {"backend": "postgres", "dsn": postgres_url, "schema": postgres_schema})
    done = run_dreamer(config, "state", "copy", "--json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["ok"] and doc["source"] == str(path) and postgres_schema in doc["target"]
    assert {c["table"]: c["postgres"] for c in doc["checks"]}["ledger"] == 12
