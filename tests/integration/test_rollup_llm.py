"""The roll-up on the embedded store with an [llm] model (the LLM stub on 127.0.0.1, scripted to
behave or to misbehave): every unit held after the run, the report's counts matching what the
model did, tokens counted, and both token budgets."""

from __future__ import annotations

import io
import json
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from dreamer.backends.base import RetainItem
from dreamer.backends.embedded.backend import EmbeddedBackend
from dreamer.commands.rollup import rollup_command
from dreamer.commands.status import status_command
from dreamer.config import Config
from dreamer.jobs.spec import rollup_job_id
from dreamer.outcomes import Outcome
from dreamer.rollup.pipeline import Rollup
from dreamer.rollup.report import RollupReport
from dreamer.state import StateStore
from tests.hindsight_fixtures import LLMStub
from tests.support.configs import config_data, loaded
from tests.support.held import assert_profile_held

WRITABLE = {"access": "read_write"}
MARKER = "marker7q-llm-rollup"


def write_config(tmp_path: Path, url: str, *, top_n: int = 10, **rollup: Any) -> Config:
    data = config_data(
        {"global": {}, "shared": {}, "research": WRITABLE},
        {"research": {"top_n": top_n}},
        state_dir="state",
        slot={"acquire_timeout_s": 2},
        retry={"max_attempts": 2, "base_delay_s": 0, "max_delay_s": 0},
        rollup={"post_consolidate": False, **rollup},
        llm={"provider": "openai", "base_url": url, "model": "stub", "timeout_s": 30},
    )
    return loaded(tmp_path, data)


async def seed(cfg: Config, texts: list[str]) -> dict[str, str]:
    """Retain ``texts`` into the research bank; their ids by text."""
    backend = EmbeddedBackend(cfg.embedded_path)
    try:
        bank = cfg.bank_id("research")
        await backend.retain(bank, [RetainItem(content=t) for t in texts])
        return {u.text: u.id for u in await backend.all_units(bank)}
    finally:
        await backend.aclose()


async def run_once(cfg: Config) -> RollupReport:
    """One run as the daemon's runner makes it: its run record started first, so that its counts
    (tokens among them) are kept; every unit held afterwards."""
    backend = EmbeddedBackend(cfg.embedded_path)
    try:
        with StateStore.open(cfg.state_path) as state:
            run_id = uuid.uuid4().hex[:12]
            state.record_run_start(run_id, rollup_job_id("research"), datetime.now(UTC))
            report = await Rollup(cfg, backend, state).run("research", run_id=run_id)
            assert await assert_profile_held(cfg, backend, state, "research")
            return report
    finally:
        await backend.aclose()


async def upstream_texts(cfg: Config) -> list[str]:
    backend = EmbeddedBackend(cfg.embedded_path)
    try:
        return sorted(u.text for u in await backend.all_units(cfg.bank_id("global")))
    finally:
        await backend.aclose()


def cards(*items: tuple[str, list[str]]) -> str:
    return json.dumps({"cards": [{"text": t, "kind": "fact", "source_ids": ids} for t, ids in items]})


H36 = f"Server h1b36 has address 10.0.0.36 and 108 GB of disk ({MARKER})."
H99 = "Server h1b99 has address 10.0.0.99 and 297 GB of disk."
AT_0230 = "The restic backup job of host atlas runs at 02:30."
AT_0330 = "The restic backup job of host atlas runs at 03:30."
TEA = "Sam does not like green tea."
ADA = "Ada sails on Lake Geneva every summer."


class TestTheModelWrites:
    async def test_its_cards_are_promoted_and_its_tokens_counted(
        self, tmp_path: Path, stub_url: str, stub: LLMStub
    ) -> None:
        """A model that cites what it says: its cards go upstream as written, accepted by
        grounding, and the run counts the server's tokens."""
        cfg = write_config(tmp_path, stub_url)
        ids = await seed(cfg, [H36, H99, ADA])
        stub.script(
            match=MARKER,
            kind="other",
            content=cards(
                (f"{H36} {H99}", [ids[H36], ids[H99]]), ("Every summer Ada sails on Lake Geneva.", [ids[ADA]])
            ),
        )
        report = await run_once(cfg)
        assert report.outcome == Outcome.PROMOTED and report.summariser == "llm"
        assert (report.cards_accepted, sum(report.cards_rejected.values()), report.units_recarded) == (
            2,
            0,
            0,
        )
        assert report.llm_calls == 1 and report.llm_calls_estimated == 0 and report.llm_tokens > 0
        assert await upstream_texts(cfg) == sorted([f"{H36} {H99}", "Every summer Ada sails on Lake Geneva."])
        assert report.counts()["llm_tokens"] == report.llm_tokens

    async def test_the_call_holds_the_slot_lock(self, tmp_path: Path, stub_url: str, stub: LLMStub) -> None:
        """The completion is LLM-backed: it is made holding the accelerator slot."""
        cfg = write_config(tmp_path, stub_url)
        await seed(cfg, [H36])
        stub.script(match=MARKER, kind="other", content=cards((H36, [])))
        report = await run_once(cfg)
        assert report.slot_held_s > 0 and report.llm_calls == 1


class TestTheModelMisbehaves:
    async def test_no_unit_is_lost_and_the_counts_say_what_happened(
        self, tmp_path: Path, stub_url: str, stub: LLMStub
    ) -> None:
        """Cites without saying, fuses two values, invents a date, cites an unknown id: after the
        run every unit is held and the report counts each rejection and re-carded unit."""
        cfg = write_config(tmp_path, stub_url)
        ids = await seed(cfg, [H36, H99, AT_0230, AT_0330, TEA, ADA])
        stub.script(
            match=MARKER,
            kind="other",
            content=cards(
                (H36, [ids[H36], ids[H99]]),
                ("The restic backup job of host atlas runs at 02:30 or 03:30.", [ids[AT_0230], ids[AT_0330]]),
                ("Sam does not like green tea since 2019.", [ids[TEA]]),
                (ADA, ["no-such-id"]),
            ),
        )
        report = await run_once(cfg)
        assert report.cards_rejected == {"fused": 1, "invented": 1}
        assert report.cards_accepted == 2 and report.claims_dropped == 1
        assert report.units_recarded == 4  # h99, both backup times, the tea
        assert [r.reason.name for r in report.rejections] == ["FUSED", "INVENTED"]
        texts = await upstream_texts(cfg)
        assert H99 in texts and AT_0230 in texts and AT_0330 in texts and TEA in texts
        assert not any("2019" in t or "or 03:30" in t for t in texts)
        assert report.units_left_out == 0

    async def test_a_dry_run_status_and_metrics_show_what_grounding_did(
        self, tmp_path: Path, stub_url: str, stub: LLMStub
    ) -> None:
        """`dreamer rollup --dry-run` prints each rejection with its reason; after a real run,
        `status --json` has the run's grounding and token counts and today's tokens, and the run
        records sum them for the metrics file."""
        cfg = write_config(tmp_path, stub_url)
        ids = await seed(cfg, [H36, AT_0230, AT_0330])
        stub.script(
            match=MARKER,
            kind="other",
            content=cards(
                (H36, [ids[H36]]),
                ("The restic backup job of host atlas runs at 02:30 or 03:30.", [ids[AT_0230], ids[AT_0330]]),
            ),
        )
        out, err = io.StringIO(), io.StringIO()
        assert await rollup_command(cfg, [], dry_run=True, since=None, as_json=False, out=out, err=err) == 0
        text = out.getvalue()
        assert "grounding: 1 cards accepted, 1 rejected (1 fused)" in text
        assert "rejected  The restic backup job of host atlas runs at 02:30 or 03:30." in text
        assert "why: fuses different values of one detail" in text
        report = await run_once(cfg)
        status = io.StringIO()
        await status_command(cfg, as_json=True, out=status)
        doc = json.loads(status.getvalue())
        counts = doc["profiles"][0]["last_run"]["counts"]
        assert (counts["cards_accepted"], counts["cards_rejected_fused"], counts["units_recarded"]) == (
            1,
            1,
            2,
        )
        assert counts["llm_tokens"] == report.llm_tokens > 0
        # The dry run's completion was spent too (the same prompt, so the same count): both count.
        assert doc["llm"]["tokens_today"] == 2 * report.llm_tokens
        with StateStore.open(cfg.state_path) as state:
            [total] = [t for t in state.run_totals() if t.outcome == "promoted"]
        assert total.sums == {
            "llm_tokens": report.llm_tokens,
            "cards_accepted": 1,
            "cards_rejected": 1,
            "units_recarded": 2,
        }

    async def test_a_cut_answer_is_carded_extractively(
        self, tmp_path: Path, stub_url: str, stub: LLMStub
    ) -> None:
        """JSON cut at the token cap (finish_reason length): counted, and every unit carded."""
        cfg = write_config(tmp_path, stub_url)
        ids = await seed(cfg, [H36, ADA])
        stub.script(match=MARKER, kind="other", content=cards((H36, [ids[H36]]))[:40], finish_reason="length")
        report = await run_once(cfg)
        assert (report.llm_truncated, report.llm_unreadable, report.cards_accepted) == (1, 1, 0)
        assert await upstream_texts(cfg) == sorted([H36, ADA])

    async def test_a_server_that_stays_down_defers_the_run(self, tmp_path: Path) -> None:
        """No LLM server: the run is deferred after its retries, nothing promoted, watermark kept."""
        cfg = write_config(tmp_path, "http://127.0.0.1:9")
        await seed(cfg, [H36])
        backend = EmbeddedBackend(cfg.embedded_path)
        try:
            with StateStore.open(cfg.state_path) as state:
                report = await Rollup(cfg, backend, state).run("research")
                assert report.outcome == Outcome.DEFERRED and "llm.base_url" in report.reason
                assert state.watermark("research").created_at is None
        finally:
            await backend.aclose()


class TestBudgets:
    async def test_a_run_budget_reached_mid_run_leaves_no_unit_behind(
        self, tmp_path: Path, stub_url: str, stub: LLMStub
    ) -> None:
        """With a per-run cap of one token, the first batch uses the model and the later ones are
        extractive; nothing is pending or left out, and the report says the budget was reached."""
        cfg = write_config(tmp_path, stub_url, top_n=2, max_llm_tokens_per_run=1)
        texts = [H36, H99, AT_0230, TEA, ADA]
        await seed(cfg, texts)
        stub.script(match=MARKER, kind="other", content=cards())
        report = await run_once(cfg)
        assert report.batches == 3 and report.llm_calls == 1 and report.budget_reached == "run"
        assert report.summariser == "mixed" and report.units_pending == 0 and report.units_left_out == 0
        assert len(await upstream_texts(cfg)) == len(texts)

    async def test_the_day_budget_counts_the_days_earlier_runs(
        self, tmp_path: Path, stub_url: str, stub: LLMStub
    ) -> None:
        """Once the day's runs used the daily cap, a new run summarises extractively from the start."""
        cfg = write_config(tmp_path, stub_url, max_llm_tokens_per_day=1)
        await seed(cfg, [H36])
        stub.script(match=MARKER, kind="other", content=cards((H36, [])))
        first = await run_once(cfg)
        assert first.llm_calls == 1 and first.budget_reached == ""
        await seed(cfg, [f"{ADA} ({MARKER})"])
        second = await run_once(cfg)
        assert (second.llm_calls, second.budget_reached, second.summariser) == (0, "day", "extractive")
        with StateStore.open(cfg.state_path) as state:
            today = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
            assert state.llm_tokens_since(today) == first.llm_tokens
