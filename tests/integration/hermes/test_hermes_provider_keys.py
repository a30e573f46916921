"""The API key never reaches what the Hermes provider hands back or logs: a real server on
127.0.0.1 that echoes the Authorization header in its error bodies or redirects to an address
carrying the key (URL-quoted, base64). No Hindsight is needed: every answer is a refusal, which is
the point (tests/support/hostile_server.py)."""

from __future__ import annotations

import base64
import logging
from collections.abc import Iterator

import pytest

from dreamer.hermes_provider.memory import DreamerMemory
from dreamer.hermes_provider.settings import settings_from_hermes_json
from tests.support.hostile_server import Answer, HostileServer

KEY = "hs-Pq8Wm3Zx7Lc2Vb9Nr4Tk6Yd1Gh5Jf0"
PIECES = {KEY[i : i + 8] for i in range(len(KEY) - 7)}

ANSWERS = {
    "echo": Answer.echo(),
    "redirect-query": Answer.redirect("https://login.example/cb?token={auth}"),
    "redirect-path": Answer.redirect(
        "http://127.0.0.1:9/" + base64.urlsafe_b64encode(f"Bearer {KEY}".encode()).decode(), status=307
    ),
}


@pytest.fixture(params=sorted(ANSWERS))
def memory(request: pytest.FixtureRequest) -> Iterator[DreamerMemory]:
    server = HostileServer(ANSWERS[request.param])
    data = {"api_url": server.url, "apiKey": KEY, "bank_id": "main", "banks": {"main": {"bankId": "m"}}}
    settings = settings_from_hermes_json(data, source="config.json", environ={})
    made = DreamerMemory(settings)
    yield made
    made.close(timeout_s=2.0)
    server.close()


def leaked(text: str) -> list[str]:
    return sorted(p for p in PIECES if p in text)


def test_tool_results_prefetch_and_logs_hold_no_piece_of_the_key(
    memory: DreamerMemory, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.DEBUG):
        answers = [
            memory.call_tool("hindsight_retain", {"content": "The CI runner is ci07."}),
            memory.call_tool("hindsight_recall", {"query": "CI runner"}),
            memory.call_tool("hindsight_reflect", {"query": "CI runner"}),
            memory.prefetch("which host runs CI?"),
            memory.system_prompt_block(),
        ]
        memory.sync_turn("Where does CI run?", "On ci07.", "s1")
        memory.close(timeout_s=5.0)
    assert "error" in answers[0]
    assert leaked("\n".join(answers)) == []
    assert leaked(caplog.text) == []
