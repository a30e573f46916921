"""scripts/postgres-dev: the PostgreSQL the PostgreSQL-state tests run on answers as the script says
(version 18, pgvector, 127.0.0.1 only), and ``status`` / ``env`` tell a running one."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.postgres
REPO = Path(__file__).resolve().parents[2]


def test_the_server_is_postgresql_18_on_loopback_with_pgvector(
    postgres_url: str, postgres_schema: str
) -> None:
    psycopg = pytest.importorskip("psycopg")
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        assert int(conn.execute("SHOW server_version_num").fetchone()[0]) // 10_000 == 18
        assert conn.execute("SHOW listen_addresses").fetchone()[0] == "127.0.0.1"
        conn.execute(f'CREATE SCHEMA "{postgres_schema}"')
        conn.execute(f'CREATE TABLE "{postgres_schema}".v (e vector(3))')
        conn.execute(f"INSERT INTO \"{postgres_schema}\".v VALUES ('[1,2,3]')")
        assert conn.execute(f'SELECT e::text FROM "{postgres_schema}".v').fetchone()[0] == "[1,2,3]"


def test_status_and_env_tell_the_running_server(postgres_url: str) -> None:
    home = os.environ.get("DREAMER_POSTGRES_HOME", str(REPO / ".postgres-dev"))
    if not (Path(home) / "pgdata").is_dir():
        pytest.skip(f"the test server was not started by scripts/postgres-dev (no {home}/pgdata)")
    status = subprocess.run([REPO / "scripts/postgres-dev", "status"], capture_output=True, text=True)
    assert status.returncode == 0 and "pgvector available" in status.stdout, status.stdout + status.stderr
    env = subprocess.run([REPO / "scripts/postgres-dev", "env"], capture_output=True, text=True, check=True)
    assert env.stdout.strip() == f"DREAMER_TEST_POSTGRES_URL={postgres_url}"
