"""A backend that forwards each call to another one, for observing or intercepting calls.

:class:`ForwardingBackend` satisfies :class:`~dreamer.backends.base.MemoryBackend` by passing every
method, with all its arguments, to ``inner``. Every call goes through one hook,
:meth:`ForwardingBackend._forward`, which receives the operation name and the pending call: a
subclass that counts or times calls overrides the hook alone; one that changes what a method does
(fails it, retries it, records its bank) overrides that method and calls ``super()``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping, Sequence
from datetime import datetime
from typing import Any, TypeVar

from dreamer.backends.base import (
    BankActivity,
    Budget,
    MemoryBackend,
    MemoryUnit,
    RecallItem,
    ReflectResult,
    RetainItem,
    RetainResult,
    TagsMatch,
)

__all__ = ["ForwardingBackend"]

T = TypeVar("T")


class ForwardingBackend:
    """A :class:`MemoryBackend` that hands every call to ``inner`` through :meth:`_forward`."""

    def __init__(self, inner: MemoryBackend) -> None:
        self.inner = inner
        self.name = inner.name
        self.reflect_uses_llm = inner.reflect_uses_llm

    async def _forward(self, operation: str, call: Awaitable[T]) -> T:
        """Await ``call``, the inner backend's ``operation``; override to observe every call."""
        return await call

    async def activity(self, bank_ids: Sequence[str]) -> dict[str, BankActivity]:
        return await self._forward("activity", self.inner.activity(bank_ids))

    async def list_units_since(
        self,
        bank_id: str,
        since: datetime | None,
        *,
        exclude_tags: Sequence[str] = (),
        fact_types: Sequence[str] | None = None,
    ) -> list[MemoryUnit]:
        return await self._forward(
            "list_units_since",
            self.inner.list_units_since(bank_id, since, exclude_tags=exclude_tags, fact_types=fact_types),
        )

    async def recall(
        self,
        bank_id: str,
        query: str,
        *,
        budget: Budget = "mid",
        max_tokens: int = 4096,
        types: Sequence[str] | None = None,
        tags: Sequence[str] | None = None,
        tags_match: TagsMatch = "any",
        limit: int | None = None,
    ) -> list[RecallItem]:
        return await self._forward(
            "recall",
            self.inner.recall(
                bank_id,
                query,
                budget=budget,
                max_tokens=max_tokens,
                types=types,
                tags=tags,
                tags_match=tags_match,
                limit=limit,
            ),
        )

    async def reflect(
        self,
        bank_id: str,
        query: str,
        *,
        budget: Budget = "low",
        response_schema: Mapping[str, Any] | None = None,
        tags: Sequence[str] | None = None,
        tags_match: TagsMatch = "any",
    ) -> ReflectResult:
        return await self._forward(
            "reflect",
            self.inner.reflect(
                bank_id,
                query,
                budget=budget,
                response_schema=response_schema,
                tags=tags,
                tags_match=tags_match,
            ),
        )

    async def retain(self, bank_id: str, items: Sequence[RetainItem]) -> RetainResult:
        return await self._forward("retain", self.inner.retain(bank_id, items))

    async def consolidate(self, bank_id: str) -> None:
        await self._forward("consolidate", self.inner.consolidate(bank_id))

    async def aclose(self) -> None:
        await self._forward("aclose", self.inner.aclose())


# Checked by mypy: the class keeps every method of the protocol with a compatible signature.
_satisfies_protocol: type[MemoryBackend] = ForwardingBackend
