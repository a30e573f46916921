"""The [llm] chat client against the LLM stub on 127.0.0.1: answers, usage, a cut answer, and
every failure typed (transient, permanent, garbage), the key never shown nor sent elsewhere."""

from __future__ import annotations

import socket
from pathlib import Path

import httpx
import pytest

from dreamer.config import Config
from dreamer.errors import PermanentBackendError, ProtocolError, TransientBackendError
from dreamer.llm.openai import OpenAIChat
from dreamer.llm.usage import TokenUsage, estimate_tokens, usage_from
from dreamer.rollup.cards import CARDS_SCHEMA
from tests.hindsight_fixtures import LLMStub
from tests.support.configs import config_data, parsed
from tests.support.hostile_server import Answer, HostileServer

KEY = "llm-test-Qm3Zx8Lp2Vb7Rt4N"
MESSAGES = [{"role": "user", "content": "Summarise: [u1] Nate has 2 turtles. marker-llm-client"}]


def config_for(url: str, **extra: object) -> Config:
    def change(data: dict[str, object]) -> None:
        data["llm"] = {"provider": "openai", "base_url": url, "model": "stub", "api_key_env": "K", **extra}

    return parsed(config_data(), change, base_dir=Path("/tmp"), environ={"K": KEY})


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class TestAnswers:
    async def test_a_schema_answer_with_the_servers_usage(self, stub_url: str, stub: LLMStub) -> None:
        """A json_schema request comes back as JSON with the server's token counts, not estimates."""
        stub.script(match="marker-llm-client", content='{"cards": []}', kind="other")
        chat = OpenAIChat(config_for(stub_url).llm)
        try:
            answer = await chat.complete(MESSAGES, schema=CARDS_SCHEMA, schema_name="cards")
        finally:
            await chat.aclose()
        assert answer.json() == {"cards": []} and answer.finish_reason == "stop"
        assert answer.usage.prompt > 0 and answer.usage.completion > 0 and not answer.usage.estimated
        sent = stub.requests()[-1]
        assert sent["kind"] == "other" and sent["scripted"] == "marker-llm-client"

    async def test_a_cut_answer_says_so(self, stub_url: str, stub: LLMStub) -> None:
        """An answer cut at its token cap is no error: truncated, and its JSON reads as None."""
        stub.script(
            match="marker-llm-client", content='{"cards": [{"text": "Nate has 2 tur', finish_reason="length"
        )
        chat = OpenAIChat(config_for(stub_url).llm)
        try:
            answer = await chat.complete(MESSAGES, schema=CARDS_SCHEMA)
        finally:
            await chat.aclose()
        assert answer.truncated and answer.json() is None


class TestFailures:
    async def test_overload_is_transient_with_its_retry_after(self, stub_url: str, stub: LLMStub) -> None:
        """503 with Retry-After is a transient error carrying the delay."""
        stub.fault("other", 503, retry_after="7", count=1, match="marker-llm-client")
        chat = OpenAIChat(config_for(stub_url).llm)
        try:
            with pytest.raises(TransientBackendError) as caught:
                await chat.complete(MESSAGES)
        finally:
            await chat.aclose()
        assert caught.value.retry_after == 7.0 and caught.value.operation == "llm"

    async def test_a_refusal_is_permanent_and_names_the_key_setting(
        self, stub_url: str, stub: LLMStub
    ) -> None:
        """401 is permanent; the message says which setting to check and never holds the key."""
        stub.fault("other", 401, count=1, match="marker-llm-client")
        chat = OpenAIChat(config_for(stub_url).llm)
        try:
            with pytest.raises(PermanentBackendError) as caught:
                await chat.complete(MESSAGES)
        finally:
            await chat.aclose()
        assert "llm.api_key_env" in str(caught.value) and KEY not in str(caught.value)

    async def test_a_server_that_is_down_is_transient(self) -> None:
        """Nothing listening: a transient error naming the URL and the setting."""
        chat = OpenAIChat(config_for(f"http://127.0.0.1:{free_port()}").llm)
        try:
            with pytest.raises(TransientBackendError, match=r"llm\.base_url"):
                await chat.complete(MESSAGES)
        finally:
            await chat.aclose()

    async def test_a_body_that_is_no_completion_is_a_protocol_error(self) -> None:
        """A 200 whose body is not a chat completion (a transport-level fake: the stub always
        answers well-formed completions) is a ProtocolError, not a crash."""
        for body in (b"<html>hello</html>", b'{"choices": "x"}', b'{"choices": []}'):
            transport = httpx.MockTransport(lambda request, body=body: httpx.Response(200, content=body))
            chat = OpenAIChat(config_for("http://127.0.0.1:9").llm, transport=transport)
            try:
                with pytest.raises(ProtocolError):
                    await chat.complete(MESSAGES)
            finally:
                await chat.aclose()

    async def test_a_redirect_is_not_followed_so_the_key_stays_home(self) -> None:
        """A redirect to another host is refused (a transport-level fake: the stub does not
        redirect); the key was only ever sent to the configured host."""
        seen: list[httpx.Request] = []

        def handler(request: httpx.Request) -> httpx.Response:
            seen.append(request)
            return httpx.Response(307, headers={"Location": "http://evil.example/v1/chat/completions"})

        chat = OpenAIChat(config_for("http://127.0.0.1:9").llm, transport=httpx.MockTransport(handler))
        try:
            with pytest.raises(PermanentBackendError, match="redirects are not followed"):
                await chat.complete(MESSAGES)
        finally:
            await chat.aclose()
        assert [r.url.host for r in seen] == ["127.0.0.1"]


class TestTrickling:
    async def test_a_trickled_answer_is_cut_at_timeout_s(self) -> None:
        """A real server on 127.0.0.1 that sends 600 bytes one every 50 ms (30 s in all, no read
        waiting long): the completion fails as transient at timeout_s, naming it."""
        server = HostileServer(Answer(status=200, body="{" + " " * 598 + "}", trickle_s=0.05))
        chat = OpenAIChat(config_for(server.url + "/v1", timeout_s=1.0).llm)
        try:
            with pytest.raises(TransientBackendError, match="no whole answer within 1s"):
                await chat.complete(MESSAGES)
        finally:
            await chat.aclose()
            server.close()


class TestUsage:
    def test_reported_counts_are_taken_in_either_spelling(self) -> None:
        """OpenAI's and Hindsight's field names both read as the server's counts."""
        assert usage_from({"prompt_tokens": 10, "completion_tokens": 5}, prompt_text="", answer_text="x") == (
            TokenUsage(10, 5)
        )
        assert usage_from({"input_tokens": 3, "output_tokens": 4}, prompt_text="", answer_text="x") == (
            TokenUsage(3, 4)
        )

    @pytest.mark.parametrize(
        "usage",
        [
            None,
            "lots",
            {"prompt_tokens": -1, "completion_tokens": 2},
            {"prompt_tokens": True},
            {"input_tokens": 0, "output_tokens": 0},
            {"prompt_tokens": 10**13, "completion_tokens": 1},
        ],
    )
    def test_missing_or_garbage_counts_are_estimated(self, usage: object) -> None:
        """No usage, garbage, or zeros for an answer that has text: estimated from the texts."""
        got = usage_from(usage, prompt_text="a" * 40, answer_text="b" * 8)
        assert got == TokenUsage(estimate_tokens("a" * 40), estimate_tokens("b" * 8), estimated=True)
        assert got.total == 12
