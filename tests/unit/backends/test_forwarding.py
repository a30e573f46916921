"""ForwardingBackend: every MemoryBackend method reaches the inner backend, arguments intact, via the hook."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar, cast

import pytest

from dreamer.backends.base import MemoryBackend, RetainItem
from dreamer.backends.embedded.backend import EmbeddedBackend
from dreamer.backends.forwarding import ForwardingBackend
from dreamer.errors import PermanentBackendError

T = TypeVar("T")

#: Every coroutine method of the protocol, read from the protocol itself so a new one is noticed.
PROTOCOL_METHODS = sorted(
    name for name, member in vars(MemoryBackend).items() if inspect.iscoroutinefunction(member)
)

SINCE = datetime(2024, 5, 1, tzinfo=UTC)

#: One call per protocol method, every optional argument set away from its default.
CALLS: dict[str, tuple[tuple[Any, ...], dict[str, Any]]] = {
    "activity": ((["a", "b"],), {}),
    "list_units_since": (("a", SINCE), {"exclude_tags": ["rolled"], "fact_types": ["world"]}),
    "recall": (
        ("a", "bees"),
        {
            "budget": "high",
            "max_tokens": 77,
            "types": ["experience"],
            "tags": ["t1"],
            "tags_match": "all_strict",
            "limit": 3,
        },
    ),
    "reflect": (
        ("a", "who keeps bees?"),
        {"budget": "mid", "response_schema": {"type": "object"}, "tags": ["t2"], "tags_match": "exact"},
    ),
    "retain": (("a", [RetainItem(content="Ada keeps bees.")]), {}),
    "consolidate": (("a",), {}),
    "aclose": ((), {}),
}


class CallRecorder:
    """An inner backend that only notes each call, so arguments no store acts on are visible too."""

    name = "recorder"
    reflect_uses_llm = True

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []
        self.answer = object()

    def __getattr__(self, operation: str) -> Callable[..., Awaitable[object]]:
        async def record(*args: Any, **kwargs: Any) -> object:
            self.calls.append((operation, args, kwargs))
            return self.answer

        return record


class HookLog(ForwardingBackend):
    """Notes the operation and the answer of every call that passes through the hook."""

    def __init__(self, inner: MemoryBackend) -> None:
        super().__init__(inner)
        self.seen: list[tuple[str, object]] = []

    async def _forward(self, operation: str, call: Awaitable[T]) -> T:
        answer = await call
        self.seen.append((operation, answer))
        return answer


class TestEveryMethod:
    def test_the_call_table_covers_the_protocol(self) -> None:
        """The calls below name exactly the protocol's methods, so none goes untested."""
        assert sorted(CALLS) == PROTOCOL_METHODS

    def test_name_and_reflect_kind_come_from_the_inner_backend(self) -> None:
        """The wrapper reports the inner backend's name and whether its reflect uses an LLM."""
        backend: MemoryBackend = ForwardingBackend(cast(MemoryBackend, CallRecorder()))
        assert (backend.name, backend.reflect_uses_llm) == ("recorder", True)
        assert isinstance(backend, MemoryBackend)

    @pytest.mark.parametrize("operation", sorted(CALLS))
    async def test_forwarded_with_its_arguments_through_the_hook(self, operation: str) -> None:
        """Each method reaches the inner backend once, with the same arguments, and passes the hook."""
        inner = CallRecorder()
        backend = HookLog(cast(MemoryBackend, inner))
        args, kwargs = CALLS[operation]

        await getattr(backend, operation)(*args, **kwargs)

        assert inner.calls == [(operation, args, kwargs)]
        assert backend.seen == [(operation, inner.answer)]

    async def test_defaults_are_the_protocol_defaults(self) -> None:
        """Arguments left out reach the inner backend as the protocol's own defaults."""
        inner = CallRecorder()
        backend = ForwardingBackend(cast(MemoryBackend, inner))
        await backend.recall("a", "q")
        await backend.reflect("a", "q")
        await backend.list_units_since("a", None)
        recall_defaults = {"budget": "mid", "max_tokens": 4096, "types": None, "tags": None}
        recall_defaults |= {"tags_match": "any", "limit": None}
        reflect_defaults = {"budget": "low", "response_schema": None, "tags": None, "tags_match": "any"}
        assert inner.calls == [
            ("recall", ("a", "q"), recall_defaults),
            ("reflect", ("a", "q"), reflect_defaults),
            ("list_units_since", ("a", None), {"exclude_tags": (), "fact_types": None}),
        ]


class TestOnTheEmbeddedStore:
    async def test_every_call_reaches_the_store_through_the_hook(self, tmp_path: Path) -> None:
        """On a real SQLite store each method acts, its filters apply, and the hook sees it in order."""
        inner = EmbeddedBackend(tmp_path / "m.sqlite3")
        backend = HookLog(inner)
        start = datetime.now(UTC) - timedelta(minutes=1)
        try:
            stored = await backend.retain(
                "a",
                [
                    RetainItem(content="Ada keeps bees in Leeds.", tags=("hobby",)),
                    RetainItem(content="Ada keeps a bees ledger at work.", tags=("work",)),
                ],
            )
            activity = await backend.activity(["a", "missing"])
            units = await backend.list_units_since("a", start, exclude_tags=["work"])
            hits = await backend.recall("a", "bees", tags=["work"], tags_match="all", limit=1)
            answer = await backend.reflect("a", "bees", response_schema={"type": "object"}, tags=["hobby"])
            await backend.consolidate("a")
        finally:
            await backend.aclose()

        assert stored.items_count == 2
        assert (activity["a"].unit_count, activity["missing"].exists) == (2, False)
        assert [u.text for u in units] == ["Ada keeps bees in Leeds."]
        assert [h.text for h in hits] == ["Ada keeps a bees ledger at work."]
        assert [b.text for b in answer.based_on] == ["Ada keeps bees in Leeds."]
        assert answer.structured_error is not None
        assert [operation for operation, _ in backend.seen] == [
            "retain",
            "activity",
            "list_units_since",
            "recall",
            "reflect",
            "consolidate",
            "aclose",
        ]
        assert backend.seen[3][1] == hits
        with pytest.raises(PermanentBackendError):
            await inner.recall("a", "bees")
