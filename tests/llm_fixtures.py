"""Pytest fixtures for tests against the real small LLM started by ``scripts/llm-dev up``.

The server (llama.cpp's OpenAI-compatible server, Qwen2.5-Coder-1.5B-Instruct Q4_K_M, on 127.0.0.1) is
found through the environment that ``scripts/llm-dev up`` prints (and writes to ``$DREAMER_LLM_HOME/env``):
``DREAMER_TEST_LLM_URL`` (the OpenAI base URL, ending in ``/v1``) and ``DREAMER_TEST_LLM_MODEL``. The
fixtures skip the test when the URL is missing.

Each answer costs seconds to a minute on 2 cores: tests share answers through module-scoped fixtures
rather than asking again, and ask with ``temperature`` 0 so an answer is the same every run.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

LLM_URL_VAR = "DREAMER_TEST_LLM_URL"
LLM_MODEL_VAR = "DREAMER_TEST_LLM_MODEL"
#: Set by ``scripts/hindsight-dev up`` only when its Hindsight runs on a real LLM (DREAMER_HINDSIGHT_LLM_URL).
HINDSIGHT_LLM_MODEL_VAR = "DREAMER_TEST_HINDSIGHT_LLM_MODEL"
_HOW_TO_START = (
    "start the development LLM with `scripts/llm-dev up`, then load its environment: "
    'set -a; . "${DREAMER_LLM_HOME:-.llm-dev}/env"; set +a'
)
#: Seconds one answer may take: a long prompt is read at about 30 tokens/s on 2 busy cores.
ANSWER_TIMEOUT_S = 600.0


def llm_url_or_skip() -> str:
    """``DREAMER_TEST_LLM_URL`` without a trailing slash, or skip the calling test saying how to start one."""
    value = os.environ.get(LLM_URL_VAR, "").strip()
    if not value:
        pytest.skip(f"{LLM_URL_VAR} is not set: {_HOW_TO_START}")
    return value.rstrip("/")


@dataclass(frozen=True)
class DevLLM:
    """The development LLM server: its OpenAI base URL and the model it serves."""

    base_url: str
    model: str

    def chat(
        self,
        messages: list[dict[str, str]],
        *,
        max_tokens: int,
        schema: dict[str, Any] | None = None,
        schema_name: str = "answer",
    ) -> dict[str, Any]:
        """One non-streaming ``/chat/completions`` answer (greedy), JSON-schema constrained when given one."""
        body: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "max_tokens": max_tokens,
            "temperature": 0,
        }
        if schema is not None:
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": schema_name, "strict": True, "schema": schema},
            }
        response = httpx.post(f"{self.base_url}/chat/completions", json=body, timeout=ANSWER_TIMEOUT_S)
        response.raise_for_status()
        answer: dict[str, Any] = response.json()
        return answer

    def model_ids(self) -> list[str]:
        """The ids ``/models`` lists."""
        response = httpx.get(f"{self.base_url}/models", timeout=30.0)
        response.raise_for_status()
        return [str(m["id"]) for m in response.json()["data"]]


def hindsight_llm_model_or_skip() -> str:
    """The model of a Hindsight test server that runs on a real LLM, or skip saying how to start one."""
    value = os.environ.get(HINDSIGHT_LLM_MODEL_VAR, "").strip()
    if not value:
        pytest.skip(
            f"{HINDSIGHT_LLM_MODEL_VAR} is not set: start Hindsight on the development LLM with "
            "DREAMER_HINDSIGHT_LLM_URL=$DREAMER_TEST_LLM_URL "
            "DREAMER_HINDSIGHT_LLM_MODEL=$DREAMER_TEST_LLM_MODEL scripts/hindsight-dev up "
            "(with its own DREAMER_HINDSIGHT_HOME if others share the default one), then load its env"
        )
    return value


@pytest.fixture(scope="module")
def dev_llm() -> DevLLM:
    """The development LLM; the model is ``DREAMER_TEST_LLM_MODEL``, else the first one the server lists."""
    url = llm_url_or_skip()
    model = os.environ.get(LLM_MODEL_VAR, "").strip()
    if not model:
        ids = DevLLM(url, "").model_ids()
        if not ids:
            pytest.fail(f"the LLM server at {url} lists no model")
        model = ids[0]
    return DevLLM(url, model)
