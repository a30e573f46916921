"""Memory backends: the contract (:mod:`.base`) and its two implementations."""

from __future__ import annotations

from dreamer.backends.base import (
    BankActivity,
    BasedOn,
    MemoryBackend,
    MemoryUnit,
    RecallItem,
    ReflectResult,
    RetainItem,
    RetainResult,
)
from dreamer.config import Config
from dreamer.embeddings import Embedder

__all__ = [
    "BankActivity",
    "BasedOn",
    "MemoryBackend",
    "MemoryUnit",
    "RecallItem",
    "ReflectResult",
    "RetainItem",
    "RetainResult",
    "open_backend",
]


def open_backend(config: Config, *, embedder: Embedder | None = None) -> MemoryBackend:
    """The backend the configuration asks for (``backend.kind``).

    ``embedder`` makes the embedded store's recall hybrid (full text and vectors); Hindsight embeds
    on its own server and ignores it.
    """
    if config.backend.kind == "hindsight":
        from dreamer.backends.hindsight.backend import HindsightBackend

        return HindsightBackend(config.backend.hindsight)
    from dreamer.backends.embedded.backend import EmbeddedBackend

    return EmbeddedBackend(config.embedded_path, embedder=embedder)
