"""Proves the Hindsight test harness: a real hindsight-api 1.1.0 behind the deterministic LLM stub.

Needs ``scripts/hindsight-dev up`` and its environment; every test skips when that is missing.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests import hindsight_fixtures
from tests.hindsight_fixtures import LLMStub

# The shared fixtures, bound here so this module runs whether or not a conftest provides them.
hindsight_url = hindsight_fixtures.hindsight_url
hindsight_api_key = hindsight_fixtures.hindsight_api_key
hindsight_admission_url = hindsight_fixtures.hindsight_admission_url
llm_stub = hindsight_fixtures.llm_stub
fresh_bank_id = hindsight_fixtures.fresh_bank_id

pytestmark = pytest.mark.hindsight
jsonschema = pytest.importorskip("jsonschema")

ALICE = "Alice works at Google on the search team. Alice prefers Python over Go."
BOB = "Bob went hiking in the Alps. Bob loved the view from the summit."
CARDS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "cards": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "text": {"type": "string", "minLength": 1},
                    "kind": {"type": "string", "enum": ["fact", "preference", "decision", "procedure"]},
                    "source_ids": {"type": "array", "items": {"type": "string"}},
                },
                "required": ["text", "kind", "source_ids"],
            },
        }
    },
    "required": ["cards"],
}


@pytest.fixture
def hindsight(hindsight_url: str, hindsight_api_key: str) -> Iterator[httpx.Client]:
    """An httpx client for the test server, authenticated with the test API key."""
    headers = {"Authorization": f"Bearer {hindsight_api_key}"}
    with httpx.Client(base_url=hindsight_url, headers=headers, timeout=120.0) as client:
        yield client


def bank_path(bank_id: str, suffix: str = "") -> str:
    return f"/v1/default/banks/{bank_id}{suffix}"


def retain_sync(client: httpx.Client, bank_id: str, *contents: str) -> httpx.Response:
    items = [
        {"content": text, "document_id": f"doc-{n}", "context": "team chat"}
        for n, text in enumerate(contents)
    ]
    return client.post(bank_path(bank_id, "/memories"), json={"items": items, "async": False})


def list_units(client: httpx.Client, bank_id: str, **params: Any) -> list[dict[str, Any]]:
    response = client.get(bank_path(bank_id, "/memories/list"), params={"limit": 100, **params})
    response.raise_for_status()
    items: list[dict[str, Any]] = response.json()["items"]
    return items


class TestRetainListRecall:
    def test_sync_batch_retain_stores_one_world_fact_per_sentence(
        self, hindsight: httpx.Client, fresh_bank_id: str
    ) -> None:
        """A synchronous batch retain succeeds and every sentence becomes a listed world fact."""
        response = retain_sync(hindsight, fresh_bank_id, ALICE, BOB)

        assert response.status_code == 200, response.text
        assert response.json()["items_count"] == 2
        facts = {u["text"] for u in list_units(hindsight, fresh_bank_id, type="world")}
        assert facts == {
            "Alice works at Google on the search team.",
            "Alice prefers Python over Go.",
            "Bob went hiking in the Alps.",
            "Bob loved the view from the summit.",
        }

    def test_recall_ranks_the_fact_sharing_the_query_words_first(
        self, hindsight: httpx.Client, fresh_bank_id: str
    ) -> None:
        """Recall over stub embeddings puts the fact that shares the query's words on top."""
        assert retain_sync(hindsight, fresh_bank_id, ALICE, BOB).status_code == 200

        response = hindsight.post(
            bank_path(fresh_bank_id, "/memories/recall"), json={"query": "Which language does Alice prefer?"}
        )

        assert response.status_code == 200, response.text
        assert response.json()["results"][0]["text"] == "Alice prefers Python over Go."


class TestReflect:
    def test_reflect_with_response_schema_returns_cards_citing_stored_units(
        self, hindsight: httpx.Client, fresh_bank_id: str
    ) -> None:
        """Reflect with a response_schema returns schema-valid cards citing units of the bank."""
        assert retain_sync(hindsight, fresh_bank_id, ALICE).status_code == 200

        response = hindsight.post(
            bank_path(fresh_bank_id, "/reflect"),
            json={"query": "What do you know about Alice?", "response_schema": CARDS_SCHEMA},
        )

        assert response.status_code == 200, response.text
        body = response.json()
        assert body["structured_output_error"] is None
        structured = body["structured_output"]
        jsonschema.validate(structured, CARDS_SCHEMA)
        assert {c["text"] for c in structured["cards"]} == {
            "Alice works at Google on the search team.",
            "Alice prefers Python over Go.",
        }
        unit_ids = {u["id"] for u in list_units(hindsight, fresh_bank_id)}
        cited = {i for c in structured["cards"] for i in c["source_ids"]}
        assert cited and cited <= unit_ids

    def test_reflect_over_a_bank_without_memories_returns_no_cards(
        self, hindsight: httpx.Client, fresh_bank_id: str
    ) -> None:
        """Reflect over an empty bank answers 200 with an empty card list, not an invented card."""
        assert hindsight.put(bank_path(fresh_bank_id), json={"name": "empty"}).status_code == 200

        response = hindsight.post(
            bank_path(fresh_bank_id, "/reflect"),
            json={"query": "What do you know about Alice?", "response_schema": CARDS_SCHEMA},
        )

        assert response.status_code == 200, response.text
        assert response.json()["structured_output"] == {"cards": []}


class TestAuth:
    def test_wrong_api_key_is_rejected_with_401(self, hindsight_url: str) -> None:
        """A request carrying a wrong API key is refused with 401 and Hindsight's error detail."""
        response = httpx.get(
            f"{hindsight_url}/v1/default/banks", headers={"Authorization": "Bearer not-the-key"}, timeout=30.0
        )

        assert response.status_code == 401
        assert response.json() == {"detail": "Authentication failed: Invalid API key"}


class TestInjectedFaults:
    @pytest.mark.slow
    def test_stub_chat_500_makes_sync_retain_fail_with_500_and_store_nothing(
        self, hindsight: httpx.Client, fresh_bank_id: str, llm_stub: LLMStub
    ) -> None:
        """With every chat call failing 500, a sync retain answers 500 (after retries) and stores nothing."""
        llm_stub.fault(kind="chat", status=500, match=fresh_bank_id)

        response = retain_sync(hindsight, fresh_bank_id, f"{ALICE} Marker {fresh_bank_id}.")

        assert response.status_code == 500
        assert "Fact extraction failed" in response.json()["detail"]
        llm_stub.clear()
        units = hindsight.get(bank_path(fresh_bank_id, "/memories/list"))
        assert units.status_code == 404 or units.json()["items"] == []

    @pytest.mark.slow
    def test_concurrent_sync_retain_gets_503_with_retry_after_from_admission_control(
        self, hindsight_admission_url: str, hindsight_api_key: str, fresh_bank_id: str, llm_stub: LLMStub
    ) -> None:
        """While a slow sync retain holds the admission server's only retain slot, a second is refused 503."""
        headers = {"Authorization": f"Bearer {hindsight_api_key}"}
        admission = httpx.Client(base_url=hindsight_admission_url, headers=headers, timeout=120.0)
        since = llm_stub.last_seq()
        llm_stub.fault(kind="extract", status=None, delay_s=5.0, count=1, match=fresh_bank_id)
        first: dict[str, httpx.Response] = {}

        def hold_the_slot() -> None:
            # Another test run's retain may have the slot for a moment: wait for our turn.
            for _ in range(20):
                first["response"] = retain_sync(admission, fresh_bank_id, f"{ALICE} Marker {fresh_bank_id}.")
                if first["response"].status_code != 503:
                    return
                time.sleep(1.0)

        holder = threading.Thread(target=hold_the_slot, daemon=True)
        holder.start()
        for _ in range(300):  # until the first retain's extraction call is held in the stub
            if any(r["match"] == fresh_bank_id and r["status"] is None for r in llm_stub.requests(since)):
                break
            time.sleep(0.1)
        else:
            pytest.fail("the first retain never reached the LLM stub")

        second = retain_sync(admission, f"{fresh_bank_id}-2", BOB)
        holder.join(timeout=120)
        admission.close()

        assert second.status_code == 503
        assert "at capacity for 'retain'" in second.json()["detail"]
        assert int(second.headers["Retry-After"]) >= 1
        assert first["response"].status_code == 200
