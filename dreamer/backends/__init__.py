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

__all__ = [
    "BankActivity",
    "BasedOn",
    "MemoryBackend",
    "MemoryUnit",
    "RecallItem",
    "ReflectResult",
    "RetainItem",
    "RetainResult",
]
