"""One roll-up run's state as it travels from step to step: :class:`RunContext`.

Plain state, no I/O: the pipeline (`dreamer.rollup.pipeline`) fills it step by step and the
planning of a batch's cards (`dreamer.rollup.planning`) reads it, so both see one shape of a run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from dreamer.backends.base import BankActivity, MemoryUnit, RetainItem
from dreamer.config import ProfileConfig
from dreamer.retry import RetryStats
from dreamer.rollup import dedup
from dreamer.rollup.batches import Batch, StreamCut
from dreamer.rollup.cards import CardDraft
from dreamer.rollup.promote import RunFacts
from dreamer.rollup.report import CardPlan, RollupReport
from dreamer.rollup.semantic import BatchVectors
from dreamer.rollup.summarise import Summariser
from dreamer.slot import SlotLock
from dreamer.state import Reinforcement, Watermark

__all__ = ["RunContext", "iso"]


@dataclass
class RunContext:
    """One run's inputs and what each step leaves for the next."""

    profile: str
    settings: ProfileConfig
    bank_id: str
    upstream_id: str
    report: RollupReport
    slot: SlotLock
    retry_stats: RetryStats
    activity: BankActivity | None
    since: datetime | None
    force: bool
    watermark: Watermark = field(default_factory=Watermark)
    new_watermark: Watermark = field(default_factory=Watermark)
    units: list[MemoryUnit] = field(default_factory=list)
    cut: StreamCut = field(default_factory=lambda: StreamCut((), ()))
    judged: int = 0
    batch: Batch = field(default_factory=lambda: Batch((), ()))
    selected: list[MemoryUnit] = field(default_factory=list)
    drafts: list[CardDraft] = field(default_factory=list)
    verdicts: list[dedup.Verdict] = field(default_factory=list)
    to_promote: list[tuple[CardPlan, RetainItem]] = field(default_factory=list)
    #: This batch's card plans, promoted or reinforcing (the report's ``plan`` holds the run's).
    plans: list[CardPlan] = field(default_factory=list)
    reinforced: list[Reinforcement] = field(default_factory=list)
    ledger_ids: frozenset[str] = frozenset()
    vectors: BatchVectors | None = None
    summariser: Summariser | None = None

    @property
    def dry_run(self) -> bool:
        return self.report.dry_run

    def start_batch(self, batch: Batch, overlap: timedelta) -> None:
        """Forget the previous batch; the watermark this batch's commit writes covers every unit
        judged so far. Units not judged yet keep counting as new for the gate."""
        self.batch = batch
        self.drafts, self.verdicts, self.to_promote, self.reinforced = [], [], [], []
        self.plans = []
        self.ledger_ids = frozenset()
        self.judged += len(batch.units)
        by_id = {u.id: u for u in self.units}
        self.selected = [by_id[u.id] for u in batch.substantive]
        advanced = self.watermark.advanced_to(((u.created_at, u.id) for u in batch.units), overlap)
        activity, unjudged = self.activity, len(self.units) - self.judged
        self.new_watermark = Watermark(
            advanced.created_at,
            advanced.seen,
            activity.unit_count - unjudged if activity is not None else self.watermark.unit_count,
            activity.last_write_at if activity is not None else self.watermark.last_write_at,
            self.watermark.rolled_at,
        )
        self.report.watermark_to = iso(self.new_watermark.created_at)

    def facts(self) -> RunFacts:
        return RunFacts(
            profile=self.profile,
            bank_id=self.bank_id,
            upstream_id=self.upstream_id,
            run_id=self.report.run_id,
            watermark_from=self.report.watermark_from,
            watermark_to=self.report.watermark_to,
            conflict_policy=self.settings.conflict_policy,
        )


def iso(ts: datetime | None) -> str | None:
    """A watermark time as the report shows it: UTC, ISO 8601 with microseconds."""
    return None if ts is None else ts.astimezone(UTC).isoformat(timespec="microseconds")
