"""What an embedder is: texts in, unit vectors out, under one model id."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray


class EmbeddingsUnavailableError(ImportError):
    """An embedder was configured but the packages it needs are not installed. ``key`` is the
    setting that asked for them, which a configuration error names."""

    def __init__(self, message: str, *, key: str = "embeddings.provider") -> None:
        super().__init__(message)
        self.key = key


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into L2-normalised float32 vectors, one row per text, in order.

    ``model_id`` names the model and its vector space: two vectors are comparable only when they
    carry the same id, so the state file stores it beside every vector and re-embeds on a change.
    """

    @property
    def model_id(self) -> str: ...

    @property
    def dimension(self) -> int | None:
        """The vector length, once known (an HTTP embedder learns it from its first answer)."""

    async def embed(self, texts: Sequence[str]) -> NDArray[np.float32]: ...

    async def aclose(self) -> None: ...


def require_numpy(what: str) -> None:
    """Raise :class:`EmbeddingsUnavailableError` naming the extra to install when numpy is missing."""
    try:
        import numpy  # noqa: F401
    except ImportError:
        raise EmbeddingsUnavailableError(f"{what} needs numpy: pip install 'dreamer[embed]'") from None
