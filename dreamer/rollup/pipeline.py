"""One roll-up run for one profile: gate → slot → collect → salience → cards → dedup → promote → commit.

The only module of the roll-up that does I/O. Every step boundary is announced through ``on_step``
(progress for the CLI, and the place a crash-safety test kills the process). Nothing here deletes or
rewrites memory: the upstream bank only ever receives new documents whose ids derive from their
content, and the watermark moves only in the same SQLite transaction as the ledger rows, after the
promotion succeeded.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import structlog

from dreamer import __version__
from dreamer.backends.base import BankActivity, MemoryBackend, MemoryUnit, RetainItem
from dreamer.config import Config
from dreamer.errors import PermanentBackendError, SlotBusyError, TransientBackendError
from dreamer.retry import (
    RetriesExhausted,
    RetryPolicy,
    RetryStats,
    backoff_logger,
    call_holding_slot,
    call_with_retry,
)
from dreamer.rollup import dedup, extractive, salience
from dreamer.rollup.cards import (
    CARDS_SCHEMA,
    CardDraft,
    SourceUnit,
    is_content_free,
    parse_reflect_cards,
    reflect_query,
)
from dreamer.rollup.gate import GateDecision, gate
from dreamer.rollup.similarity import Sketch, profile_text, sketch_of
from dreamer.slot import SlotLock
from dreamer.state import LedgerCard, Reinforcement, StateStore, Watermark
from dreamer.text import card_document_id, normalize_text

T = TypeVar("T")
log = structlog.get_logger("dreamer.rollup")

ROLLUP_TAG = "rollup"
#: Raw facts are rolled up; Hindsight's own ``observation`` units are derived from them
#: (``source_memory_ids``), so taking both would count one fact twice.
INPUT_FACT_TYPES = ("world", "experience")
#: Dreamer's cards upstream are these fact types; Hindsight also derives ``observation`` units from
#: them (same tags, no document id) which must not stand in for the card in dedup matches.
CARD_FACT_TYPES = ("world", "experience")
STEPS = ("gated", "slot", "collected", "summarised", "judged", "promoted", "committed", "consolidated")


def job_id_for(profile: str) -> str:
    return f"rollup:{profile}"


@dataclass(frozen=True, slots=True)
class CardPlan:
    """A card and what the run decided about it."""

    text: str
    kind: str
    source_ids: tuple[str, ...]
    document_id: str
    verdict: str
    reason: str
    matched_id: str | None = None
    scores: Mapping[str, float] = field(default_factory=dict)
    changed: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "kind": self.kind,
            "source_ids": list(self.source_ids),
            "document_id": self.document_id,
            "verdict": self.verdict,
            "reason": self.reason,
            "matched_id": self.matched_id,
            "scores": dict(self.scores),
            "changed": list(self.changed),
        }


@dataclass
class RollupReport:
    """What one run did. ``outcome`` is one of: idle, waiting, nothing_new, promoted, reinforced,
    dry_run, slot_busy, deferred, failed."""

    profile: str
    run_id: str
    outcome: str = "failed"
    reason: str = ""
    units_seen: int = 0
    units_selected: int = 0
    cards: int = 0
    promoted: int = 0
    reinforced: int = 0
    conflicts: int = 0
    reflect_attempts: int = 0
    summariser: str = ""
    slot_wait_s: float = 0.0
    slot_held_s: float = 0.0
    duration_s: float = 0.0
    dry_run: bool = False
    watermark_from: str | None = None
    watermark_to: str | None = None
    plan: list[CardPlan] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        return {
            "units_seen": self.units_seen,
            "units_selected": self.units_selected,
            "cards": self.cards,
            "promoted": self.promoted,
            "reinforced": self.reinforced,
            "conflicts": self.conflicts,
            "reflect_attempts": self.reflect_attempts,
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "profile": self.profile,
            "run_id": self.run_id,
            "outcome": self.outcome,
            "reason": self.reason,
            **self.counts(),
            "summariser": self.summariser,
            "slot_wait_s": round(self.slot_wait_s, 3),
            "slot_held_s": round(self.slot_held_s, 3),
            "duration_s": round(self.duration_s, 3),
            "dry_run": self.dry_run,
            "watermark_from": self.watermark_from,
            "watermark_to": self.watermark_to,
            "plan": [p.to_json() for p in self.plan],
        }


StepHook = Callable[[str, str], None]


class _Deferred(Exception):
    """Internal: end the run as deferred (watermark unchanged)."""


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
    ) -> None:
        self.config = config
        self.backend = backend
        self.state = state
        self.on_step = on_step
        self.clock = clock
        self.policy = RetryPolicy.from_config(config.retry)

    # --- activity, for every profile at once ---------------------------------------------------

    async def activity(self, profiles: Sequence[str]) -> dict[str, BankActivity]:
        """One backend call for the activity of every listed profile's bank."""
        bank_ids = [self.config.bank_id(self.config.profiles[p].bank) for p in profiles]
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
        """Roll up one profile. ``since`` overrides the watermark for this run (and skips the gate)."""
        run_id = run_id or uuid.uuid4().hex[:12]
        report = RollupReport(profile=profile, run_id=run_id, dry_run=dry_run)
        started = time.monotonic()
        cfg = self.config
        bank_id = cfg.bank_id(cfg.profiles[profile].bank)
        upstream_id = cfg.bank_id(cfg.upstream_alias(profile))
        slot = SlotLock(
            cfg.slot.lock_path,
            acquire_timeout_s=cfg.slot.acquire_timeout_s,
            poll_interval_s=cfg.slot.poll_interval_s,
        )
        retry_stats = RetryStats()
        self.state.record_run_start(run_id, job_id_for(profile), self.clock())
        with structlog.contextvars.bound_contextvars(profile=profile, bank=bank_id, run_id=run_id):
            try:
                await self._run(
                    report, profile, bank_id, upstream_id, slot, retry_stats, activity, since, force
                )
            except SlotBusyError as exc:
                report.outcome, report.reason = "slot_busy", str(exc)
            except (_Deferred, RetriesExhausted, TransientBackendError) as exc:
                report.outcome, report.reason = "deferred", str(exc)
            except PermanentBackendError as exc:
                report.outcome, report.reason = "failed", f"{exc} {exc.detail}".strip()
            finally:
                slot.release()
                report.reflect_attempts = retry_stats.attempts.get("reflect", 0)
                report.slot_wait_s, report.slot_held_s = slot.waited_s, slot.held_s
                report.duration_s = time.monotonic() - started
                if report.outcome not in _COMMITTED_OUTCOMES or dry_run:
                    self.state.record_run_end(
                        run_id, report.outcome, report.reason, report.counts(), self.clock()
                    )
            self._log_summary(report)
        return report

    async def _run(
        self,
        report: RollupReport,
        profile: str,
        bank_id: str,
        upstream_id: str,
        slot: SlotLock,
        retry_stats: RetryStats,
        activity: BankActivity | None,
        since: datetime | None,
        force: bool,
    ) -> None:
        cfg = self.config
        pcfg = cfg.profiles[profile]
        watermark = self.state.watermark(profile)
        report.watermark_from = _iso(watermark.created_at)

        # 1. Gate (skipped when the operator forces a run or overrides the watermark).
        if activity is None:
            activity = (await self.backend.activity([bank_id])).get(bank_id)
        if since is None and not force:
            decision = self.decide(profile, activity)
            if not decision.run:
                report.outcome, report.reason = decision.outcome, decision.reason
                log.info("skip", reason=report.outcome, detail=decision.reason)
                return
        self._step("gated", profile)

        llm_backed = self.backend.reflect_uses_llm

        async def call(operation: str, fn: Callable[[], Awaitable[T]], *, needs_slot: bool) -> T:
            """Retry transient errors; hold the slot around LLM-backed calls (released in backoff)."""
            on_retry = backoff_logger(operation, log)
            if needs_slot and llm_backed:
                return await call_holding_slot(
                    operation,
                    fn,
                    self.policy,
                    slot,
                    stats=retry_stats,
                    on_retry=on_retry,
                    on_acquired=lambda: self._step("slot", profile),
                )
            return await call_with_retry(operation, fn, self.policy, stats=retry_stats, on_retry=on_retry)

        # 2./3. Collect the units after the watermark, never Dreamer's own cards.
        overlap = timedelta(seconds=cfg.rollup.watermark_overlap_s)
        start = since if since is not None else watermark.read_from(overlap)
        effective = Watermark(since) if since is not None else watermark
        units = await call(
            "list",
            lambda: self.backend.list_units_since(
                bank_id, start, exclude_tags=(ROLLUP_TAG,), fact_types=INPUT_FACT_TYPES
            ),
            needs_slot=False,
        )
        new_units = [
            u
            for u in units
            if ROLLUP_TAG not in u.tags
            and effective.is_new(u.created_at, u.id, overlap)
            and u.text.strip()
        ]
        report.units_seen = len(new_units)
        self._step("collected", profile)
        new_watermark = watermark.advanced_to(((u.created_at, u.id) for u in new_units), overlap)
        new_watermark = Watermark(
            new_watermark.created_at,
            new_watermark.seen,
            activity.unit_count if activity is not None else watermark.unit_count,
            activity.last_write_at if activity is not None else watermark.last_write_at,
            watermark.rolled_at,
        )
        report.watermark_to = _iso(new_watermark.created_at)

        if not new_units:
            report.outcome, report.reason = "nothing_new", "no new units after the watermark"
            if not report.dry_run:
                self._commit(report, profile, bank_id, new_watermark, [], [])
            return

        # 4. Salience: drop conversational filler, keep the top-N.
        substantive = [u for u in new_units if not salience.is_chatter(u.text)]
        if not substantive:
            report.outcome, report.reason = "nothing_new", "only conversational filler since the watermark"
            if not report.dry_run:
                self._commit(report, profile, bank_id, new_watermark, [], [])
            return
        ranked = salience.top_n(
            [salience.SalienceInput(u.id, u.text, u.created_at, u.proof_count) for u in substantive],
            pcfg.top_n,
            pcfg.directive,
        )
        selected_ids = [r.id for r in ranked]
        by_id = {u.id: u for u in new_units}
        selected = [by_id[i] for i in selected_ids]
        report.units_selected = len(selected)

        # 5. Summarise into cards: one reflect per run, or extractive without an LLM.
        drafts = await self._summarise(report, profile, bank_id, selected, call)
        report.cards = len(drafts)
        self._step("summarised", profile)

        # 6. Dedup and conflicts against the ledger and the upstream bank's nearest cards.
        ledger = self.state.ledger(upstream_id)
        candidates: list[list[dedup.UpstreamCandidate]] = []
        for draft in drafts:
            hits = await call(
                "recall",
                lambda d=draft: self.backend.recall(  # type: ignore[misc]
                    upstream_id,
                    d.text,
                    budget="low",
                    types=CARD_FACT_TYPES,
                    tags=(ROLLUP_TAG,),
                    tags_match="any_strict",
                    limit=cfg.rollup.semantic_top_k,
                ),
                needs_slot=False,
            )
            candidates.append(
                [
                    dedup.UpstreamCandidate(h.document_id or h.id, h.text, h.semantic)
                    for h in hits[: cfg.rollup.semantic_top_k]
                ]
            )
        ledger_texts = [dedup.CardText(c.document_id, c.text, Sketch.loads(c.sketch)) for c in ledger]
        unsketched = {c.card_id: c.text for c in ledger_texts if c.sketch is None}
        if unsketched:
            # Cards from before sketches (or of an older format): sketch them once, for every later run.
            sketches = {i: sketch_of(profile_text(t)) for i, t in unsketched.items()}
            if not report.dry_run:
                self.state.store_sketches({i: s.dumps() for i, s in sketches.items()})
            ledger_texts = [
                replace(c, sketch=sketches[c.card_id]) if c.card_id in sketches else c for c in ledger_texts
            ]
        verdicts = dedup.judge_batch(
            [dedup.CardText(card_document_id(profile, d.text), d.text) for d in drafts],
            ledger_texts,
            candidates,
        )
        self._step("judged", profile)

        ledger_ids = {c.document_id for c in ledger}
        now = self.clock()
        newest = max(u.created_at for u in selected)
        to_promote: list[tuple[CardPlan, RetainItem]] = []
        reinforced: list[Reinforcement] = []
        for draft, verdict in zip(drafts, verdicts, strict=True):
            doc_id = card_document_id(profile, draft.text)
            plan = CardPlan(
                text=draft.text,
                kind=draft.kind,
                source_ids=draft.source_ids,
                document_id=doc_id,
                verdict=verdict.kind,
                reason=verdict.reason,
                matched_id=verdict.matched_id,
                scores=dict(verdict.scores),
                changed=tuple(verdict.changed),
            )
            report.plan.append(plan)
            log.info(
                "verdict",
                verdict=verdict.kind,
                reason=verdict.reason,
                scores=dict(verdict.scores),
                matched_id=verdict.matched_id,
                card=draft.text[:120],
            )
            if verdict.kind == "duplicate" and verdict.matched_id == doc_id and doc_id not in ledger_ids:
                # Our own card from a run that crashed after promoting and before committing:
                # promote it again (a no-op upstream, same document id) so the ledger records it.
                plan = replace(
                    plan, verdict="new", reason="re-promoting an uncommitted card of an earlier run"
                )
                report.plan[-1] = plan
            elif verdict.kind == "duplicate":
                if verdict.matched_id is not None:
                    reinforced.append(Reinforcement(verdict.matched_id, draft.source_ids, profile))
                report.reinforced += 1
                continue
            tags = [ROLLUP_TAG, f"src:{profile}"]
            metadata = {
                "source_bank": bank_id,
                "source_profile": profile,
                "source_ids": json.dumps(list(draft.source_ids)),
                "run_id": report.run_id,
                "watermark_from": report.watermark_from or "",
                "watermark_to": report.watermark_to or "",
                "kind": draft.kind,
                "dreamer_version": __version__,
            }
            if verdict.kind == "conflict":
                report.conflicts += 1
                if pcfg.conflict_policy == "recency_wins":
                    if verdict.matched_id:
                        metadata["supersedes"] = verdict.matched_id
                        tags.append("supersedes")
                else:
                    tags.append(f"scope:{profile}")
                metadata["conflict"] = ",".join(verdict.changed)
            item = RetainItem(
                content=draft.text,
                context=f"Dreamer roll-up of profile {profile}",
                timestamp=newest,
                metadata=metadata,
                tags=tuple(tags),
                document_id=doc_id,
            )
            to_promote.append((plan, item))

        if report.dry_run:
            report.promoted = len(to_promote)
            report.outcome = "dry_run"
            report.reason = "dry run: nothing written upstream, watermark unchanged"
            return

        # 7. Promote in one synchronous batch (content-derived ids make a retry a no-op).
        if to_promote:
            items = [item for _, item in to_promote]
            await call("retain", lambda: self.backend.retain(upstream_id, items), needs_slot=True)
            report.promoted = len(to_promote)
        self._step("promoted", profile)

        # 8. Commit watermark + ledger + run record, in one transaction, only now.
        ledger_rows = [
            LedgerCard(
                document_id=plan.document_id,
                profile=profile,
                upstream_bank=upstream_id,
                text=plan.text,
                normalized=normalize_text(plan.text),
                kind=plan.kind,
                source_ids=plan.source_ids,
                profiles=(profile,),
                promoted_at=now,
                last_seen_at=now,
                supersedes=item.metadata.get("supersedes"),
                run_id=report.run_id,
                sketch=sketch_of(profile_text(plan.text)).dumps(),
            )
            for plan, item in to_promote
        ]
        if report.promoted:
            report.outcome = "promoted"
        elif report.reinforced:
            report.outcome = "reinforced"
        else:
            report.outcome = "nothing_new"
        report.reason = (
            f"{report.promoted} promoted, {report.reinforced} reinforced, {report.conflicts} conflicts"
        )
        self._commit(report, profile, bank_id, new_watermark, ledger_rows, reinforced)

        # 9. Post-consolidate upstream (best effort, under the slot lock).
        if report.promoted and cfg.rollup.post_consolidate:
            try:
                await call("consolidate", lambda: self.backend.consolidate(upstream_id), needs_slot=True)
            except (RetriesExhausted, PermanentBackendError, TransientBackendError, SlotBusyError) as exc:
                log.warning("post-consolidate failed (the promotion stands)", error=str(exc))
            self._step("consolidated", profile)

    async def _summarise(
        self,
        report: RollupReport,
        profile: str,
        bank_id: str,
        selected: Sequence[MemoryUnit],
        call: Callable[..., Awaitable[Any]],
    ) -> list[CardDraft]:
        pcfg = self.config.profiles[profile]
        sources = [SourceUnit(u.id, u.text) for u in selected]
        if self.backend.reflect_uses_llm and self.config.rollup.use_reflect == "auto":
            report.summariser = "reflect"
            query = reflect_query(sources, pcfg.directive, pcfg.top_n)
            result = await call(
                "reflect",
                lambda: self.backend.reflect(
                    bank_id,
                    query,
                    budget=self.config.rollup.reflect_budget,
                    response_schema=CARDS_SCHEMA,
                ),
                needs_slot=True,
            )
            drafts = parse_reflect_cards(result.structured, result.text, sources, pcfg.top_n)
            if not drafts and is_content_free(result.text):
                log.info("reflect had nothing to summarise", answer=result.text[:200])
            return drafts
        report.summariser = "extractive"
        return extractive.extract_cards(sources, pcfg.top_n)

    def _commit(
        self,
        report: RollupReport,
        profile: str,
        bank_id: str,
        watermark: Watermark,
        ledger_rows: Sequence[LedgerCard],
        reinforced: Sequence[Reinforcement],
    ) -> None:
        self.state.commit_rollup(
            profile=profile,
            bank_id=bank_id,
            watermark=watermark,
            promoted=ledger_rows,
            reinforced=reinforced,
            run_id=report.run_id,
            outcome=report.outcome,
            detail=report.reason,
            counts=report.counts(),
            finished_at=self.clock(),
        )
        self._step("committed", profile)

    def _step(self, step: str, profile: str) -> None:
        if self.on_step is not None:
            self.on_step(step, profile)

    def _log_summary(self, report: RollupReport) -> None:
        level = "warning" if report.outcome in ("deferred", "failed", "slot_busy") else "info"
        fields = {k: v for k, v in report.to_json().items() if k not in ("plan", "profile", "run_id")}
        getattr(log, level)("rollup finished", **fields)


_COMMITTED_OUTCOMES = frozenset({"nothing_new", "promoted", "reinforced"})


def _iso(ts: datetime | None) -> str | None:
    return None if ts is None else ts.astimezone(UTC).isoformat(timespec="microseconds")


def _src(tags: Sequence[str]) -> str | None:
    for t in tags:
        if t.startswith("src:"):
            return t[4:]
    return None
