"""Reads across several banks with every result labelled, and retain, through the bank policy.

:class:`BankRouter` adds a backend to :class:`~dreamer.readside.policy.BankPolicy`. Every refusal
is raised while resolving names, before any request is sent. Multi-bank reads query the banks
concurrently; a bank that fails (any :class:`~dreamer.errors.BackendError`, or the optional
per-bank deadline) is reported as missing with the reason, and the other banks still answer.

Merging recall hits (:func:`merge_recalls`) folds duplicates across banks and keeps every label:

- identical normalised text (:func:`~dreamer.text.normalize_text`) always folds;
- the same ``document_id`` folds only when every bank returned at most one hit for it. One retained
  document can become several distinct facts (Hindsight extracts facts per document), and those
  must not collapse into one line;
- the folded hit shows the best-scoring member's text, and the document id of the best-scoring
  member that has one (Hindsight's derived observations carry none, and they can outrank the fact
  they came from); hits are ranked by score (descending), then
  by the position in the queried order of their first label, then by id, so equal input gives an
  equal answer.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

import anyio

from dreamer.backends.base import BasedOn, Budget, MemoryBackend, RecallItem, ReflectResult, RetainItem
from dreamer.config import Config
from dreamer.errors import (
    BackendError,
    PermanentBackendError,
    PolicyError,
    ProtocolError,
    TransientBackendError,
)
from dreamer.readside.policy import BankPolicy, BankTarget
from dreamer.text import normalize_text

__all__ = [
    "BankRouter",
    "LabelledRecall",
    "LabelledReflection",
    "MissingBank",
    "RecallAnswer",
    "ReflectAnswer",
    "RetainAnswer",
    "failure_reason",
    "merge_recalls",
]

_T = TypeVar("_T")

#: Reflect is the expensive call (minutes on a small model); ask for little unless told otherwise.
DEFAULT_REFLECT_BUDGET: Budget = "low"
_DETAIL_CHARS = 300


# --- results ----------------------------------------------------------------------------------


def _one_line(text: str) -> str:
    return " ".join(text.split())


@dataclass(frozen=True, slots=True)
class MissingBank:
    """A bank that did not answer: ``reason`` is short (``timeout``, ``HTTP 503``), ``detail`` full."""

    alias: str
    bank_id: str
    reason: str
    detail: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"alias": self.alias, "bank_id": self.bank_id, "reason": self.reason, "detail": self.detail}


def _render_missing(missing: Sequence[MissingBank]) -> str:
    return "(missing: " + "; ".join(f"{m.alias} — {m.reason}" for m in missing) + ")"


@dataclass(frozen=True, slots=True)
class LabelledRecall:
    """A recall hit, possibly folded from several banks; ``labels`` are their aliases, in read order."""

    labels: tuple[str, ...]
    id: str
    bank_id: str
    text: str
    score: float
    fact_type: str
    document_id: str | None = None
    ids: tuple[str, ...] = ()
    bank_ids: tuple[str, ...] = ()
    mentioned_at: datetime | None = None

    def render(self) -> str:
        """``[code,ops] The text on one line``."""
        return f"[{','.join(self.labels)}] {_one_line(self.text)}"

    def to_json(self) -> dict[str, Any]:
        return {
            "labels": list(self.labels),
            "id": self.id,
            "bank_id": self.bank_id,
            "text": self.text,
            "score": self.score,
            "fact_type": self.fact_type,
            "document_id": self.document_id,
            "ids": list(self.ids),
            "bank_ids": list(self.bank_ids),
            "mentioned_at": self.mentioned_at.isoformat() if self.mentioned_at else None,
        }


@dataclass(frozen=True, slots=True)
class RecallAnswer:
    """The merged answer of a read across banks, and the banks that could not answer."""

    query: str
    banks: tuple[str, ...]
    items: tuple[LabelledRecall, ...]
    missing: tuple[MissingBank, ...] = ()

    @property
    def complete(self) -> bool:
        """True when every bank answered."""
        return not self.missing

    def render(self) -> str:
        """One ``[label] text`` line per hit, then ``(missing: bank — reason)`` when a bank failed."""
        lines = [item.render() for item in self.items]
        if not self.items:
            answered = [b for b in self.banks if b not in {m.alias for m in self.missing}]
            if answered:
                lines.append(f"(nothing found in {', '.join(answered)})")
        if self.missing:
            lines.append(_render_missing(self.missing))
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        return {
            "query": self.query,
            "banks": list(self.banks),
            "items": [item.to_json() for item in self.items],
            "missing": [m.to_json() for m in self.missing],
        }


@dataclass(frozen=True, slots=True)
class LabelledReflection:
    """One bank's reflect answer."""

    label: str
    bank_id: str
    text: str
    based_on: tuple[BasedOn, ...] = ()
    used_llm: bool = True

    def render(self) -> str:
        """``[label] answer``; further lines of the answer are indented under it."""
        lines = self.text.strip().splitlines() or [""]
        indent = " " * (len(self.label) + 3)
        rest = [indent + line if line else "" for line in lines[1:]]
        return "\n".join([f"[{self.label}] {lines[0]}", *rest])

    def to_json(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "bank_id": self.bank_id,
            "text": self.text,
            "used_llm": self.used_llm,
            "based_on": [
                {"id": b.id, "text": b.text, "document_id": b.document_id, "fact_type": b.fact_type}
                for b in self.based_on
            ],
        }


@dataclass(frozen=True, slots=True)
class ReflectAnswer:
    """One reflect per bank, labelled, in the order asked, and the banks that could not answer."""

    query: str
    banks: tuple[str, ...]
    answers: tuple[LabelledReflection, ...]
    missing: tuple[MissingBank, ...] = ()

    @property
    def complete(self) -> bool:
        return not self.missing

    def render(self) -> str:
        parts = [answer.render() for answer in self.answers]
        if self.missing:
            parts.append(_render_missing(self.missing))
        return "\n".join(parts)

    def to_json(self) -> dict[str, Any]:
        return {
            "query": self.query,
            "banks": list(self.banks),
            "answers": [a.to_json() for a in self.answers],
            "missing": [m.to_json() for m in self.missing],
        }


@dataclass(frozen=True, slots=True)
class RetainAnswer:
    """Where a retain went and how many items the backend stored."""

    alias: str
    bank_id: str
    items_count: int

    def render(self) -> str:
        return f"retained {self.items_count} item(s) into [{self.alias}] ({self.bank_id})"

    def to_json(self) -> dict[str, Any]:
        return {"alias": self.alias, "bank_id": self.bank_id, "items_count": self.items_count}


# --- merging (pure) ---------------------------------------------------------------------------


def merge_recalls(
    per_bank: Sequence[tuple[str, Sequence[RecallItem]]], *, limit: int | None = None
) -> tuple[LabelledRecall, ...]:
    """Merge the hits of several banks (given in read order, as ``(label, hits)``) into one ranking.

    See the module docstring for when hits fold and how they are ranked.
    """
    entries: list[tuple[int, str, RecallItem]] = [
        (order, label, item) for order, (label, items) in enumerate(per_bank) for item in items
    ]
    parent = list(range(len(entries)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    def union(i: int, j: int) -> None:
        ri, rj = find(i), find(j)
        if ri != rj:
            parent[max(ri, rj)] = min(ri, rj)

    by_text: dict[str, int] = {}
    by_document: dict[str, list[int]] = {}
    for index, (_, _, item) in enumerate(entries):
        key = normalize_text(item.text)
        if key:
            union(by_text.setdefault(key, index), index)
        if item.document_id:
            by_document.setdefault(item.document_id, []).append(index)
    for members in by_document.values():
        banks = [entries[i][0] for i in members]
        # A document with several hits in one bank was split into distinct facts: keep them apart.
        if len(set(banks)) == len(banks) and len(banks) > 1:
            for i in members[1:]:
                union(members[0], i)

    groups: dict[int, list[int]] = {}
    for index in range(len(entries)):
        groups.setdefault(find(index), []).append(index)

    merged: list[tuple[tuple[float, int, str], LabelledRecall]] = []
    for members in groups.values():
        by_rank = sorted(members, key=lambda i: (-entries[i][2].score, entries[i][0], entries[i][2].id))
        _, _, item = entries[by_rank[0]]
        ordered = sorted(members, key=lambda i: (entries[i][0], i))
        labels = tuple(dict.fromkeys(entries[i][1] for i in ordered))
        first_order = entries[ordered[0]][0]
        document_id = next((entries[i][2].document_id for i in by_rank if entries[i][2].document_id), None)
        labelled = LabelledRecall(
            labels=labels,
            id=item.id,
            bank_id=item.bank_id,
            text=item.text,
            score=item.score,
            fact_type=item.fact_type,
            document_id=document_id,
            ids=tuple(dict.fromkeys(entries[i][2].id for i in ordered)),
            bank_ids=tuple(dict.fromkeys(entries[i][2].bank_id for i in ordered)),
            mentioned_at=item.mentioned_at,
        )
        merged.append(((-item.score, first_order, item.id), labelled))
    merged.sort(key=lambda pair: pair[0])
    ranked = tuple(labelled for _, labelled in merged)
    return ranked if limit is None else ranked[: max(limit, 0)]


def failure_reason(exc: BaseException) -> str:
    """A short reason for a failed bank: ``timeout``, ``HTTP 503``, ``unavailable``, ``bad answer``."""
    if isinstance(exc, TimeoutError):
        return "timeout"
    if isinstance(exc, BackendError) and exc.status is not None:
        return f"HTTP {exc.status}"
    if "timed out" in str(exc).lower():
        return "timeout"
    if isinstance(exc, TransientBackendError):
        return "unavailable"
    if isinstance(exc, PermanentBackendError):
        return "refused"
    if isinstance(exc, ProtocolError):
        return "bad answer"
    return "failed"


# --- the router (policy + backend) -----------------------------------------------------------


class BankRouter:
    """Recall, reflect and retain by bank alias, with the policy checked before anything is sent.

    ``bank_timeout_s`` bounds each bank's call in a multi-bank read (None: the backend's own
    timeouts only). The router does not own the backend: close it yourself.
    """

    def __init__(
        self,
        config: Config,
        backend: MemoryBackend,
        *,
        profile: str | None = None,
        bank_timeout_s: float | None = None,
    ) -> None:
        self.policy = BankPolicy(config, profile)
        self.backend = backend
        self.bank_timeout_s = bank_timeout_s

    @property
    def profile(self) -> str | None:
        return self.policy.profile

    async def recall(
        self,
        query: str,
        *,
        banks: Sequence[str] | None = None,
        limit: int | None = None,
        budget: Budget | None = None,
        max_tokens: int = 4096,
    ) -> RecallAnswer:
        """Recall from the named banks (the default bank when None), merged and labelled."""
        targets = self.policy.resolve_many([None] if banks is None else banks, "recall")
        return await self._recall_targets(query, targets, limit=limit, budget=budget, max_tokens=max_tokens)

    async def read_union(
        self,
        query: str,
        *,
        limit: int | None = None,
        budget: Budget | None = None,
        max_tokens: int = 4096,
    ) -> RecallAnswer:
        """Recall from the profile's read-union (own bank, upstream, shared), merged and labelled."""
        aliases = self.policy.union_aliases()
        if not aliases:
            raise PolicyError(
                f"profile {self.profile!r} has no enabled bank to read: enable one of "
                f"{', '.join(self.policy.config.read_union(self.profile or ''))}"
            )
        targets = self.policy.resolve_many(aliases, "recall")
        return await self._recall_targets(query, targets, limit=limit, budget=budget, max_tokens=max_tokens)

    async def reflect_each(
        self, query: str, banks: Sequence[str] | None = None, *, budget: Budget | None = None
    ) -> ReflectAnswer:
        """One reflect per named bank (the default bank when None), labelled, failures isolated."""
        targets = self.policy.resolve_many([None] if banks is None else banks, "reflect")
        reflect_budget = budget or DEFAULT_REFLECT_BUDGET

        def call(target: BankTarget) -> Callable[[], Awaitable[ReflectResult]]:
            return lambda: self.backend.reflect(target.bank_id, query, budget=reflect_budget)

        results, missing = await self._gather(targets, call)
        answers = tuple(
            LabelledReflection(t.alias, t.bank_id, r.text, tuple(r.based_on), r.used_llm)
            for t, r in zip(targets, results, strict=True)
            if r is not None
        )
        return ReflectAnswer(query, tuple(t.alias for t in targets), answers, missing)

    async def retain(
        self,
        content: str,
        *,
        bank: str | None = None,
        context: str | None = None,
        tags: Sequence[str] = (),
        metadata: Mapping[str, str] | None = None,
        document_id: str | None = None,
        timestamp: datetime | None = None,
    ) -> RetainAnswer:
        """Store one item in a writable bank (the default bank when None). Backend errors propagate."""
        target = self.policy.resolve(bank, "retain")
        item = RetainItem(
            content=content,
            context=context,
            timestamp=timestamp,
            metadata=dict(metadata or {}),
            tags=tuple(tags),
            document_id=document_id,
        )
        result = await self.backend.retain(target.bank_id, [item])
        return RetainAnswer(target.alias, target.bank_id, result.items_count)

    # --- internals -----------------------------------------------------------------------

    async def _recall_targets(
        self,
        query: str,
        targets: Sequence[BankTarget],
        *,
        limit: int | None,
        budget: Budget | None,
        max_tokens: int,
    ) -> RecallAnswer:
        def call(target: BankTarget) -> Callable[[], Awaitable[list[RecallItem]]]:
            return lambda: self.backend.recall(
                target.bank_id, query, budget=budget or target.budget, max_tokens=max_tokens, limit=limit
            )

        results, missing = await self._gather(targets, call)
        per_bank = [(t.alias, r) for t, r in zip(targets, results, strict=True) if r is not None]
        items = merge_recalls(per_bank, limit=limit)
        return RecallAnswer(query, tuple(t.alias for t in targets), items, missing)

    async def _gather(
        self,
        targets: Sequence[BankTarget],
        make_call: Callable[[BankTarget], Callable[[], Awaitable[_T]]],
    ) -> tuple[list[_T | None], tuple[MissingBank, ...]]:
        """Run one call per bank concurrently; a BackendError or deadline makes that bank missing."""
        results: list[_T | None] = [None] * len(targets)
        failures: list[MissingBank | None] = [None] * len(targets)
        unexpected: list[BaseException] = []

        async def one(index: int, target: BankTarget) -> None:
            call = make_call(target)
            try:
                if self.bank_timeout_s is None:
                    results[index] = await call()
                else:
                    with anyio.fail_after(self.bank_timeout_s):
                        results[index] = await call()
            except (BackendError, TimeoutError) as exc:
                detail = " ".join(str(exc).split())[:_DETAIL_CHARS] or type(exc).__name__
                failures[index] = MissingBank(target.alias, target.bank_id, failure_reason(exc), detail)
            except Exception as exc:  # a bug, not a bank failure: re-raised below, unwrapped
                unexpected.append(exc)

        async with anyio.create_task_group() as group:
            for index, target in enumerate(targets):
                group.start_soon(one, index, target)
        if unexpected:
            raise unexpected[0]
        return results, tuple(m for m in failures if m is not None)
