"""The contract's values as Hindsight's request bodies and paths, and Hindsight's parsed answers
(:mod:`dreamer.backends.hindsight.models`) as the contract's values.

Pure. Kept apart from the backend class, which sends the requests and walks the pages, so that
what Dreamer sends and how it reads an answer can be checked field by field. What each field is
for, and what was learnt about the 1.1.0 API: ``docs/design/hindsight.md``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from dreamer.backends.base import (
    BasedOn,
    Budget,
    MemoryUnit,
    RecallItem,
    ReflectResult,
    RetainItem,
    TagsMatch,
)
from dreamer.backends.hindsight.models import RecallHit, ReflectAnswer, UnitRow
from dreamer.errors import PermanentBackendError
from dreamer.llm.usage import usage_from

__all__ = [
    "bank_path",
    "iso",
    "recall_body",
    "recall_item",
    "reflect_body",
    "reflect_result",
    "retain_body",
    "unit_from_row",
    "utc",
]


def _clamp01(value: float) -> float:
    # Hindsight's fused final score can exceed 1 (recorded: 1.0999...) and a cosine similarity can
    # be negative; the contract promises [0, 1]. Clamping keeps the server's order, which ranks.
    return min(1.0, max(0.0, value))


def utc(moment: datetime) -> datetime:
    """``moment`` in UTC; a naive datetime is read as UTC, as Hindsight itself reads one."""
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def iso(moment: datetime) -> str:
    """ISO-8601 in UTC with microseconds and a ``Z``."""
    return utc(moment).isoformat(timespec="microseconds").replace("+00:00", "Z")


def bank_path(bank_id: str) -> str:
    """The bank's API path, its id quoted whole (a "/" in an id must not reach another path)."""
    return f"/v1/default/banks/{quote(bank_id, safe='')}"


def unit_from_row(row: UnitRow, bank_id: str) -> MemoryUnit:
    """A listed memory unit; ``updated_at`` is reported as ``created_at`` (the listing walks it)."""
    return MemoryUnit(
        id=row.id,
        bank_id=bank_id,
        text=row.text,
        fact_type=row.fact_type,
        created_at=row.updated_at,
        mentioned_at=row.mentioned_at,
        document_id=row.document_id,
        context=row.context or None,
        tags=tuple(row.tags or ()),
        metadata=dict(row.metadata or {}),
        proof_count=row.proof_count,
        source_memory_ids=tuple(row.source_memory_ids or ()),
    )


def _with_tags(body: dict[str, Any], tags: Sequence[str] | None, tags_match: TagsMatch) -> dict[str, Any]:
    """``body`` with the tag filter, sent only when asked for (the server's default is "any")."""
    if tags is not None:
        body["tags"] = list(tags)
    if tags is not None or tags_match != "any":
        body["tags_match"] = tags_match
    return body


def recall_body(
    query: str,
    *,
    budget: Budget,
    max_tokens: int,
    types: Sequence[str] | None,
    tags: Sequence[str] | None,
    tags_match: TagsMatch,
) -> dict[str, Any]:
    """The body of ``POST .../memories/recall``."""
    body: dict[str, Any] = {
        "query": query,
        "budget": budget,
        "max_tokens": max_tokens,
        "include": {"entities": None},
    }
    if types is not None:
        body["types"] = list(types)
    return _with_tags(body, tags, tags_match)


def recall_item(hit: RecallHit, bank_id: str) -> RecallItem:
    """A recall hit, its scores clamped to the contract's [0, 1]."""
    semantic = hit.scores.semantic
    return RecallItem(
        id=hit.id,
        bank_id=bank_id,
        text=hit.text,
        fact_type=hit.type,
        score=_clamp01(hit.scores.final),
        semantic=None if semantic is None else _clamp01(semantic),
        document_id=hit.document_id,
        tags=tuple(hit.tags or ()),
        metadata=dict(hit.metadata or {}),
        mentioned_at=hit.mentioned_at,
    )


def reflect_body(
    query: str,
    *,
    budget: Budget,
    response_schema: Mapping[str, Any] | None,
    tags: Sequence[str] | None,
    tags_match: TagsMatch,
) -> dict[str, Any]:
    """The body of ``POST .../reflect``, asking for the facts it used."""
    body: dict[str, Any] = {"query": query, "budget": budget, "include": {"facts": {}}}
    if response_schema is not None:
        body["response_schema"] = dict(response_schema)
    return _with_tags(body, tags, tags_match)


def reflect_result(answer: ReflectAnswer, query: str) -> ReflectResult:
    """A reflect's answer, with the facts it was based on and the tokens it used."""
    facts = answer.based_on.memories if answer.based_on is not None else []
    return ReflectResult(
        text=answer.text,
        structured=answer.structured_output,
        structured_error=answer.structured_output_error,
        based_on=tuple(
            BasedOn(id=f.id, text=f.text, document_id=f.document_id, fact_type=f.type or "")
            for f in facts
            if f.id is not None  # allowed by the server's schema, useless as provenance
        ),
        used_llm=True,
        usage=usage_from(answer.usage, prompt_text=query, answer_text=answer.text),
    )


def retain_body(index: int, item: RetainItem) -> dict[str, Any]:
    """One item of ``POST .../memories``; metadata values that are not strings are refused before
    anything is sent, naming the item."""
    bad = {k: v for k, v in item.metadata.items() if not isinstance(k, str) or not isinstance(v, str)}
    if bad:
        shown = ", ".join(f"{k!r}: {type(v).__name__}" for k, v in bad.items())
        raise PermanentBackendError(
            f"retain item {index}: metadata values must be strings ({shown}); convert them with str()",
            operation="retain",
            detail="metadata values must be strings",
        )
    body: dict[str, Any] = {
        "content": item.content,
        "metadata": dict(item.metadata),
        "tags": list(item.tags),
        "observation_scopes": item.observation_scope,
    }
    if item.context is not None:
        body["context"] = item.context
    if item.timestamp is not None:
        body["timestamp"] = iso(item.timestamp)
    if item.document_id is not None:
        body["document_id"] = item.document_id
    return body
