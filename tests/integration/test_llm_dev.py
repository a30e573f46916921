"""The development LLM (``scripts/llm-dev up``) answers as Dreamer needs: a real model, schema-constrained.

Two answers in all (well under a minute on 2 idle cores): the summary cards of a short memory list,
shared by the tests that examine it, and one deliberately truncated answer. Every test skips unless
``DREAMER_TEST_LLM_URL`` is set.

The last test retains through a Hindsight server whose LLM is this model (``scripts/hindsight-dev up``
with ``DREAMER_HINDSIGHT_LLM_URL``): it skips unless ``DREAMER_TEST_HINDSIGHT_LLM_MODEL`` says one runs,
and takes minutes (Hindsight's fact-extraction prompt alone is about 2,300 tokens).
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from dreamer.rollup.cards import CARDS_SCHEMA, SourceUnit, reflect_query
from tests import hindsight_fixtures, llm_fixtures
from tests.llm_fixtures import DevLLM

# The shared fixtures, bound here so this module needs no conftest.
dev_llm = llm_fixtures.dev_llm
hindsight_url = hindsight_fixtures.hindsight_url
hindsight_api_key = hindsight_fixtures.hindsight_api_key
fresh_bank_id = hindsight_fixtures.fresh_bank_id

pytestmark = [pytest.mark.llm, pytest.mark.slow]
jsonschema = pytest.importorskip("jsonschema")

UNITS = [
    SourceUnit("u-nc-1", "Nextcloud runs version 28.0 on host atlas behind nginx."),
    SourceUnit("u-bk-1", "The homelab backups run nightly at 02:00 with restic to the NAS named vault."),
    SourceUnit("u-nc-2", "On atlas, Nextcloud is at version 28.0 and sits behind nginx."),
    SourceUnit("u-pref", "Maria prefers tea over coffee in the morning."),
]
MAX_CARDS = 5


def summary_messages() -> list[dict[str, str]]:
    """The summarising question Dreamer asks, as one user turn."""
    return [
        {"role": "system", "content": "Answer with JSON only, following the given schema."},
        {"role": "user", "content": reflect_query(UNITS, "", MAX_CARDS)},
    ]


@pytest.fixture(scope="module")
def cards_answer(dev_llm: DevLLM) -> dict[str, Any]:
    """One schema-constrained summary of UNITS, shared by the tests below."""
    return dev_llm.chat(summary_messages(), max_tokens=768, schema=dict(CARDS_SCHEMA), schema_name="cards")


def test_server_lists_the_model(dev_llm: DevLLM) -> None:
    assert dev_llm.model in dev_llm.model_ids()


def test_cards_answer_is_json_matching_the_schema(cards_answer: dict[str, Any]) -> None:
    choice = cards_answer["choices"][0]
    assert choice["finish_reason"] == "stop", choice
    parsed = json.loads(choice["message"]["content"])
    jsonschema.validate(parsed, dict(CARDS_SCHEMA))
    cards = parsed["cards"]
    assert cards, "a real model summarises four durable facts into at least one card"
    assert all(card["text"].strip() for card in cards)
    known = {u.id for u in UNITS}
    cited = {i for card in cards for i in card["source_ids"]}
    assert cited, "the cards cite the memories they came from"
    assert cited <= known, f"invented source ids: {sorted(cited - known)}"


def test_cards_answer_reports_token_usage(cards_answer: dict[str, Any]) -> None:
    usage = cards_answer["usage"]
    assert usage["prompt_tokens"] > 50, usage  # the question alone is well over 50 tokens
    assert usage["completion_tokens"] > 0, usage
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"], usage


def test_truncated_answer_reports_length(dev_llm: DevLLM) -> None:
    answer = dev_llm.chat(summary_messages(), max_tokens=6, schema=dict(CARDS_SCHEMA), schema_name="cards")
    choice = answer["choices"][0]
    assert choice["finish_reason"] == "length", choice
    assert answer["usage"]["completion_tokens"] <= 6, answer["usage"]
    with pytest.raises(json.JSONDecodeError):
        json.loads(choice["message"]["content"])  # cut off mid-object: the caller must check


@pytest.mark.hindsight
def test_hindsight_on_the_real_llm_stores_the_facts_it_extracts(
    hindsight_url: str, hindsight_api_key: str, fresh_bank_id: str
) -> None:
    """A sync retain through Hindsight on the real model stores memory units carrying both facts."""
    llm_fixtures.hindsight_llm_model_or_skip()
    headers = {"Authorization": f"Bearer {hindsight_api_key}"}
    item = {
        "content": "Alice works at Google on the search team. Alice prefers Python over Go.",
        "context": "team chat",
        "document_id": "doc-0",
    }
    with httpx.Client(base_url=hindsight_url, headers=headers, timeout=1800.0) as client:
        bank = f"/v1/default/banks/{fresh_bank_id}"
        response = client.post(f"{bank}/memories", json={"items": [item], "async": False})
        assert response.status_code == 200, response.text
        listed = client.get(f"{bank}/memories/list", params={"limit": 100})
        listed.raise_for_status()
    texts = [u["text"] for u in listed.json()["items"]]
    assert texts, f"the retain answered {response.json()} but stored no memory unit"
    joined = " ".join(texts)
    assert "Google" in joined, texts
    assert "Python" in joined, texts
