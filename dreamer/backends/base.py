"""The ``MemoryBackend`` contract: what Dreamer needs from a memory store, and nothing destructive.

There is deliberately no delete, patch or bank-replace method. Results are frozen dataclasses; no
raw dicts leak out of a backend. Errors are the ``BackendError`` subclasses of :mod:`dreamer.errors`.

Semantics both backends share (the contract suite in ``tests/integration/test_backend_contract.py``
pins them):

- a bank exists once something was retained into it; reading an unknown bank is an empty bank;
- retaining an item whose ``document_id`` exists with identical content is a no-op; with different
  content it replaces that document (Dreamer never does this: card ids derive from content);
- ``list_units_since`` returns units with ``created_at >= since`` (inclusive), oldest first, ordered
  by ``(created_at, id)``; callers that need "strictly after" filter the boundary themselves;
- recall scores are in [0, 1], higher is better; ``semantic`` is an embedding similarity when the
  backend has one, else ``None``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, Protocol, runtime_checkable

from dreamer.llm.usage import TokenUsage

Budget = Literal["low", "mid", "high"]
TagsMatch = Literal["any", "all", "any_strict", "all_strict", "exact"]
ObservationScope = Literal["combined", "shared"]


@dataclass(frozen=True, slots=True)
class BankActivity:
    """How much a bank holds and when it was last written; ``exists`` is False for unknown banks."""

    bank_id: str
    unit_count: int
    last_write_at: datetime | None
    exists: bool = True


@dataclass(frozen=True, slots=True)
class MemoryUnit:
    """One stored memory unit (a fact, an experience, or an observation derived from others)."""

    id: str
    bank_id: str
    text: str
    fact_type: str
    created_at: datetime
    mentioned_at: datetime | None = None
    document_id: str | None = None
    context: str | None = None
    tags: tuple[str, ...] = ()
    metadata: Mapping[str, str] = field(default_factory=dict)
    proof_count: int = 1
    source_memory_ids: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class RecallItem:
    """One recall hit. ``score`` is the backend's final score; ``semantic`` the embedding similarity."""

    id: str
    bank_id: str
    text: str
    fact_type: str
    score: float
    semantic: float | None = None
    document_id: str | None = None
    tags: tuple[str, ...] = ()
    metadata: Mapping[str, str] = field(default_factory=dict)
    mentioned_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class BasedOn:
    """A memory a reflect answer was based on."""

    id: str
    text: str
    document_id: str | None = None
    fact_type: str = ""


@dataclass(frozen=True, slots=True)
class ReflectResult:
    """A reflect answer: free text, the structured output when a schema was given, and its sources."""

    text: str
    structured: Mapping[str, Any] | None = None
    structured_error: str | None = None
    based_on: tuple[BasedOn, ...] = ()
    used_llm: bool = True
    #: The LLM tokens the reflect used, as the server reported them (or estimated); None without an LLM.
    usage: TokenUsage | None = None


@dataclass(frozen=True, slots=True)
class RetainItem:
    """One item to store. Metadata values must be strings (Hindsight rejects anything else)."""

    content: str
    context: str | None = None
    timestamp: datetime | None = None
    metadata: Mapping[str, str] = field(default_factory=dict)
    tags: tuple[str, ...] = ()
    document_id: str | None = None
    observation_scope: ObservationScope = "combined"


@dataclass(frozen=True, slots=True)
class RetainResult:
    bank_id: str
    items_count: int


@runtime_checkable
class MemoryBackend(Protocol):
    """What the roll-up and the read side use. Implementations: Hindsight (HTTP) and embedded (SQLite)."""

    name: str
    #: True when ``reflect`` is backed by an LLM; False for an extractive reflect.
    reflect_uses_llm: bool

    async def activity(self, bank_ids: Sequence[str]) -> dict[str, BankActivity]:
        """Activity of many banks in one call; unknown banks come back with ``exists=False``."""
        ...

    async def list_units_since(
        self,
        bank_id: str,
        since: datetime | None,
        *,
        exclude_tags: Sequence[str] = (),
        fact_types: Sequence[str] | None = None,
    ) -> list[MemoryUnit]:
        """Units created at or after ``since`` (all when None), oldest first by (created_at, id)."""
        ...

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
        """Ranked hits for ``query``, best first."""
        ...

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
        """An answer synthesised from the bank (LLM-backed on Hindsight, extractive when embedded)."""
        ...

    async def retain(self, bank_id: str, items: Sequence[RetainItem]) -> RetainResult:
        """Store a batch synchronously; creates the bank on first write."""
        ...

    async def consolidate(self, bank_id: str) -> None:
        """Ask the backend to consolidate a bank (best effort; may be a no-op)."""
        ...

    async def aclose(self) -> None:
        """Release connections and threads."""
        ...


@runtime_checkable
class PreparesRecalls(Protocol):
    """A backend that answers a batch of recalls of one bank faster when told of them first (the
    embedded store streams its on-disk vectors once for all of them). Optional: the roll-up asks
    it of a backend that has it, and the recalls are the same either way."""

    async def prepare_recalls(self, bank_id: str, queries: Sequence[str], limit: int) -> None:
        """Ready the recalls of ``queries`` (each with ``limit``) that follow; never required."""
        ...
