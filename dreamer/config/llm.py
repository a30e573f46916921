"""``[llm]``: the language model the embedded store summarises with (docs/design/rollup.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, SecretStr, field_validator, model_validator

from dreamer.config.fields import StrictModel, http_url


class LLMConfig(StrictModel):
    """An OpenAI-compatible ``/v1/chat/completions`` server that writes summary cards.

    ``none`` (the default) keeps the extractive summariser on the embedded store; ``openai``
    calls ``base_url`` (llama.cpp's server, Ollama, vLLM, LiteLLM, a hosted API) with the same
    prompt and card schema as the reflect on Hindsight. A backend whose reflect has an LLM
    (Hindsight) summarises with its reflect and does not use this table.
    """

    provider: Literal["none", "openai"] = "none"
    base_url: str | None = None
    model: Annotated[str, Field(max_length=200)] = ""
    api_key_env: str | None = None
    api_key_file: Path | None = None
    #: One completion may take this long: a small model on a CPU needs minutes for ten units.
    timeout_s: Annotated[float, Field(gt=0, le=3600, allow_inf_nan=False)] = 300.0
    #: The longest answer asked for; an answer cut at it (``finish_reason = "length"``) is read
    #: for what it holds, and its units are carded extractively.
    max_answer_tokens: Annotated[int, Field(ge=64, le=32_768)] = 2048
    temperature: Annotated[float, Field(ge=0, le=2, allow_inf_nan=False)] = 0.0
    # Resolved from api_key_env / api_key_file at load time; never accepted from the file.
    api_key: SecretStr | None = Field(default=None, exclude=True)

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        return None if value is None else http_url(value)

    @field_validator("model")
    @classmethod
    def _printable(cls, value: str) -> str:
        if any(not ch.isprintable() for ch in value):
            raise ValueError("holds a control character; write the model's name as plain text")
        return value

    @model_validator(mode="after")
    def _provider_needs(self) -> LLMConfig:
        if self.provider == "openai":
            if self.base_url is None:
                raise ValueError(
                    "provider 'openai' needs llm.base_url, the server's base URL "
                    "(e.g. http://127.0.0.1:8080 or http://127.0.0.1:8080/v1)"
                )
            if not self.model:
                raise ValueError(
                    "provider 'openai' needs llm.model, the model name the server serves "
                    "(the one its /v1/models lists)"
                )
        return self

    @property
    def endpoint(self) -> str:
        """``base_url`` with ``/v1/chat/completions`` appended (a ``/v1`` written is not doubled)."""
        base = self.base_url or ""
        return f"{base}/chat/completions" if base.endswith("/v1") else f"{base}/v1/chat/completions"
