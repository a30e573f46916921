"""The LLM stub's ``/control/script``: a scripted answer, verbatim, to the requests a test names.

The stub runs in this process (``make_server`` on a free port of 127.0.0.1), so these tests need no
Hindsight server; they drive it with the same helper the Hindsight tests use (:class:`LLMStub`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.hindsight_fixtures import LLMStub, LLMStubError
from tests.llmstub.server import SCRIPT_FIELDS
from tests.support.stub import running_stub

MARKER = "unit-7f3a-marker"
TRUNCATED = '{"cards": [{"text": "Nextcloud runs version 28.0 on host atl'


@pytest.fixture(scope="module")
def stub_url() -> Iterator[str]:
    """One stub for this module, on a free port of 127.0.0.1."""
    with running_stub() as url:
        yield url


@pytest.fixture
def stub(stub_url: str) -> Iterator[LLMStub]:
    """The stub's controls; every fault and script is disarmed after the test."""
    with httpx.Client(timeout=10.0) as client:
        try:
            yield LLMStub(stub_url, client)
        finally:
            client.post(f"{stub_url}/control/clear", json={}).raise_for_status()


def structured_body(answer: str) -> dict[str, Any]:
    """A structured-output request as Hindsight's reflect sends it (its answer to extract from)."""
    schema = {"type": "object", "properties": {"cards": {"type": "array", "items": {"type": "string"}}}}
    return {
        "model": "m",
        "messages": [
            {"role": "system", "content": "You are a precise data extraction assistant."},
            {
                "role": "user",
                "content": f'ANSWER TO EXTRACT FROM:\n"""\n{answer}\n"""\n\nJSON Schema:\n```json\n'
                f"{json.dumps(schema)}\n```",
            },
        ],
    }


def other_body(text: str) -> dict[str, Any]:
    """A chat request of no Hindsight task: what Dreamer's own LLM client sends."""
    return {
        "model": "m",
        "messages": [
            {"role": "system", "content": "Answer with JSON only, following the given schema."},
            {"role": "user", "content": text},
        ],
        "max_tokens": 64,
    }


def reflect_body(text: str) -> dict[str, Any]:
    """A reflect turn: a request offering tools."""
    tool = {"type": "function", "function": {"name": "done", "parameters": {"type": "object"}}}
    return {"model": "m", "messages": [{"role": "user", "content": text}], "tools": [tool]}


def chat(stub: LLMStub, body: dict[str, Any]) -> dict[str, Any]:
    response = stub._client.post(f"{stub.base_url}/v1/chat/completions", json=body)
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


def choice(answer: dict[str, Any]) -> dict[str, Any]:
    (only,) = answer["choices"]
    picked: dict[str, Any] = only
    return picked


def post_script(stub: LLMStub, payload: dict[str, Any]) -> httpx.Response:
    return stub._client.post(f"{stub.base_url}/control/script", json=payload)


class TestScriptedAnswer:
    def test_a_matching_request_gets_the_content_verbatim_with_finish_reason_and_usage(
        self, stub: LLMStub
    ) -> None:
        """The scripted content is the assistant message, byte for byte, with the finish reason asked
        for and an approximate usage (4 characters a token) as for any answer."""
        content = '{"cards": [{"text": "Host atlas runs backups.", "kind": "fact", "source_ids": ["u-1"]}]}'
        stub.script(match=MARKER, content=content)
        answer = chat(stub, other_body(f"Summarise the units of {MARKER}."))
        picked = choice(answer)
        assert picked["message"] == {"role": "assistant", "content": content}
        assert picked["finish_reason"] == "stop"
        usage = answer["usage"]
        assert usage["prompt_tokens"] > 0 and usage["completion_tokens"] > 0
        assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
        assert usage["completion_tokens"] == max(1, len(json.dumps(picked["message"])) // 4)

    def test_truncated_json_with_finish_reason_length(self, stub: LLMStub) -> None:
        """An answer cut at max_tokens: invalid JSON as given, finish_reason "length"."""
        stub.script(match=MARKER, content=TRUNCATED, finish_reason="length", kind="other")
        picked = choice(chat(stub, other_body(f"Summarise {MARKER}.")))
        assert picked["message"]["content"] == TRUNCATED and picked["finish_reason"] == "length"
        with pytest.raises(json.JSONDecodeError):
            json.loads(picked["message"]["content"])

    def test_a_request_without_the_marker_gets_the_normal_answer(self, stub: LLMStub) -> None:
        """Only requests whose body holds the match are scripted; others are answered as ever."""
        stub.script(match=MARKER, content="SCRIPTED")
        unscripted = choice(chat(stub, other_body("Summarise the units of another test.")))
        assert unscripted["message"]["content"] == "ok" and unscripted["finish_reason"] == "stop"

    def test_kind_limits_the_script_to_one_request_kind(self, stub: LLMStub) -> None:
        """A structured-only script leaves other kinds with the same marker alone."""
        stub.script(match=MARKER, content='{"cards": []}', kind="structured")
        assert choice(chat(stub, other_body(f"About {MARKER}.")))["message"]["content"] == "ok"
        scripted = choice(chat(stub, structured_body(f"- Host atlas of {MARKER} runs backups. [f1]")))
        assert scripted["message"]["content"] == '{"cards": []}'

    def test_a_reflect_turn_is_answered_with_content_and_no_tool_call(self, stub: LLMStub) -> None:
        """A scripted reflect turn is plain content (no tool call), finish reason as asked."""
        stub.script(match=MARKER, content="Nothing to report.", kind="reflect")
        picked = choice(chat(stub, reflect_body(f"What does {MARKER} hold?")))
        assert picked["message"] == {"role": "assistant", "content": "Nothing to report."}
        assert picked["finish_reason"] == "stop"

    def test_count_answers_that_many_requests_then_the_normal_answer(self, stub: LLMStub) -> None:
        """count=2 scripts two requests; the third is answered as ever."""
        stub.script(match=MARKER, content="SCRIPTED", count=2)
        answers = [choice(chat(stub, other_body(f"q {MARKER}")))["message"]["content"] for _ in range(3)]
        assert answers == ["SCRIPTED", "SCRIPTED", "ok"]

    def test_the_first_armed_script_answers(self, stub: LLMStub) -> None:
        """Two scripts for one request: the first armed answers until its budget is spent."""
        stub.script(match=MARKER, content="FIRST", count=1)
        stub.script(match=MARKER, content="SECOND")
        answers = [choice(chat(stub, other_body(f"q {MARKER}")))["message"]["content"] for _ in range(2)]
        assert answers == ["FIRST", "SECOND"]

    def test_embeddings_are_never_scripted(self, stub: LLMStub) -> None:
        """A script answers chat requests only: an embeddings request with the marker is embedded."""
        stub.script(match=MARKER, content="SCRIPTED")
        response = stub._client.post(f"{stub.base_url}/v1/embeddings", json={"input": [MARKER]})
        assert response.status_code == 200 and len(response.json()["data"][0]["embedding"]) == 384

    def test_the_request_log_marks_the_scripted_answer(self, stub: LLMStub) -> None:
        """The log names the script's match and the finish reason; a normal answer has none."""
        stub.script(match=MARKER, content=TRUNCATED, finish_reason="length", count=1)
        seq = stub.last_seq()
        chat(stub, other_body(f"q {MARKER}"))
        chat(stub, other_body(f"q {MARKER}"))
        first, second = stub.requests(seq)
        assert (first["kind"], first["scripted"], first["detail"]) == ("other", MARKER, "scripted:length")
        assert (second["scripted"], second["detail"]) == (None, "")


class TestScriptAndFaults:
    def test_a_fault_with_a_status_answers_first_and_the_script_keeps_its_budget(self, stub: LLMStub) -> None:
        """An error fault on the same request answers with its status; the script's one answer is
        still there for the next request."""
        stub.fault(kind="chat", status=500, count=1, match=MARKER)
        stub.script(match=MARKER, content="SCRIPTED", count=1)
        failed = stub._client.post(f"{stub.base_url}/v1/chat/completions", json=other_body(f"q {MARKER}"))
        assert failed.status_code == 500
        assert choice(chat(stub, other_body(f"q {MARKER}")))["message"]["content"] == "SCRIPTED"

    def test_a_delay_only_fault_delays_the_scripted_answer(self, stub: LLMStub) -> None:
        """A tagging fault (delay only) still lets the script answer, and both show in the log."""
        stub.fault(kind="chat", status=None, delay_s=0.001, match=MARKER)
        stub.script(match=MARKER, content="SCRIPTED")
        seq = stub.last_seq()
        assert choice(chat(stub, other_body(f"q {MARKER}")))["message"]["content"] == "SCRIPTED"
        (entry,) = stub.requests(seq)
        assert entry["fault"] and entry["match"] == MARKER and entry["scripted"] == MARKER


class TestClear:
    def test_clear_disarms_only_the_owners_scripts(self, stub: LLMStub) -> None:
        """An owner's clear leaves another owner's script armed; a clear without owner disarms all."""
        with httpx.Client(timeout=10.0) as client:
            other = LLMStub(stub.base_url, client)
            stub.script(match=MARKER, content="MINE")
            other.script(match=f"{MARKER}-other", content="THEIRS")
            stub.clear()
            assert choice(chat(stub, other_body(f"q {MARKER} ")))["message"]["content"] == "ok"
            assert choice(chat(stub, other_body(f"q {MARKER}-other")))["message"]["content"] == "THEIRS"
            stub._client.post(f"{stub.base_url}/control/clear", json={}).raise_for_status()
            assert choice(chat(stub, other_body(f"q {MARKER}-other")))["message"]["content"] == "ok"


class TestValidation:
    @pytest.mark.parametrize(
        ("change", "message"),
        [
            ({"match": None}, "match must be a non-empty string"),
            ({"match": ""}, "match must be a non-empty string"),
            ({"content": None}, "content must be a string"),
            ({"content": {"cards": []}}, "content must be a string"),
            ({"finish_reason": "tool_calls"}, "finish_reason must be one of stop, length"),
            ({"kind": "embeddings"}, "kind must be one of"),
            ({"kind": "chat"}, "kind must be one of"),
            ({"count": 0}, "count must be a positive number"),
            ({"count": -2}, "count must be a positive number"),
            ({"count": "3"}, "count must be a positive number"),
            ({"owner": 7}, "owner must be a string"),
            ({"status": 500}, "unknown field(s) status"),
        ],
    )
    def test_an_invalid_script_is_refused_saying_what_to_send(
        self, stub: LLMStub, change: dict[str, Any], message: str
    ) -> None:
        """Each wrong field gets HTTP 400 and a message naming what the stub expects."""
        payload = {"match": MARKER, "content": "x", **change}
        response = post_script(stub, payload)
        assert response.status_code == 400
        assert message in response.json()["error"]

    def test_a_refused_script_arms_nothing(self, stub: LLMStub) -> None:
        """After a 400 the stub answers as ever."""
        assert post_script(stub, {"match": MARKER, "content": "x", "count": 0}).status_code == 400
        assert choice(chat(stub, other_body(f"q {MARKER}")))["message"]["content"] == "ok"

    def test_the_helper_raises_with_the_stubs_explanation(self, stub: LLMStub) -> None:
        """LLMStub.script passes the stub's refusal on as LLMStubError."""
        with pytest.raises(LLMStubError, match="finish_reason must be one of"):
            stub.script(match=MARKER, content="x", finish_reason="eos")

    def test_the_helper_sends_every_field_the_stub_takes(self) -> None:
        """LLMStub.script's payload is exactly the stub's script fields (no field is lost or added)."""
        sent: list[dict[str, Any]] = []

        def record(request: httpx.Request) -> httpx.Response:
            sent.append(json.loads(request.content))
            return httpx.Response(200, json={"ok": True})

        with httpx.Client(transport=httpx.MockTransport(record)) as client:
            LLMStub("http://stub", client).script(match=MARKER, content="x", finish_reason="length")
        (payload,) = sent
        assert sorted(payload) == sorted(SCRIPT_FIELDS)
        assert payload["finish_reason"] == "length" and payload["kind"] == "all" and payload["count"] == -1
