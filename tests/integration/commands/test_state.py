"""``dreamer state copy``'s body (:mod:`dreamer.commands.state`) on a real state file and a real
PostgreSQL schema: the comparison as a table and as JSON, progress on stderr, exit 1 with a message
when the two differ, and the configuration error when ``[state]`` is not PostgreSQL."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from dreamer.config import Config
from dreamer.errors import ConfigError, ExitCode
from dreamer.state.pgstore import open_postgres
from tests.support.configs import loaded
from tests.support.state_seed import seed

pytestmark = pytest.mark.postgres


def config(tmp_path: Path, state: dict[str, Any]) -> Config:
    return loaded(tmp_path, {"state_dir": str(tmp_path / "state"), "embeddings": {"provider": "none"},
                             "state": state})


@pytest.fixture
def pg_config(tmp_path: Path, postgres_url: str, postgres_schema: str) -> Config:
    cfg = config(tmp_path, {"backend": "postgres", "dsn": postgres_url, "schema": postgres_schema})
    cfg.state_dir.mkdir()
    seed(cfg.state_path, 30)
    return cfg


def run(cfg: Config, *, as_json: bool = False, batch_rows: int = 5_000, source: Path | None = None
        ) -> tuple[int, str, str]:
    from dreamer.commands.state import copy_command

    out, err = io.StringIO(), io.StringIO()
    code = copy_command(cfg, Path("config.toml"), source=source, as_json=as_json, batch_rows=batch_rows,
                        out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def test_the_comparison_is_printed_as_a_table(pg_config: Config) -> None:
    code, out, err = run(pg_config)
    assert code == ExitCode.OK and err == ""
    lines = out.splitlines()
    assert lines[0].startswith(f"copied {pg_config.state_path} into PostgreSQL state ")
    assert lines[2].split() == ["table", "sqlite", "postgres", "new", "ok"]
    assert lines[3].split() == ["ledger", "30", "30", "30", "ok"]
    assert any(line.split()[:2] == ["ledger", "checksum"] and line.endswith("ok") for line in lines)
    assert lines[-1] == "the PostgreSQL state matches the file: start the daemons on it"


def test_json_says_each_table_and_a_second_copy_adds_nothing(pg_config: Config) -> None:
    run(pg_config)
    code, out, _ = run(pg_config, as_json=True)
    doc = json.loads(out)
    assert code == ExitCode.OK and doc["ok"] is True and doc["source"] == str(pg_config.state_path)
    by_name = {c["table"]: c for c in doc["checks"]}
    assert by_name["ledger"] == {"table": "ledger", "sqlite": 30, "postgres": 30, "new": 0, "ok": True}
    assert by_name["watermarks checksum"]["new"] is None and by_name["watermarks checksum"]["ok"]


def test_a_long_copy_shows_its_progress_on_stderr(pg_config: Config, monkeypatch: pytest.MonkeyPatch) -> None:
    from dreamer.commands import state

    real = state.Ticker
    monkeypatch.setattr(state, "Ticker", lambda err: real(err, every_s=0.0))
    code, _, err = run(pg_config, batch_rows=10)
    assert code == ExitCode.OK
    assert "  ledger: 10 / 30 rows\n  ledger: 20 / 30 rows\n  ledger: 30 / 30 rows\n" in err


def test_a_difference_is_exit_1_with_what_differs(pg_config: Config) -> None:
    run(pg_config)
    # A row of the schema's own, which no check refuses.
    with open_postgres(pg_config.state) as pg, pg._write() as conn:
        conn.execute("INSERT INTO ledger_profiles (profile, document_id) VALUES ('x', 'y')")
    code, out, err = run(pg_config)
    assert code == ExitCode.FAILED
    assert "DIFFERS" in next(line for line in out.splitlines() if line.startswith("ledger_profiles"))
    assert err.startswith("dreamer state copy: PostgreSQL state ") and "differs from" in err
    assert "in: ledger_profiles;" in err and "copy into a new schema ([state] schema)" in err
    assert err.count("\n") == 1


def test_a_sqlite_state_is_a_configuration_error_naming_the_key(tmp_path: Path) -> None:
    refused = r"config\.toml: state\.backend: is 'sqlite'.*backend = \"postgres\""
    with pytest.raises(ConfigError, match=refused):
        run(config(tmp_path, {}))
