"""An OpenAI-compatible ``/v1/embeddings`` server as an embedder (llama.cpp, Ollama, vLLM, TEI,
LiteLLM, or the one a Hindsight install runs).

One POST per ``batch_size`` texts; the answer is checked strictly (one finite row per text, the
``index`` order complete, one dimension) and normalised. Failures are the typed errors of
:mod:`dreamer.errors` with operation ``embed``: timeouts, connection errors, 429 and 5xx are
transient (``Retry-After`` read), other statuses permanent with the server's message, an answer
that does not parse a :class:`~dreamer.errors.ProtocolError`. Retrying is the caller's
(:func:`dreamer.retry.call_with_retry`), so a run can release the slot lock while it backs off.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated

import httpx
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from dreamer.config.embeddings import EmbeddingsConfig
from dreamer.embeddings.base import require_numpy
from dreamer.errors import ProtocolError
from dreamer.log import SecretRedactor
from dreamer.retry import ServerCalls

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

OPERATION = "embed"
#: Statuses that mean "try again later"; every other status >= 300 will not work as sent.
#: A text longer than this is cut before it is sent: a card is far shorter, and a server refuses
#: (or truncates anyway) an input beyond its model's context.
MAX_TEXT_CHARS = 8000
#: The longest vector accepted (the largest published embedding models have 4096 dimensions).
MAX_DIMENSION = 16_384


class _Row(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)

    index: Annotated[int, Field(ge=0)]
    embedding: Annotated[list[float], Field(min_length=1, max_length=MAX_DIMENSION)]


class _Answer(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)

    data: list[_Row]


class OpenAIEmbedder:
    """Embeds through ``POST {url}/v1/embeddings``; ``transport`` replaces the network (tests)."""

    def __init__(
        self, config: EmbeddingsConfig, *, transport: httpx.AsyncBaseTransport | None = None
    ) -> None:
        require_numpy("embeddings.provider 'openai'")
        self._config = config
        self._endpoint = config.endpoint
        secret = config.api_key.get_secret_value() if config.api_key is not None else ""
        self._redactor = SecretRedactor([secret])
        headers = {"Accept": "application/json", "User-Agent": "dreamer"}
        if secret:
            headers["Authorization"] = f"Bearer {secret}"
        self._client = httpx.AsyncClient(
            headers=headers,
            timeout=httpx.Timeout(config.timeout_s),
            transport=transport or httpx.AsyncHTTPTransport(trust_env=False),
            follow_redirects=False,
            trust_env=False,
        )
        self._dimension: int | None = None
        self._calls = ServerCalls(
            what="the embeddings server",
            endpoint=self._endpoint,
            table="embeddings",
            url_key="url",
            operation=OPERATION,
            timeout_s=config.timeout_s,
            slow_fix="lower embeddings.batch_size",
            redact=self._redact,
        )

    def __repr__(self) -> str:
        return f"OpenAIEmbedder(url={self._endpoint!r}, model={self._config.model!r})"

    __str__ = __repr__

    @property
    def model_id(self) -> str:
        return f"openai:{self._config.model}"

    @property
    def dimension(self) -> int | None:
        return self._dimension

    async def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        import numpy as np

        from dreamer.embeddings.vectors import normalise

        batch = self._config.batch_size
        blocks = [await self._post(list(texts[i : i + batch])) for i in range(0, len(texts), batch)]
        if not blocks:
            return np.zeros((0, self._dimension or 0), dtype=np.float32)
        return normalise(np.concatenate(blocks, axis=0))

    async def aclose(self) -> None:
        await self._client.aclose()

    async def _post(self, texts: list[str]) -> NDArray[np.float32]:
        sent = [text[:MAX_TEXT_CHARS] if text.strip() else "." for text in texts]
        body = {"model": self._config.model, "input": sent}
        response = await self._calls.post(self._client, body)
        return self._parse(response, len(sent))

    def _parse(self, response: httpx.Response, expected: int) -> NDArray[np.float32]:
        import numpy as np

        def garbage(what: str) -> ProtocolError:
            return ProtocolError(
                f"the embeddings server at {self._endpoint} answered {what}; check that embeddings.url "
                "points at an OpenAI-compatible /v1/embeddings server",
                status=response.status_code,
                operation=OPERATION,
            )

        try:
            answer = _Answer.model_validate_json(response.content)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "the body"
            raise garbage(f"a body that is not an embeddings list ({where}: {first['msg']})") from None
        rows = answer.data
        if len(rows) != expected:
            raise garbage(f"{len(rows)} vectors for {expected} texts")
        if sorted(row.index for row in rows) != list(range(expected)):
            raise garbage("vectors whose index fields are not 0..n-1, each once")
        dimensions = {len(row.embedding) for row in rows}
        if len(dimensions) != 1:
            raise garbage(f"vectors of different lengths ({', '.join(map(str, sorted(dimensions)))})")
        dimension = dimensions.pop()
        if self._dimension is not None and dimension != self._dimension:
            raise garbage(
                f"vectors of {dimension} dimensions after earlier ones of {self._dimension} "
                "(the model behind embeddings.model changed; restart Dreamer to use the new one)"
            )
        matrix = np.empty((expected, dimension), dtype=np.float64)
        for row in rows:
            matrix[row.index] = row.embedding
        if not np.isfinite(matrix).all():
            raise garbage("a vector with a value that is not a finite number")
        # Scaled to unit length here, in float64: a value beyond float32's range (1e39) or below
        # it (1e-46) is a valid JSON number, and cast first it would become inf or 0, then NaN or a
        # zero vector after normalising, and be stored and compared as such.
        peaks = np.abs(matrix).max(axis=1, keepdims=True)
        if not (peaks > 0).all():
            raise garbage("a vector of length zero")
        matrix = matrix / peaks
        matrix = matrix / np.linalg.norm(matrix, axis=1, keepdims=True)
        self._dimension = dimension
        out: NDArray[np.float32] = matrix.astype(np.float32)
        return out

    def _redact(self, text: str) -> str:
        return self._redactor.redact_text(text)
