"""An OpenAI-compatible ``/v1/chat/completions`` server as the summariser's model (llama.cpp's
server, Ollama, vLLM, LiteLLM, a hosted API).

One POST per call, asking for JSON that follows a schema (``response_format: json_schema``).
Failures are the typed errors of :mod:`dreamer.errors` with operation ``llm``: timeouts,
connection errors, 429 and 5xx are transient (``Retry-After`` read), other statuses permanent with
the server's message, a body that is not a chat completion a
:class:`~dreamer.errors.ProtocolError`. Retrying is the caller's (:func:`dreamer.retry.call_with_retry`),
so a run releases the slot lock while it backs off. An answer cut at the token cap is no error:
its ``finish_reason`` says so and the caller reads what it holds.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, ValidationError

from dreamer.config.llm import LLMConfig
from dreamer.errors import ProtocolError
from dreamer.llm.usage import TokenUsage, usage_from
from dreamer.log import SecretRedactor
from dreamer.retry import ServerCalls

if TYPE_CHECKING:
    import httpx

__all__ = ["ChatAnswer", "OpenAIChat", "open_chat"]

OPERATION = "llm"


@dataclass(frozen=True, slots=True)
class ChatAnswer:
    """A completion: the text, why it ended (``stop``, ``length``, ...) and the tokens it used."""

    text: str
    finish_reason: str
    usage: TokenUsage

    @property
    def truncated(self) -> bool:
        """The answer was cut at the token cap: JSON in it may be incomplete."""
        return self.finish_reason == "length"

    def json(self) -> Any:
        """The answer parsed as JSON (a fenced ```json block too), or None when it does not parse."""
        text = self.text.strip()
        if text.startswith("```"):
            text = text.strip("`").removeprefix("json").strip()
        try:
            return json.loads(text)
        except ValueError:
            return None


class _Message(BaseModel):
    model_config = ConfigDict(extra="ignore")

    content: str | None = None


class _Choice(BaseModel):
    model_config = ConfigDict(extra="ignore")

    message: _Message
    finish_reason: str | None = None


class _Completion(BaseModel):
    model_config = ConfigDict(extra="ignore")

    choices: list[_Choice]
    usage: dict[str, Any] | None = None


class OpenAIChat:
    """Chat completions through ``POST {base_url}/v1/chat/completions``; ``transport`` replaces
    the network (tests)."""

    def __init__(self, config: LLMConfig, *, transport: httpx.AsyncBaseTransport | None = None) -> None:
        self._config = config
        self._endpoint = config.endpoint
        secret = config.api_key.get_secret_value() if config.api_key is not None else ""
        self._redactor = SecretRedactor([secret])
        headers = {"Accept": "application/json", "User-Agent": "dreamer"}
        if secret:
            headers["Authorization"] = f"Bearer {secret}"
        import httpx  # loaded with the first model: a run without [llm] never imports it

        self._client = httpx.AsyncClient(
            headers=headers,
            timeout=httpx.Timeout(config.timeout_s, connect=min(config.timeout_s, 10.0)),
            transport=transport or httpx.AsyncHTTPTransport(trust_env=False),
            # A redirect could carry the key to another host: never followed.
            follow_redirects=False,
            trust_env=False,
        )
        self._calls = ServerCalls(
            what="the LLM server",
            endpoint=self._endpoint,
            table="llm",
            url_key="base_url",
            operation=OPERATION,
            timeout_s=config.timeout_s,
            slow_fix="lower the profile's top_n",
            redact=self._redact,
        )

    def __repr__(self) -> str:
        return f"OpenAIChat(url={self._endpoint!r}, model={self._config.model!r})"

    __str__ = __repr__

    @property
    def name(self) -> str:
        """How status and reports name the model: ``openai:<model>``."""
        return f"openai:{self._config.model}"

    async def complete(
        self,
        messages: Sequence[Mapping[str, str]],
        *,
        schema: Mapping[str, Any] | None = None,
        schema_name: str = "answer",
        max_tokens: int | None = None,
    ) -> ChatAnswer:
        """One completion of ``messages``, its answer constrained to ``schema`` when given."""
        body: dict[str, Any] = {
            "model": self._config.model,
            "messages": [dict(m) for m in messages],
            "temperature": self._config.temperature,
            "max_tokens": max_tokens or self._config.max_answer_tokens,
        }
        if schema is not None:
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": schema_name, "schema": dict(schema), "strict": True},
            }
        response = await self._calls.post(self._client, body)
        prompt = "\n".join(m.get("content", "") for m in messages)
        return self._parse(response, prompt)

    async def aclose(self) -> None:
        await self._client.aclose()

    def _parse(self, response: httpx.Response, prompt: str) -> ChatAnswer:
        try:
            completion = _Completion.model_validate_json(response.content)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "the body"
            raise ProtocolError(
                f"the LLM server at {self._endpoint} answered a body that is not a chat completion "
                f"({where}: {first['msg']}); check that llm.base_url points at an OpenAI-compatible "
                "/v1/chat/completions server",
                status=response.status_code,
                operation=OPERATION,
            ) from None
        if not completion.choices:
            raise ProtocolError(
                f"the LLM server at {self._endpoint} answered a chat completion without choices",
                status=response.status_code,
                operation=OPERATION,
            )
        choice = completion.choices[0]
        text = choice.message.content or ""
        return ChatAnswer(
            text=text,
            finish_reason=choice.finish_reason or "stop",
            usage=usage_from(completion.usage, prompt_text=prompt, answer_text=text),
        )

    def _redact(self, text: str) -> str:
        return self._redactor.redact_text(text)


def open_chat(config: LLMConfig) -> OpenAIChat | None:
    """The chat model ``[llm]`` names, or None for ``provider = "none"``."""
    return OpenAIChat(config) if config.provider == "openai" else None
