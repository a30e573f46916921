"""One roll-up run of one profile, step by step: gate, collect, then per batch select, summarise,
judge, promote, commit; then consolidate (the README's "How one roll-up works", in the same words).

It makes the run's calls to the backend (activity, listing, recall, retain, consolidate) and to the
state file (the watermark, the ledger lookups, the commits), and reads the clock. The other roll-up
modules that do I/O are :mod:`.activity` (the cycle's activity snapshot, which the job body passes
in) and the three it hands a step to: :mod:`.summarise` (the reflect or the ``[llm]`` model),
:mod:`.judging` (the state file's word index and ledger) and :mod:`.semantic` (the embedder and the
stored vectors). The steps' rules live in the pure modules beside it (:mod:`.gate`,
:mod:`.salience`, :mod:`.batches`, :mod:`.cards`, :mod:`.extractive`, :mod:`.grounding`,
:mod:`.dedup`, :mod:`.promote`, and :mod:`.planning` for what becomes of each judged card). A run's
state travels in one :class:`~.context.RunContext`; step boundaries are announced through
``on_step``. The run's record, log context and summary belong to :mod:`dreamer.service.runner`;
the pipeline writes only its atomic commits (watermark, ledger rows, the batch's decisions about its
units, the run's end), one per batch after the batch's promotion succeeded. Why, and how crashes,
retries and the slot lock are handled: ``docs/design/rollup.md``.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import TypeVar

import anyio
import structlog

from dreamer.backends.base import BankActivity, MemoryBackend, MemoryUnit
from dreamer.cardtags import is_dreamer_card
from dreamer.config import Config
from dreamer.embeddings.factory import describe_embedder
from dreamer.errors import DreamerError
from dreamer.llm.openai import open_chat
from dreamer.outcomes import COMMITTED, Outcome, classify, describe
from dreamer.retry import RetryPolicy, RetryStats, backoff_logger, call_holding_slot, call_with_retry
from dreamer.rollup import dedup, judging
from dreamer.rollup.batches import Batch, batch_size, cut_stream
from dreamer.rollup.context import RunContext, iso
from dreamer.rollup.gate import GateDecision, gate
from dreamer.rollup.planning import account, batch_decisions, plan_cards, settle_outcome
from dreamer.rollup.promote import INPUT_FACT_TYPES, ROLLUP_TAG, ledger_row
from dreamer.rollup.report import RollupReport
from dreamer.rollup.salience import SalienceInput
from dreamer.rollup.semantic import BatchVectors, EmbedCall, SemanticJudge, retrying_embed
from dreamer.rollup.summarise import ChatModel, Summariser, day_start
from dreamer.slot import SlotLock
from dreamer.state import Decision, LedgerCard, StateStore, Watermark
from dreamer.text import card_document_id

T = TypeVar("T")
log = structlog.get_logger("dreamer.rollup")

StepHook = Callable[[str, str], None]


class _Done(Exception):
    """Internal: a step ended the run early with the outcome already set on the report."""


class Rollup:
    """Runs roll-ups for the profiles of one configuration against one backend and one state file."""

    def __init__(
        self,
        config: Config,
        backend: MemoryBackend,
        state: StateStore,
        *,
        on_step: StepHook | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        semantic: SemanticJudge | None = None,
        llm: ChatModel | None = None,
    ) -> None:
        self.config = config
        #: The ``[llm]`` model; None: opened from the configuration for each run (if any).
        self.llm = llm
        self.backend = backend
        self.state = state
        self.semantic = semantic
        self.on_step = on_step
        self.clock = clock
        self.policy = RetryPolicy.from_config(config.retry)

    # --- activity, for every profile at once ---------------------------------------------------

    async def activity(self, profiles: Sequence[str]) -> dict[str, BankActivity]:
        """One backend call for the activity of every listed profile's bank."""
        bank_ids = [self.config.profile_bank_id(p) for p in profiles]
        return await self.backend.activity(bank_ids)

    def decide(self, profile: str, activity: BankActivity | None) -> GateDecision:
        p = self.config.profiles[profile]
        return gate(
            self.state.watermark(profile),
            activity,
            min_new_units=p.min_new_units,
            max_quiet_hours=p.max_quiet_hours,
            now=self.clock(),
        )

    async def backlog(self, profile: str) -> list[MemoryUnit]:
        """The units the next run of ``profile`` would collect: after its watermark, not judged yet
        (one listing, no retries: for ``dreamer status``)."""
        p = self.config.profiles[profile]
        overlap = timedelta(seconds=self.config.rollup.watermark_overlap_s)
        watermark = self.state.watermark(profile)
        units = await self.backend.list_units_since(
            self.config.bank_id(p.bank), watermark.read_from(overlap), fact_types=INPUT_FACT_TYPES
        )
        return new_units(units, watermark, overlap)

    # --- one run --------------------------------------------------------------------------------

    async def run(
        self,
        profile: str,
        *,
        activity: BankActivity | None = None,
        dry_run: bool = False,
        since: datetime | None = None,
        run_id: str | None = None,
        force: bool = False,
    ) -> RollupReport:
        """Roll up one profile. ``since`` overrides the watermark for this run (and skips the gate).

        Errors Dreamer reports (backend down, retries exhausted, slot busy, a permanent backend
        error) end the run with their outcome (:func:`dreamer.outcomes.classify`); the watermark
        then stays where it was."""
        cfg = self.config
        report = RollupReport(profile=profile, run_id=run_id or uuid.uuid4().hex[:12], dry_run=dry_run)
        report.embedder = describe_embedder(cfg) if self.semantic is not None else describe_embedder(None)
        ctx = RunContext(
            profile=profile,
            settings=cfg.profiles[profile],
            bank_id=cfg.profile_bank_id(profile),
            upstream_id=cfg.upstream_bank_id(profile),
            report=report,
            slot=SlotLock.from_config(cfg.slot),
            retry_stats=RetryStats(),
            activity=activity,
            since=since,
            force=force,
        )
        started = time.monotonic()
        llm = self.llm if self.llm is not None else open_chat(cfg.llm)
        ctx.summariser = Summariser(
            cfg,
            self.backend,
            llm,
            call=lambda operation, fn, *, needs_slot: self._call(ctx, operation, fn, needs_slot=needs_slot),
            tokens_today=lambda: self.state.llm_tokens_since(
                day_start(self.clock()), except_run=report.run_id
            ),
        )
        try:
            await self.gate(ctx)
            await self.collect(ctx)
            for batch in ctx.cut.batches:
                await self.run_batch(ctx, batch)
            if ctx.dry_run:
                report.outcome = Outcome.DRY_RUN
                report.reason = "dry run: nothing written upstream, watermark unchanged"
            await self.consolidate(ctx)
        except _Done:
            pass
        except DreamerError as exc:
            outcome, _code = classify(exc) or (Outcome.FAILED, None)
            report.outcome, report.reason = outcome, describe(exc)
        finally:
            ctx.slot.release()
            if llm is not None and llm is not self.llm:
                await llm.aclose()
            report.reflect_attempts = ctx.retry_stats.attempts.get("reflect", 0)
            report.slot_wait_s, report.slot_held_s = ctx.slot.waited_s, ctx.slot.held_s
            report.duration_s = time.monotonic() - started
        return report

    async def _call(
        self, ctx: RunContext, operation: str, fn: Callable[[], Awaitable[T]], *, needs_slot: bool
    ) -> T:
        """Retry transient errors; hold the slot around LLM-backed calls (released in backoff)."""
        on_retry = backoff_logger(operation, log)
        if needs_slot:
            return await call_holding_slot(
                operation,
                fn,
                self.policy,
                ctx.slot,
                stats=ctx.retry_stats,
                on_retry=on_retry,
                on_acquired=lambda: self._step("slot", ctx.profile),
            )
        return await call_with_retry(operation, fn, self.policy, stats=ctx.retry_stats, on_retry=on_retry)

    # --- the steps ------------------------------------------------------------------------------

    async def gate(self, ctx: RunContext) -> None:
        """1. Gate: skip a profile whose bank has no write since its watermark (unless forced or
        ``since`` overrides the watermark)."""
        ctx.watermark = self.state.watermark(ctx.profile)
        ctx.report.watermark_from = iso(ctx.watermark.created_at)
        if ctx.activity is None:
            ctx.activity = (await self.backend.activity([ctx.bank_id])).get(ctx.bank_id)
        if ctx.since is None and not ctx.force:
            decision = self.decide(ctx.profile, ctx.activity)
            if not decision.run:
                ctx.report.outcome, ctx.report.reason = decision.outcome, decision.reason
                log.info("skip", reason=ctx.report.outcome, detail=decision.reason)
                raise _Done
        self._step("gated", ctx.profile)

    async def collect(self, ctx: RunContext) -> None:
        """2. Collect the units created after the watermark, never Dreamer's own cards."""
        overlap = timedelta(seconds=self.config.rollup.watermark_overlap_s)
        watermark, since = ctx.watermark, ctx.since
        start = since if since is not None else watermark.read_from(overlap)
        effective = Watermark(since) if since is not None else watermark
        units = await self._call(
            ctx,
            "list",
            # Not excluded by tag: a memory an agent tagged "rollup" is rolled up like any other;
            # only Dreamer's own cards (tag and metadata mark) are left out, in new_units.
            lambda: self.backend.list_units_since(ctx.bank_id, start, fact_types=INPUT_FACT_TYPES),
            needs_slot=False,
        )
        ctx.units = new_units(units, effective, overlap)
        ctx.report.units_seen = len(ctx.units)
        ctx.report.units_tagged_rollup = sum(
            1 for u in ctx.units if ROLLUP_TAG in u.tags and not is_dreamer_card(u.tags, u.metadata)
        )
        self._step("collected", ctx.profile)
        if not ctx.units:
            ctx.start_batch(Batch((), ()), overlap)
            self._end_with_nothing_new(ctx, "no new units after the watermark")
        assert ctx.summariser is not None
        cfg = self.config.rollup
        size = batch_size(ctx.settings.top_n, cfg.extractive_batch, ctx.summariser.kind())
        inputs = [SalienceInput(u.id, u.text, u.created_at, u.proof_count) for u in ctx.units]
        ctx.cut = cut_stream(inputs, size, limit=cfg.max_batches_per_run, directive=ctx.settings.directive)
        ctx.report.units_pending = len(ctx.cut.pending)

    async def run_batch(self, ctx: RunContext, batch: Batch) -> None:
        """Steps 3 to 7 for one batch: its cards promoted and the watermark past it, or (in a dry
        run) only planned."""
        ctx.start_batch(batch, timedelta(seconds=self.config.rollup.watermark_overlap_s))
        ctx.report.batches += 1
        await self.select(ctx)
        if ctx.selected:
            await self.summarise(ctx)
            await self.judge(ctx)
        account(ctx)
        if ctx.dry_run:
            ctx.report.promoted += len(ctx.to_promote)
            return
        await self.promote(ctx)
        await self.commit(ctx)

    async def select(self, ctx: RunContext) -> None:
        """3. Select (salience): the batch's filler and contact records are dropped, with their
        reason; its other units, best first, are the summariser's input."""
        ctx.report.count_chatter(ctx.batch.chatter.values())
        ctx.report.units_selected += len(ctx.selected)

    async def summarise(self, ctx: RunContext) -> None:
        """4. Summarise into cards: one reflect (or ``[llm]`` completion) per batch, or extractive
        without an LLM; every card grounded (`dreamer.rollup.summarise`)."""
        assert ctx.summariser is not None
        ctx.drafts = await ctx.summariser.draft(ctx.selected, ctx.settings, ctx.bank_id, ctx.report)
        ctx.report.cards += len(ctx.drafts)
        self._step("summarised", ctx.profile)

    async def judge(self, ctx: RunContext) -> None:
        """5. Judge each card (dedup and conflicts) against the ledger and the upstream bank's
        nearest cards; decide what to promote and what reinforces an existing card."""
        cfg = self.config
        semantic = self.semantic
        if semantic is not None and semantic.lexical_fallback and not await semantic.usable():
            semantic, ctx.report.embedder = None, describe_embedder(None)
        texts, top_k = [d.text for d in ctx.drafts], cfg.rollup.semantic_top_k
        if semantic is not None and texts:
            embed, let_go = self._embed_call(ctx, semantic), self._may_let_go(ctx)
            await semantic.embed_cards(texts, embed, anyio.to_thread.run_sync, let_go=let_go)
        await judging.prepare_recalls(self.backend, ctx.upstream_id, texts, top_k)

        def recall(text: str) -> Callable[[], Awaitable[list[dedup.UpstreamCandidate]]]:
            def once() -> Awaitable[list[dedup.UpstreamCandidate]]:
                return judging.upstream_candidates(self.backend, ctx.upstream_id, text, top_k)

            return lambda: self._call(ctx, "recall", once, needs_slot=False)

        async def recalls() -> list[list[dedup.UpstreamCandidate]]:  # two at once
            return await judging.in_order([recall(draft.text) for draft in ctx.drafts])

        # The ledger's side of the judge reads the state file while the recalls read the store.
        probe, candidates = await judging.probe_beside(
            self.state, ctx.upstream_id, texts, dry_run=ctx.dry_run, during=recalls
        )
        cards = [dedup.CardText(card_document_id(ctx.profile, d.text), d.text) for d in ctx.drafts]
        if semantic is not None:
            ctx.vectors = await self._embed(ctx, semantic, cards, candidates)
        ctx.verdicts = await anyio.to_thread.run_sync(self._judge_cards, ctx, cards, candidates, probe)
        self._step("judged", ctx.profile)
        plan_cards(ctx)

    def _judge_cards(
        self,
        ctx: RunContext,
        cards: Sequence[dedup.CardText],
        upstream: Sequence[Sequence[dedup.UpstreamCandidate]],
        probe: judging.LedgerProbe,
    ) -> list[dedup.Verdict]:
        """The verdicts (in a worker thread: analysing texts must not stall the event loop)."""
        verdicts = judging.judge_against_ledger(
            self.state, ctx.upstream_id, cards, upstream, ctx.vectors, dry_run=ctx.dry_run, probe=probe
        )
        ctx.ledger_ids = frozenset(self.state.existing_documents(card.card_id for card in cards))
        return verdicts

    async def _embed(
        self,
        ctx: RunContext,
        semantic: SemanticJudge,
        cards: Sequence[dedup.CardText],
        candidates: Sequence[Sequence[dedup.UpstreamCandidate]],
    ) -> BatchVectors:
        """Embed the batch's cards and upstream candidates (and a bounded batch of ledger cards
        without a vector of this model); a server that stays down defers the run."""
        batch = await semantic.prepare(
            self.state,
            ctx.upstream_id,
            [card.text for card in cards],
            [c.text for hits in candidates for c in hits],
            self._embed_call(ctx, semantic),
            write=not ctx.dry_run,
            in_thread=anyio.to_thread.run_sync,
            candidate_ids=[c.card_id for hits in candidates for c in hits],
            let_go=self._may_let_go(ctx),
        )
        ctx.report.reembedded = batch.reembedded
        return batch

    def _may_let_go(self, ctx: RunContext) -> bool:
        """Whether the model's weights may be given back after an embedding: in the run's last
        batch (a batch after it would load them again), unless ``embeddings.keep_loaded``."""
        return ctx.batch is ctx.cut.batches[-1] and not self.config.embeddings.keep_loaded

    def _embed_call(self, ctx: RunContext, semantic: SemanticJudge) -> EmbedCall:
        """The embedder with the retry rules, under the slot lock when ``embeddings.use_slot_lock``."""
        return retrying_embed(
            semantic.embedder,
            self.policy,
            ctx.slot if self.config.embeddings.use_slot_lock else None,
            stats=ctx.retry_stats,
            on_retry=backoff_logger("embed", log),
        )

    async def promote(self, ctx: RunContext) -> None:
        """6. Promote the new cards in one synchronous batch (content-derived document ids make a
        retry a no-op)."""
        if ctx.to_promote:
            items = [item for _, item in ctx.to_promote]
            await self._call(
                ctx,
                "retain",
                lambda: self.backend.retain(ctx.upstream_id, items),
                needs_slot=self.backend.reflect_uses_llm,
            )
            ctx.report.promoted += len(ctx.to_promote)
        self._step("promoted", ctx.profile)

    async def commit(self, ctx: RunContext) -> None:
        """7. Commit the watermark past the batch, its ledger rows and the run's counts so far in one
        transaction, only after the batch's promotion succeeded."""
        settle_outcome(ctx.report)
        now = self.clock()
        facts = ctx.facts()
        rows = [ledger_row(plan, item, facts, now) for plan, item in ctx.to_promote]
        if ctx.vectors is not None:
            # Each new card's vector is written with its ledger row, in the same transaction.
            rows = [replace(row, vector=ctx.vectors.stored(row.text)) for row in rows]
        decisions = batch_decisions(ctx, now)
        await anyio.to_thread.run_sync(lambda: self._commit(ctx, rows, decisions))

    async def consolidate(self, ctx: RunContext) -> None:
        """8. Post-consolidate the upstream bank once per run (best effort, under the slot lock)."""
        if ctx.dry_run or not (ctx.report.promoted and self.config.rollup.post_consolidate):
            return
        try:
            await self._call(
                ctx,
                "consolidate",
                lambda: self.backend.consolidate(ctx.upstream_id),
                needs_slot=self.backend.reflect_uses_llm,
            )
        except DreamerError as exc:
            log.warning("post-consolidate failed (the promotion stands)", error=str(exc))
        self._step("consolidated", ctx.profile)

    # --- helpers --------------------------------------------------------------------------------

    def _end_with_nothing_new(self, ctx: RunContext, reason: str) -> None:
        """End the run: nothing to summarise, but the watermark still moves past what was read."""
        ctx.report.outcome, ctx.report.reason = Outcome.NOTHING_NEW, reason
        if not ctx.dry_run:
            self._commit(ctx, [])
        raise _Done

    def _commit(
        self, ctx: RunContext, ledger_rows: Sequence[LedgerCard], decisions: Sequence[Decision] = ()
    ) -> None:
        """The compare-and-set commit of one batch; the next batch expects what it wrote."""
        report = ctx.report
        assert report.outcome in COMMITTED
        finished = self.clock()
        self.state.commit_rollup(
            profile=ctx.profile,
            bank_id=ctx.bank_id,
            watermark=ctx.new_watermark,
            promoted=ledger_rows,
            reinforced=ctx.reinforced,
            run_id=report.run_id,
            outcome=report.outcome,
            detail=report.reason,
            counts=report.counts(),
            finished_at=finished,
            expected=ctx.watermark,
            decisions=decisions,
        )
        ctx.watermark = replace(ctx.new_watermark, rolled_at=finished)
        self._step("committed", ctx.profile)

    def _step(self, step: str, profile: str) -> None:
        if self.on_step is not None:
            self.on_step(step, profile)


def new_units(units: Sequence[MemoryUnit], watermark: Watermark, overlap: timedelta) -> list[MemoryUnit]:
    """The listed units a run judges: after ``watermark`` (or in its overlap, unseen), never
    Dreamer's own cards (the ``rollup`` tag with Dreamer's metadata mark), never empty."""
    return [
        u
        for u in units
        if not is_dreamer_card(u.tags, u.metadata)
        and watermark.is_new(u.created_at, u.id, overlap)
        and u.text.strip()
    ]
