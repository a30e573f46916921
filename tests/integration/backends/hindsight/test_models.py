"""Dreamer's Hindsight response models held against the running test server's own ``/openapi.json``.

Fails when a field Dreamer reads is renamed, retyped or made optional by the server it runs against.
"""

from __future__ import annotations

import httpx
import pytest

from tests.support.openapi_check import openapi_mismatches

pytestmark = pytest.mark.hindsight


def test_models_match_the_servers_openapi(hindsight_url: str, hindsight_api_key: str) -> None:
    """Every field the response models read exists in the server's schemas with a compatible type."""
    response = httpx.get(
        f"{hindsight_url}/openapi.json",
        headers={"Authorization": f"Bearer {hindsight_api_key}"},
        timeout=30.0,
    )
    response.raise_for_status()
    spec = response.json()
    assert spec["info"]["version"].startswith("1.")
    assert openapi_mismatches(spec) == []
