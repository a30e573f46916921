"""Pytest fixtures for tests against the real PostgreSQL that ``scripts/postgres-dev up`` starts.

The server is found through ``DREAMER_TEST_POSTGRES_URL`` (printed by the script and written to
``$DREAMER_POSTGRES_HOME/env``). Without it the tests skip, with how to start it; under
``DREAMER_REQUIRE_POSTGRES=1`` (CI) they fail instead. Each test gets a schema of its own, dropped
afterwards, so tests and sessions sharing one server never see each other's rows.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest

POSTGRES_URL_VAR = "DREAMER_TEST_POSTGRES_URL"
_HOW_TO_START = (
    "start it with `scripts/postgres-dev up`, then load its environment: "
    'set -a; . "${DREAMER_POSTGRES_HOME:-.postgres-dev}/env"; set +a'
)


@pytest.fixture(scope="session")
def postgres_url() -> str:
    """The test server's connection string; skip (or fail under DREAMER_REQUIRE_POSTGRES=1)."""
    url = os.environ.get(POSTGRES_URL_VAR, "").strip()
    if not url:
        if os.environ.get("DREAMER_REQUIRE_POSTGRES") == "1":
            pytest.fail(f"DREAMER_REQUIRE_POSTGRES=1 but {POSTGRES_URL_VAR} is not set: {_HOW_TO_START}")
        pytest.skip(f"{POSTGRES_URL_VAR} is not set: {_HOW_TO_START}")
    return url


@pytest.fixture
def postgres_schema(postgres_url: str) -> Iterator[str]:
    """A schema name no one has used, dropped with everything in it after the test."""
    psycopg = pytest.importorskip("psycopg")
    name = f"t_{uuid.uuid4().hex[:12]}"
    yield name
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
