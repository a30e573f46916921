"""Fixtures shared by every test tier: the real Hindsight server and its LLM stub (when configured)."""

from __future__ import annotations

from tests.hindsight_fixtures import (  # noqa: F401
    fresh_bank_id,
    hindsight_admission_url,
    hindsight_api_key,
    hindsight_url,
    llm_stub,
    marked,
    server,
)
from tests.postgres_fixtures import postgres_schema, postgres_url  # noqa: F401
from tests.support.keyleak import pytest_runtest_makereport, pytest_sessionfinish  # noqa: F401
from tests.support.stub import stub, stub_url  # noqa: F401
