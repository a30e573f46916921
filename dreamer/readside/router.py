"""The bank router: recall, reflect and retain by bank alias, through the policy, on a backend.

:class:`BankRouter` resolves every name with :class:`~dreamer.readside.policy.BankPolicy` before
any request is sent, so a refusal never leaves a partial effect. A read of several banks (the
named ones, or the profile's read-union) queries them concurrently, each under an optional
deadline; a bank that fails or misses its deadline is reported missing and the others still
answer, merged into one labelled :class:`~dreamer.readside.answers.RecallAnswer`. Retain addresses
one writable bank and lets backend errors propagate.

Why a partial answer beats a failed one, and what the labels are for: ``docs/design/readside.md``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import TypeVar

import anyio
import structlog

from dreamer.backends.base import Budget, MemoryBackend, RecallItem, ReflectResult, RetainItem
from dreamer.config import Config
from dreamer.errors import BackendError, PolicyError, StateFileError
from dreamer.readside.answers import (
    LabelledRecall,
    LabelledReflection,
    MissingBank,
    RecallAnswer,
    ReflectAnswer,
    RetainAnswer,
    failure_reason,
    is_config_fault,
    merge_recalls,
)
from dreamer.readside.current import mark_superseded, successors_from_ledger
from dreamer.readside.policy import BankPolicy, BankTarget
from dreamer.readside.scope import scope_tag
from dreamer.state import LedgerCard, StateStore
from dreamer.text import well_formed

__all__ = ["BankRouter"]

log = structlog.get_logger("dreamer.readside")

_T = TypeVar("_T")

#: Reflect is the expensive call (minutes on a small model); ask for little unless told otherwise.
DEFAULT_REFLECT_BUDGET: Budget = "low"
#: How much of a failed bank's error message a missing bank keeps.
_DETAIL_CHARS = 300
#: The longest text stored as one memory; a longer one is refused before anything is sent (a
#: server would spend minutes on it and the caller could not tell whether it was stored).
MAX_RETAIN_CHARS = 1_000_000
#: How many links of a supersession chain (A by B, B by C, ...) the ledger is asked to follow.
_CHAIN_STEPS = 8


class BankRouter:
    """Recall, reflect and retain by bank alias, with the policy checked before anything is sent.

    ``bank_timeout_s`` bounds each bank's call in a multi-bank read (None: the backend's own
    timeouts only). ``ledger``, the state file, tells which hits a newer card superseded even when
    that card is not among them (None: only the hits' own metadata tells). The router owns
    neither the backend nor the ledger: close them yourself.
    """

    def __init__(
        self,
        config: Config,
        backend: MemoryBackend,
        *,
        profile: str | None = None,
        bank_timeout_s: float | None = None,
        ledger: StateStore | None = None,
    ) -> None:
        self.policy = BankPolicy(config, profile)
        self.backend = backend
        self.bank_timeout_s = bank_timeout_s
        self.ledger = ledger

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
        query = well_formed(query)
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
        query = well_formed(query)
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
        query = well_formed(query)
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
        scope: str | None = None,
        metadata: Mapping[str, str] | None = None,
        document_id: str | None = None,
        timestamp: datetime | None = None,
    ) -> RetainAnswer:
        """Store one item in a writable bank (the default bank when None); ``scope`` adds the tag
        ``scope:<scope>`` (:func:`~dreamer.readside.scope.scope_tag`, ScopeError when invalid).
        Refusals come before any request; backend errors propagate."""
        extra = (scope_tag(scope),) if scope is not None else ()
        target = self.policy.resolve(bank, "retain")
        if len(content) > MAX_RETAIN_CHARS:
            raise PolicyError(
                f"the memory is {len(content):,} characters; at most {MAX_RETAIN_CHARS:,} are stored "
                "as one: store a summary, or split it"
            )
        item = RetainItem(
            content=well_formed(content),
            context=None if context is None else well_formed(context),
            timestamp=timestamp,
            metadata={well_formed(k): well_formed(v) for k, v in (metadata or {}).items()},
            tags=tuple(dict.fromkeys(well_formed(t) for t in (*tags, *extra))),
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
        merged = merge_recalls(per_bank)
        items = self._with_told(mark_superseded(merged, successors_from_ledger(self._superseding(merged))))
        if limit is not None:
            items = items[: max(limit, 0)]
        return RecallAnswer(query, tuple(t.alias for t in targets), items, missing)

    def _with_told(self, items: Sequence[LabelledRecall]) -> tuple[LabelledRecall, ...]:
        """The hits, each roll-up card the ledger holds marked with how often its fact was found
        (:class:`~dreamer.state.Told`). A state file that cannot be read costs the marks (logged)."""
        ids = {d for item in items for d in item.document_ids}
        if self.ledger is None or not ids:
            return tuple(items)
        try:
            told = {c.document_id: c.told for c in self.ledger.cards(ids) if c.told is not None}
        except StateFileError as exc:
            log.warning("recall without the ledger's counts", reason=str(exc))
            return tuple(items)
        return tuple(
            replace(item, told=next((told[d] for d in item.document_ids if d in told), None))
            for item in items
        )

    def _superseding(self, items: Sequence[LabelledRecall]) -> list[LedgerCard]:
        """The ledger cards that supersede a hit's card, and those superseding them, chains followed.
        A state file that cannot be read costs the ledger's marks, not the answer (logged)."""
        if self.ledger is None:
            return []
        found: list[LedgerCard] = []
        asked: set[str] = set()
        frontier = {d for item in items for d in item.document_ids}
        try:
            for _ in range(_CHAIN_STEPS):
                frontier -= asked
                if not frontier:
                    break
                asked |= frontier
                cards = self.ledger.superseding(frontier)
                found.extend(cards)
                frontier = {c.document_id for c in cards}
        except StateFileError as exc:
            log.warning("recall without the ledger's supersession marks", reason=str(exc))
        return found

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
                failures[index] = MissingBank(
                    target.alias, target.bank_id, failure_reason(exc), detail, is_config_fault(exc)
                )
            except Exception as exc:  # a bug, not a bank failure: re-raised below, unwrapped
                unexpected.append(exc)

        async with anyio.create_task_group() as group:
            for index, target in enumerate(targets):
                group.start_soon(one, index, target)
        if unexpected:
            raise unexpected[0]
        return results, tuple(m for m in failures if m is not None)
