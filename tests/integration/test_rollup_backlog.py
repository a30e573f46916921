"""No fact left behind, on the embedded store: units beyond one batch stay pending, the watermark
moves only past judged batches, and every unit ends promoted, merged or dropped with a reason."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from dreamer.backends.base import MemoryUnit, RetainItem
from dreamer.backends.embedded.backend import EmbeddedBackend
from dreamer.backends.forwarding import ForwardingBackend
from dreamer.commands.status import status_command
from dreamer.config import Config
from dreamer.errors import TransientBackendError
from dreamer.rollup.pipeline import Rollup
from dreamer.rollup.report import RollupReport
from dreamer.state import StateStore, Watermark
from tests.support.configs import config_data, loaded
from tests.support.held import assert_profile_held

REPO = Path(__file__).resolve().parents[2]
TOP_N = 2

#: Six distinct facts (3 x top_n) and two pieces of chatter, as LoCoMo sessions phrase them.
FACTS = [
    "Caroline attended an LGBTQ support group on 7 May 2023.",
    "Melanie painted a sunrise over a lake in 2022.",
    "Jon lost his banking job and plans to open a dance studio.",
    "Gina started an online clothing store after losing her job at Door Dash.",
    "Nate won his first video game tournament playing Counter-Strike.",
    "Joanna wrote a screenplay that was accepted at a film festival.",
]
CHATTER = [
    "James and John catch up on recent events at 9:23 pm on 21 January, 2022.",
    "The conversation ended with mutual goodbyes.",
]


def make_config(tmp_path: Path, *, max_batches: int = 1, **sections: Any) -> Config:
    data = config_data(
        {"global": {}, "shared": {}, "research": {"access": "read_write"}},
        {"research": {"top_n": TOP_N}},
        state_dir="state",
        slot={"acquire_timeout_s": 2},
        # Batches of top_n on the extractive path too: these tests are about batches and backlogs.
        rollup={"max_batches_per_run": max_batches, "post_consolidate": False, "extractive_batch": TOP_N},
        **sections,
    )
    return loaded(tmp_path, data)


async def seed(cfg: Config, texts: list[str]) -> list[MemoryUnit]:
    """Retain ``texts`` (one write each, so the stream order is the list order); the stored units."""
    backend = EmbeddedBackend(cfg.embedded_path)
    bank = cfg.bank_id("research")
    try:
        for text in texts:
            await backend.retain(bank, [RetainItem(content=text)])
        return await backend.all_units(bank)
    finally:
        await backend.aclose()


async def run_once(cfg: Config, wrap: Any = None, **kw: Any) -> RollupReport:
    inner = EmbeddedBackend(cfg.embedded_path)
    backend = wrap(inner) if wrap is not None else inner
    try:
        with StateStore.open(cfg.state_path) as state:
            return await Rollup(cfg, backend, state).run("research", **kw)
    finally:
        await inner.aclose()


async def backlog(cfg: Config) -> int:
    backend = EmbeddedBackend(cfg.embedded_path)
    try:
        with StateStore.open(cfg.state_path) as state:
            return len(await Rollup(cfg, backend, state).backlog("research"))
    finally:
        await backend.aclose()


async def assert_held(cfg: Config) -> set[str]:
    """Every unit the runs summarised so far (not chatter, not in the backlog) is held by the ledger
    cards citing it (tests/support/held.py); their ids."""
    backend = EmbeddedBackend(cfg.embedded_path)
    try:
        with StateStore.open(cfg.state_path) as state:
            return {u.id for u in await assert_profile_held(cfg, backend, state, "research")}
    finally:
        await backend.aclose()


def provenance(cfg: Config) -> set[str]:
    """Every unit id some ledger card names as a source."""
    with StateStore.open(cfg.state_path) as state:
        return {i for card in state.ledger(cfg.bank_id("global")) for i in card.source_ids}


def watermark(cfg: Config) -> Watermark:
    with StateStore.open(cfg.state_path) as state:
        return state.watermark("research")


async def upstream_ids(cfg: Config) -> list[str]:
    backend = EmbeddedBackend(cfg.embedded_path)
    try:
        return [u.document_id or "" for u in await backend.all_units(cfg.bank_id("global"))]
    finally:
        await backend.aclose()


def accounted(report: RollupReport) -> int:
    return (
        report.units_promoted
        + report.units_merged
        + report.units_chatter
        + report.units_left_out
        + report.units_pending
    )


async def drain(cfg: Config, runs: int = 6) -> list[RollupReport]:
    """Run until the backlog is empty (at most ``runs`` times)."""
    reports = []
    for _ in range(runs):
        reports.append(await run_once(cfg))
        if await backlog(cfg) == 0:
            break
    return reports


class TestNoUnitLost:
    async def test_three_times_top_n_units_all_reach_a_card_over_runs(self, tmp_path: Path) -> None:
        """With one batch per run, 3 x top_n facts take three runs (the gate runs for a backlog
        without new writes) and every fact ends in a card's provenance; chatter is counted."""
        cfg = make_config(tmp_path)
        units = await seed(cfg, [*FACTS[:3], CHATTER[0], *FACTS[3:], CHATTER[1]])
        reports = await drain(cfg)
        assert [r.outcome for r in reports] == ["promoted"] * 3, [(r.outcome, r.reason) for r in reports]
        assert all(accounted(r) == r.units_seen for r in reports), [r.counts() for r in reports]
        assert [r.units_pending for r in reports] == [6, 3, 0]
        facts = {u.id for u in units if u.text in FACTS}
        assert facts <= provenance(cfg)
        assert sum(r.units_promoted + r.units_merged for r in reports) == len(FACTS)
        assert sum(r.units_chatter for r in reports) == len(CHATTER)
        assert sum(r.dropped.get("contact record", 0) for r in reports) == len(CHATTER)
        assert not [d for d, n in Counter(await upstream_ids(cfg)).items() if n > 1]
        assert await assert_held(cfg) == facts

    async def test_enough_batches_judge_everything_in_one_run(self, tmp_path: Path) -> None:
        """With three batches allowed, one run summarises all 3 x top_n facts and leaves no backlog;
        the next run is idle."""
        cfg = make_config(tmp_path, max_batches=3)
        units = await seed(cfg, FACTS)
        report = await run_once(cfg)
        assert report.batches == 3 and report.units_pending == 0, report.counts()
        assert report.units_promoted == len(FACTS)
        assert {u.id for u in units} <= provenance(cfg)
        assert await assert_held(cfg) == {u.id for u in units}
        assert (await run_once(cfg)).outcome == "idle"

    async def test_a_restated_fact_in_a_later_batch_merges_into_the_earlier_card(
        self, tmp_path: Path
    ) -> None:
        """A later batch's restatement of an earlier batch's fact reinforces that card: its unit
        id joins the card's sources and it counts as merged, not lost."""
        cfg = make_config(tmp_path, max_batches=3)
        units = await seed(
            cfg, [FACTS[0], FACTS[1], "Caroline attended an LGBTQ support group on 7 May 2023!", FACTS[2]]
        )
        report = await run_once(cfg)
        assert report.units_merged == 1 and report.reinforced == 1, [p.to_json() for p in report.plan]
        assert {u.id for u in units} <= provenance(cfg)
        assert await assert_held(cfg) == {u.id for u in units}

    async def test_a_dry_run_plans_every_batch_and_moves_nothing(self, tmp_path: Path) -> None:
        """--dry-run plans the batches a run would judge, reports the rest pending, writes nothing."""
        cfg = make_config(tmp_path, max_batches=2)
        await seed(cfg, FACTS)
        report = await run_once(cfg, dry_run=True)
        assert report.outcome == "dry_run"
        assert report.batches == 2 and report.units_pending == 2 and len(report.plan) == 4
        assert watermark(cfg).created_at is None and await upstream_ids(cfg) == []


class FailingRetain(ForwardingBackend):
    """A fault a real embedded store cannot produce on demand: the second retain (the second
    batch's promotion) fails as a server that went away would."""

    def __init__(self, inner: Any) -> None:
        super().__init__(inner)
        self.retains = 0

    async def retain(self, bank_id: str, items: Any) -> Any:
        self.retains += 1
        if self.retains == 2:
            raise TransientBackendError("injected: the store went away during the second batch")
        return await self.inner.retain(bank_id, items)


class TestFailureBetweenBatches:
    async def test_a_failed_second_batch_leaves_the_watermark_past_the_first_only(
        self, tmp_path: Path
    ) -> None:
        """A run whose second batch fails ends deferred with the first batch committed: the
        watermark covers exactly its units, the rest stay in the backlog, and the next run promotes
        them, each card once upstream."""
        cfg = make_config(tmp_path, max_batches=3, retry={"max_attempts": 1})
        units = await seed(cfg, FACTS)
        report = await run_once(cfg, wrap=FailingRetain)
        assert report.outcome == "deferred", report.reason
        first = {u.id for u in units[:TOP_N]}
        assert provenance(cfg) == first
        assert await assert_held(cfg) == first
        mark = watermark(cfg)
        assert mark.created_at == units[TOP_N - 1].created_at
        assert await backlog(cfg) == len(FACTS) - TOP_N
        again = await run_once(cfg)
        assert again.outcome == "promoted" and again.units_seen == len(FACTS) - TOP_N, again.reason
        assert {u.id for u in units} <= provenance(cfg)
        assert await assert_held(cfg) == {u.id for u in units}
        assert not [d for d, n in Counter(await upstream_ids(cfg)).items() if n > 1]

    async def test_a_commit_by_another_run_between_batches_ends_the_run_busy(self, tmp_path: Path) -> None:
        """The watermark stays a compare-and-set per batch: when another process commits between
        this run's batches, the second batch commits nothing and the run ends busy."""
        cfg = make_config(tmp_path, max_batches=3)
        await seed(cfg, FACTS)

        class OtherRunCommits(ForwardingBackend):
            """Before the second batch's retain, a second state connection (as another process would)
            commits a watermark of its own."""

            retains = 0

            async def retain(self, bank_id: str, items: Any) -> Any:
                type(self).retains += 1
                if type(self).retains == 2:
                    with StateStore.open(cfg.state_path) as other:
                        stored = other.watermark("research")
                        other.record_run_start("other", "rollup:research", stored.rolled_at or _epoch())
                        other.commit_rollup(
                            profile="research",
                            bank_id=cfg.bank_id("research"),
                            watermark=stored,
                            promoted=[],
                            reinforced=[],
                            run_id="other",
                            outcome="nothing_new",
                            detail="",
                            counts={},
                            finished_at=_epoch(),
                            expected=stored,
                        )
                return await self.inner.retain(bank_id, items)

        report = await run_once(cfg, wrap=OtherRunCommits)
        assert report.outcome == "busy", report.reason
        assert watermark(cfg).rolled_at == _epoch()


def _epoch() -> datetime:
    return datetime(2001, 1, 1, tzinfo=UTC)


class TestCrashBetweenBatches:
    async def test_sigkill_after_the_first_batch_commit_loses_nothing(self, tmp_path: Path) -> None:
        """Killed right after the first batch's commit, the watermark covers that batch only; the
        rerun judges the rest and upstream ends as after a clean run, each card once."""
        reference = tmp_path / "reference"
        reference.mkdir()
        ref_cfg = make_config(reference, max_batches=3)
        await seed(ref_cfg, FACTS)
        await run_once(ref_cfg)
        expected = sorted(await upstream_ids(ref_cfg))
        assert len(await assert_held(ref_cfg)) == len(FACTS)

        crash = tmp_path / "crash"
        crash.mkdir()
        cfg = make_config(crash, max_batches=3)
        units = await seed(cfg, FACTS)
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "tests.support.crash_rollup",
                str(crash / "config.toml"),
                "research",
                "committed",
            ],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == -9, proc.stderr
        assert provenance(cfg) == {u.id for u in units[:TOP_N]}
        assert await backlog(cfg) == len(FACTS) - TOP_N
        assert await assert_held(cfg) == {u.id for u in units[:TOP_N]}
        await run_once(cfg)
        assert sorted(await upstream_ids(cfg)) == expected
        assert {u.id for u in units} <= provenance(cfg)
        assert await assert_held(cfg) == {u.id for u in units}


class TestStatusBacklog:
    async def test_status_shows_the_backlog_and_it_drains_to_zero(self, tmp_path: Path) -> None:
        """`dreamer status` (JSON and text) shows the units after the watermark no run has judged
        yet, and the number reaches 0 once runs have drained them."""
        cfg = make_config(tmp_path)
        await seed(cfg, FACTS)

        async def shown() -> tuple[int, str]:
            out = io.StringIO()
            await status_command(cfg, as_json=True, out=out)
            (row,) = json.loads(out.getvalue())["profiles"]
            text = io.StringIO()
            await status_command(cfg, as_json=False, out=text)
            return row["backlog"], text.getvalue()

        count, text = await shown()
        assert count == len(FACTS) and f"backlog {count};" in text, text
        first = await run_once(cfg)
        count, text = await shown()
        assert count == first.units_pending == len(FACTS) - TOP_N and f"backlog {count};" in text
        await drain(cfg)
        count, text = await shown()
        assert count == 0 and "backlog 0;" in text
        await assert_held(cfg)
