"""Named banks, their access policy, and reads across several banks with every result labelled.

Two layers:

- :class:`BankPolicy` is pure: from the configuration (and optionally the profile asking) it says
  which bank a name means and whether an operation may address it. Only the aliases under
  ``[banks]`` exist; a raw bank id is accepted only with ``topology.allow_raw_bank_ids = true``, and
  then only for reading. A disabled bank is invisible: it is reported as unknown. ``retain`` needs
  ``access = "read_write"`` and is never allowed into a roll-up bank (the global bank, or any
  profile's upstream): cards arrive there only through the roll-up. With a profile, another
  profile's own bank is read-only too: each profile bank is written by its own agent.
- :class:`BankRouter` adds a backend. Every refusal is a :class:`~dreamer.errors.PolicyError`
  raised while resolving names, before any request is sent. Multi-bank reads query the banks
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
from typing import Any, Literal, TypeVar

import anyio

from dreamer.backends.base import BasedOn, Budget, MemoryBackend, RecallItem, ReflectResult, RetainItem
from dreamer.config import Access, Config
from dreamer.errors import (
    BackendError,
    PermanentBackendError,
    PolicyError,
    ProtocolError,
    TransientBackendError,
)
from dreamer.text import normalize_text

__all__ = [
    "OPERATIONS",
    "BankInfo",
    "BankPolicy",
    "BankRouter",
    "BankTarget",
    "LabelledRecall",
    "LabelledReflection",
    "MissingBank",
    "Operation",
    "RecallAnswer",
    "ReflectAnswer",
    "RetainAnswer",
    "failure_reason",
    "merge_recalls",
    "render_banks",
]

Operation = Literal["recall", "reflect", "retain"]
OPERATIONS: tuple[Operation, ...] = ("recall", "reflect", "retain")

_T = TypeVar("_T")

#: Reflect is the expensive call (minutes on a small model); ask for little unless told otherwise.
DEFAULT_REFLECT_BUDGET: Budget = "low"
#: Recall budget of a raw bank id, which has no configuration of its own.
RAW_BANK_BUDGET: Budget = "mid"
_DETAIL_CHARS = 300


# --- the policy (pure) ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BankTarget:
    """A bank an operation was allowed to address. ``alias`` is the label results carry.

    For a raw bank id (``raw=True``) the alias is the bank id itself.
    """

    alias: str
    bank_id: str
    access: Access
    budget: Budget
    description: str = ""
    raw: bool = False


@dataclass(frozen=True, slots=True)
class BankInfo:
    """One configured bank as a listing shows it, with what the asking profile may do with it."""

    alias: str
    bank_id: str
    description: str
    access: Access
    budget: Budget
    enabled: bool
    roles: tuple[str, ...]
    readable: bool
    writable: bool
    retain_refusal: str | None

    def to_json(self) -> dict[str, Any]:
        return {
            "alias": self.alias,
            "bank_id": self.bank_id,
            "description": self.description,
            "access": self.access,
            "budget": self.budget,
            "enabled": self.enabled,
            "roles": list(self.roles),
            "readable": self.readable,
            "writable": self.writable,
            "retain_refusal": self.retain_refusal,
        }


class BankPolicy:
    """What a name means and what may be done with it, for one configuration and one profile.

    ::

        policy = BankPolicy(config, profile="research")
        policy.resolve("ops", "recall").bank_id    # the bank id of alias "ops"
        policy.resolve("global", "retain")         # PolicyError: ... a roll-up bank ...
        policy.aliases_for("retain")               # what a tool schema offers for retain
    """

    def __init__(self, config: Config, profile: str | None = None) -> None:
        if profile is not None and profile not in config.profiles:
            known = ", ".join(sorted(config.profiles)) or "none defined under [profiles]"
            raise PolicyError(f"unknown profile {profile!r} (known: {known})")
        self.config = config
        self.profile = profile
        self._visible = {alias: bank for alias, bank in config.banks.items() if bank.enabled}
        self._by_bank_id = {bank.bank_id: alias for alias, bank in self._visible.items()}
        # Every bank the roll-up appends to: the global bank and each profile's upstream.
        self._rollup_banks = frozenset(
            [config.topology.global_bank, *(config.upstream_alias(name) for name in config.profiles)]
        )

    # --- views ---------------------------------------------------------------------------

    @property
    def aliases(self) -> tuple[str, ...]:
        """Every visible (enabled) alias, in configuration order."""
        return tuple(self._visible)

    def aliases_for(self, operation: Operation) -> tuple[str, ...]:
        """The visible aliases ``operation`` may address, in configuration order."""
        return tuple(a for a in self._visible if self._refusal(a, operation) is None)

    def default_alias(self) -> str | None:
        """The bank used when none is named: ``topology.default_bank``, else the profile's own bank."""
        candidates = [self.config.topology.default_bank]
        if self.profile is not None:
            candidates.append(self.config.profiles[self.profile].bank)
        return next((a for a in candidates if a is not None and a in self._visible), None)

    def default_for(self, operation: Operation) -> str | None:
        """The default bank if ``operation`` may use it, else None (the caller must name a bank)."""
        alias = self.default_alias()
        return alias if alias is not None and self._refusal(alias, operation) is None else None

    def union_aliases(self) -> tuple[str, ...]:
        """The profile's read-union (own bank, upstream, shared, or as configured), visible ones only."""
        if self.profile is None:
            raise PolicyError(
                "a read-union needs a profile: pass one (e.g. --profile NAME) or name the banks to read"
            )
        return tuple(a for a in self.config.read_union(self.profile) if a in self._visible)

    def roles(self, alias: str) -> tuple[str, ...]:
        """What part ``alias`` plays in the topology: global, shared, upstream/bank of profiles."""
        topology = self.config.topology
        roles: list[str] = []
        if alias == topology.global_bank:
            roles.append("global")
        if alias == topology.shared:
            roles.append("shared")
        if alias == topology.default_bank:
            roles.append("default")
        for name, profile in self.config.profiles.items():
            if profile.bank == alias:
                roles.append(f"bank of {name}")
        for name in self.config.profiles:
            if alias != topology.global_bank and self.config.upstream_alias(name) == alias:
                roles.append(f"upstream of {name}")
        return tuple(roles)

    def summary(self, alias: str) -> str:
        """What a bank is for: its configured description, else a phrase for its role."""
        description = " ".join(self.config.banks[alias].description.split())
        if description:
            return description
        topology = self.config.topology
        phrases: list[str] = []
        if alias == topology.global_bank:
            phrases.append("global roll-up: durable facts consolidated from every profile's bank")
        if alias == topology.shared:
            phrases.append("shared by all agents")
        for name, profile in self.config.profiles.items():
            if profile.bank == alias:
                phrases.append(f"own bank of profile {name}")
        for name in self.config.profiles:
            if alias != topology.global_bank and self.config.upstream_alias(name) == alias:
                phrases.append(f"roll-up bank of profile {name}")
        return "; ".join(phrases) or "no description"

    def describe(self, *, include_disabled: bool = False) -> tuple[BankInfo, ...]:
        """Every bank (visible ones, or all), with roles and what this profile may do with it."""
        infos: list[BankInfo] = []
        for alias, bank in self.config.banks.items():
            if not bank.enabled and not include_disabled:
                continue
            refusal = self._refusal(alias, "retain") if bank.enabled else "the bank is disabled"
            infos.append(
                BankInfo(
                    alias=alias,
                    bank_id=bank.bank_id,
                    description=bank.description,
                    access=bank.access,
                    budget=bank.budget,
                    enabled=bank.enabled,
                    roles=self.roles(alias),
                    readable=bank.enabled,
                    writable=refusal is None,
                    retain_refusal=refusal,
                )
            )
        return tuple(infos)

    # --- resolution ----------------------------------------------------------------------

    def resolve(self, name: str | None, operation: Operation) -> BankTarget:
        """The bank ``name`` means for ``operation`` (the default bank when None), or PolicyError."""
        if name is None:
            alias = self.default_alias()
            if alias is None:
                raise PolicyError(
                    f"no bank named and no default bank for {operation}: name one of "
                    f"{self._list(self.aliases_for(operation))} "
                    "(or set topology.default_bank)"
                )
            refusal = self._refusal(alias, operation)
            if refusal is not None:
                raise PolicyError(f"no bank named, so the default was used, but {refusal}")
            name = alias
        if name in self._visible:
            refusal = self._refusal(name, operation)
            if refusal is not None:
                raise PolicyError(refusal)
            bank = self._visible[name]
            return BankTarget(name, bank.bank_id, bank.access, bank.budget, bank.description)
        if name in self._by_bank_id:
            alias = self._by_bank_id[name]
            if not self.config.topology.allow_raw_bank_ids:
                raise PolicyError(
                    f"{name!r} is the bank id of {alias!r}: use the alias "
                    "(raw bank ids are not accepted: topology.allow_raw_bank_ids = false)"
                )
            # The raw id of a configured bank obeys that bank's policy and carries its alias.
            return self.resolve(alias, operation)
        if self.config.topology.allow_raw_bank_ids and self._is_raw_candidate(name):
            if operation == "retain":
                raise PolicyError(
                    f"raw bank id {name!r} is read-only: retain needs a configured bank with "
                    f'access = "read_write"; add it under [banks] or retain to one of '
                    f"{self._list(self.aliases_for('retain'))}"
                )
            return BankTarget(name, name, "read_only", RAW_BANK_BUDGET, raw=True)
        raise PolicyError(f"unknown bank {name!r} (known: {self._list(self.aliases)})")

    def resolve_many(self, names: Sequence[str | None], operation: Operation) -> tuple[BankTarget, ...]:
        """Resolve every name (all refusals before anything is sent), dropping repeats of a bank."""
        if not names:
            raise PolicyError(
                f"no banks named for {operation}: name one or more of "
                f"{self._list(self.aliases_for(operation))}"
            )
        targets: dict[str, BankTarget] = {}
        for name in names:
            target = self.resolve(name, operation)
            targets.setdefault(target.bank_id, target)
        return tuple(targets.values())

    # --- internals -----------------------------------------------------------------------

    def _retain_block(self, alias: str) -> str | None:
        """Why nothing may be retained into the visible bank ``alias``, or None when it may."""
        bank = self._visible[alias]
        if alias in self._rollup_banks:
            return (
                f"bank {alias!r} is a roll-up bank: cards arrive there only through the roll-up, "
                "never by retain"
            )
        if bank.access != "read_write":
            return f'bank {alias!r} is read-only (banks.{alias}.access = "{bank.access}")'
        if self.profile is not None:
            own = self.config.profiles[self.profile].bank
            owners = sorted(name for name, p in self.config.profiles.items() if p.bank == alias)
            if owners and alias != own:
                return (
                    f"bank {alias!r} is the own bank of profile {owners[0]!r}, written only by that profile"
                )
        return None

    def _refusal(self, alias: str, operation: Operation) -> str | None:
        """Why ``operation`` may not address the visible bank ``alias`` (with what to do instead)."""
        if operation != "retain":
            return None
        block = self._retain_block(alias)
        if block is None:
            return None
        writable = [a for a in self._visible if self._retain_block(a) is None]
        instead = f"retain to one of {self._list(writable)}" if writable else "no bank is writable here"
        return f"{block}; {instead}"

    @staticmethod
    def _is_raw_candidate(name: str) -> bool:
        # The same shape config.BankId accepts; anything else would be refused by the backend anyway.
        return (
            0 < len(name) <= 128
            and name[0].isascii()
            and name[0].isalnum()
            and all(c.isascii() and (c.isalnum() or c in "_.:-") for c in name)
        )

    @staticmethod
    def _list(aliases: Sequence[str]) -> str:
        return ", ".join(aliases) if aliases else "none"


def render_banks(infos: Sequence[BankInfo]) -> str:
    """A plain-text table of banks: alias, bank id, access, what may be done, roles, description."""
    rows = [("ALIAS", "BANK ID", "ACCESS", "USE", "ROLES", "DESCRIPTION")]
    for info in infos:
        use = "disabled" if not info.enabled else ("read, retain" if info.writable else "read")
        rows.append(
            (info.alias, info.bank_id, info.access, use, ", ".join(info.roles) or "-", info.description)
        )
    widths = [max(len(row[i]) for row in rows) for i in range(5)]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(row[:5], widths, strict=True)) + "  " + row[5]
        for row in rows
    ]
    return "\n".join(line.rstrip() for line in lines)


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
