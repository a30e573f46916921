"""Step 4, summarise: which summariser a batch gets, its one call, the token budget, grounding.

A batch is summarised by the backend's reflect when it has an LLM (Hindsight), else by the
``[llm]`` model when one is configured (the same prompt and card schema), else extractively. A
model's cards are grounded (`dreamer.rollup.grounding`); so are the extractive ones. Once
``rollup.max_llm_tokens_per_run`` or ``_per_day`` is reached, the run's later batches are
summarised extractively: nothing is left behind and nothing fails. The call that crosses a cap
is finished, so a cap can be passed by one call's tokens. Why: docs/design/rollup.md.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from typing import Any, Protocol, TypeVar

import anyio
import structlog

from dreamer.backends.base import MemoryBackend, MemoryUnit
from dreamer.config import Config, ProfileConfig
from dreamer.llm.openai import ChatAnswer
from dreamer.llm.usage import usage_from
from dreamer.rollup import extractive
from dreamer.rollup.cards import (
    CARDS_SCHEMA,
    CardDraft,
    SourceUnit,
    is_content_free,
    parse_reflect_cards,
    reflect_query,
    source_pieces,
)
from dreamer.rollup.grounding import ground_batch
from dreamer.rollup.report import RollupReport

__all__ = ["SYSTEM_PROMPT", "ChatModel", "Summariser", "day_start", "summariser_name"]

T = TypeVar("T")
log = structlog.get_logger("dreamer.rollup")

#: The system message of a chat summary; the user message is the reflect question itself.
SYSTEM_PROMPT = (
    "You write summary cards for an agent's long-term memory. Answer only with JSON that follows "
    'the given schema: {"cards": [{"text", "kind", "source_ids"}]}. Never state a number, date, '
    "name or detail that the memories do not state, and cite in source_ids only the memories "
    "whose facts the card says."
)


class ChatModel(Protocol):
    """An LLM Dreamer calls itself (`dreamer.llm.openai.OpenAIChat`)."""

    @property
    def name(self) -> str: ...

    async def complete(
        self,
        messages: Sequence[dict[str, str]],
        *,
        schema: Any = None,
        schema_name: str = "answer",
        max_tokens: int | None = None,
    ) -> ChatAnswer: ...

    async def aclose(self) -> None: ...


class CallWithRetry(Protocol):
    """The pipeline's retrying call: ``(operation, fn, needs_slot=...)``."""

    def __call__(
        self, operation: str, fn: Callable[[], Awaitable[T]], *, needs_slot: bool
    ) -> Awaitable[T]: ...


def day_start(now: datetime) -> datetime:
    """The start of ``now``'s UTC day: the per-day token budget's window."""
    utc = now.astimezone(UTC)
    return utc.replace(hour=0, minute=0, second=0, microsecond=0)


def summariser_name(config: Config) -> str:
    """How status names the summariser a configuration gets (before any token budget)."""
    if config.rollup.use_reflect == "never":
        return "extractive (rollup.use_reflect = never)"
    if config.backend.kind == "hindsight":
        return "reflect (Hindsight's LLM)"
    if config.llm.provider == "openai":
        return f"llm openai:{config.llm.model} at {config.llm.base_url}"
    return "extractive (no [llm] configured)"


class Summariser:
    """Drafts one batch's cards for one run; counts tokens and grounding into the run's report."""

    def __init__(
        self,
        config: Config,
        backend: MemoryBackend,
        llm: ChatModel | None,
        *,
        call: CallWithRetry,
        tokens_today: Callable[[], int],
    ) -> None:
        self.config = config
        self.backend = backend
        self.llm = llm
        self.call = call
        self._tokens_today = tokens_today
        self._today: int | None = None

    def kind(self) -> str:
        """The summariser a batch gets before the budget is looked at: reflect, llm or extractive."""
        if self.config.rollup.use_reflect == "never":
            return "extractive"
        if self.backend.reflect_uses_llm:
            return "reflect"
        return "llm" if self.llm is not None else "extractive"

    def budget_reached(self, report: RollupReport) -> str | None:
        """"run" or "day" when that token cap is reached, else None."""
        cfg = self.config.rollup
        used = report.llm_tokens
        if cfg.max_llm_tokens_per_run is not None and used >= cfg.max_llm_tokens_per_run:
            return "run"
        if cfg.max_llm_tokens_per_day is not None:
            if self._today is None:
                self._today = self._tokens_today()
            if self._today + used >= cfg.max_llm_tokens_per_day:
                return "day"
        return None

    async def draft(
        self, units: Sequence[MemoryUnit], settings: ProfileConfig, bank_id: str, report: RollupReport
    ) -> list[CardDraft]:
        """The batch's cards, grounded; every unit held by one of them."""
        sources = source_pieces([SourceUnit(u.id, u.text) for u in units])
        kind = self.kind()
        if kind != "extractive":
            reached = self.budget_reached(report)
            if reached is not None:
                report.budget_reached = reached
                tokens = report.llm_tokens
                log.info("token budget reached: summarised extractively", budget=reached, tokens=tokens)
                kind = "extractive"
        report.summariser = kind if report.summariser in ("", kind) else "mixed"
        if kind == "extractive":
            drafts = await anyio.to_thread.run_sync(extractive.extract_cards, sources, len(sources))
            return await anyio.to_thread.run_sync(self._ground, report, drafts, sources, False)
        query = reflect_query(sources, settings.directive, settings.top_n)
        if kind == "reflect":
            result = await self.call(
                "reflect",
                lambda: self.backend.reflect(
                    bank_id, query, budget=self.config.rollup.reflect_budget, response_schema=CARDS_SCHEMA
                ),
                needs_slot=True,
            )
            # A backend that reports no usage: estimated from what was sent and answered.
            report.count_tokens(result.usage or usage_from(None, prompt_text=query, answer_text=result.text))
            structured, text = result.structured, result.text
        else:
            assert self.llm is not None
            llm = self.llm
            answer = await self.call(
                "llm",
                lambda: llm.complete(
                    [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": query}],
                    schema=CARDS_SCHEMA,
                    schema_name="cards",
                    max_tokens=self.config.llm.max_answer_tokens,
                ),
                needs_slot=True,
            )
            report.count_tokens(answer.usage)
            parsed = answer.json()
            structured, text = (parsed if isinstance(parsed, dict) else None), answer.text
            if answer.truncated:
                report.llm_truncated += 1
                log.info("the model's answer was cut at its token cap", tokens=answer.usage.completion)
        drafts = parse_reflect_cards(structured, text, sources, len(sources))
        if not drafts:
            if structured is None and text.strip() and not is_content_free(text):
                report.llm_unreadable += 1
            log.info("the model gave no readable cards", answer=text[:200])
        return await anyio.to_thread.run_sync(self._ground, report, drafts, sources, True)

    def _ground(
        self, report: RollupReport, drafts: list[CardDraft], sources: list[SourceUnit], model_written: bool
    ) -> list[CardDraft]:
        """Grounding, counted in the report (in a worker thread)."""
        grounded = ground_batch(drafts, sources, model_written=model_written)
        report.count_grounding(grounded)
        for rejection in grounded.first.rejected:
            reason, card = str(rejection.reason), rejection.text[:120]
            log.info("card rejected", reason=reason, detail=rejection.detail, card=card)
        if grounded.fallback:
            log.info("cards drafted for units no card held", cards=len(grounded.fallback))
        return grounded.cards
