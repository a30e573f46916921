"""compress_entries in a whole audit on real agent folders: dry run shows before and after and changes
nothing, applying rewrites through the store and records it in the ledger, and the reflect path runs
under the real slot lock with each answer gated."""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import anyio.from_thread
import pytest

from dreamer.backends.base import Budget, ReflectResult, TagsMatch
from dreamer.backends.embedded.backend import EmbeddedBackend
from dreamer.backends.forwarding import ForwardingBackend
from dreamer.errors import TransientBackendError
from dreamer.hermes.audit.compress_reflect import ReflectCompressor, reflect_compress
from dreamer.hermes.audit.ledger import parse_ledger
from dreamer.hermes.audit.report import AuditReport, AuditStatus
from dreamer.hermes.audit.run import audit_agent
from dreamer.hermes.audit.settings import AgentFiles, AuditSettings
from dreamer.llm.usage import TokenUsage
from dreamer.retry import RetryPolicy
from dreamer.slot import SlotLock

NOW = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)
CANARY = "CANARY: Do not modify this line"
FORCED = AuditSettings(force=True, url_timeout_s=0.5)
WORDY = (
    "Please note that the Nextcloud instance is basically running version 28.0.4 in Docker on docker01 "
    "and its data directory is /mnt/tank/nextcloud in order to keep it on the ZFS pool."
)
WORDY_TOO = (
    "Koby is not allowed to push directly to the release branch; he has to open a pull request that is "
    "reviewed by at least two people, which means that a hotfix takes a day."
)
SHORT = "Ada lives in Lisbon."


def make_agent(root: Path) -> AgentFiles:
    memories = root / "memories"
    memories.mkdir(parents=True)
    (memories / "MEMORY.md").write_text("\n§\n".join([CANARY, WORDY, WORDY_TOO]), encoding="utf-8")
    (memories / "USER.md").write_text("\n§\n".join([CANARY, SHORT]), encoding="utf-8")
    (memories / "MEMORY_WRITERS.md").write_text("- dreamer\n", encoding="utf-8")
    return AgentFiles("a", memories)


def entries(path: Path) -> list[str]:
    return [e.strip() for e in path.read_text(encoding="utf-8").split("\n§\n")]


def lock_is_free(path: Path) -> bool:
    """Whether another process could take `path`'s flock now (`flock -n` takes and drops it)."""
    return subprocess.run(["flock", "-n", "-E", "99", str(path), "true"], check=False).returncode == 0


class TestByRules:
    def test_dry_run_shows_before_and_after_and_changes_nothing(self, tmp_path: Path) -> None:
        """A dry run plans a COMPRESS action per long wordy entry, with the entry before and the
        shorter text after, and leaves every file as it was."""
        agent = make_agent(tmp_path)
        before = {p.name: p.read_bytes() for p in agent.memories_dir.iterdir()}
        report = audit_agent(agent, AuditSettings(force=True, dry_run=True), NOW)
        compress = [a for a in report.actions if a.kind == "COMPRESS"]
        assert {a.entry for a in compress} == {WORDY, WORDY_TOO}
        for action in compress:
            assert (
                action.outcome == "planned" and action.new_text and len(action.new_text) < len(action.entry)
            )
        assert report.counts["compressions"] == 2
        assert "would shorten 2" in report.summary
        assert {p.name: p.read_bytes() for p in agent.memories_dir.iterdir()} == before

    def test_apply_rewrites_and_the_ledger_records_before_and_after(self, tmp_path: Path) -> None:
        """Applied, the file holds the shorter texts (canary and short entries untouched) and the
        ledger block counts the compressions and shows each rewrite."""
        agent = make_agent(tmp_path)
        report = audit_agent(agent, FORCED, NOW)
        assert report.status is AuditStatus.COMPLETE
        memory = entries(agent.memory_path)
        assert memory[0] == CANARY and WORDY not in memory and len(memory) == 3
        assert "28.0.4" in memory[1] and "/mnt/tank/nextcloud" in memory[1] and "docker01" in memory[1]
        assert entries(agent.user_path) == [CANARY, SHORT]
        block = parse_ledger(agent.ledger_path.read_text(encoding="utf-8"))[-1]
        assert block.fields["compressions"] == "2"
        ledger = agent.ledger_path.read_text(encoding="utf-8")
        assert "- action: COMPRESS MEMORY.md [applied]" in ledger and " → '" in ledger

    def test_compress_entries_off_leaves_wording_alone(self, tmp_path: Path) -> None:
        """With compress_entries false no entry is reworded."""
        agent = make_agent(tmp_path)
        report = audit_agent(agent, AuditSettings(force=True, compress_entries=False), NOW)
        assert report.counts["compressions"] == 0
        assert WORDY in entries(agent.memory_path)


class ScriptedReflect(ForwardingBackend):
    """The embedded store with an LLM reflect whose answer is scripted: a backend-level stand-in,
    because the test server's LLM stub cannot be told to drop one detail from one rewrite. It records
    whether the slot lock was held while it answered."""

    def __init__(self, inner: EmbeddedBackend, slot_path: Path, answer: ReflectResult | Exception) -> None:
        super().__init__(inner)
        self.reflect_uses_llm = True
        self.slot_path = slot_path
        self.answer = answer
        self.held: list[bool] = []
        self.tags: list[tuple[str, ...] | None] = []

    async def reflect(
        self,
        bank_id: str,
        query: str,
        *,
        budget: Budget = "low",
        response_schema: Mapping[str, Any] | None = None,
        tags: Sequence[str] | None = None,
        tags_match: TagsMatch = "any",
    ) -> ReflectResult:
        self.held.append(not await asyncio.to_thread(lock_is_free, self.slot_path))
        self.tags.append(None if tags is None else tuple(tags))
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


def audit_with_reflect(
    tmp_path: Path, answer: ReflectResult | Exception
) -> tuple[AuditReport, ScriptedReflect]:
    agent = make_agent(tmp_path / "agent")
    slot_path = tmp_path / "slot.lock"
    backend = ScriptedReflect(EmbeddedBackend(tmp_path / "store.sqlite3"), slot_path, answer)
    slot = SlotLock(slot_path, acquire_timeout_s=5.0, poll_interval_s=0.05)
    policy = RetryPolicy(max_attempts=1, base_delay_s=0.01, max_delay_s=0.01, retry_after_cap_s=0.01)
    compressor = ReflectCompressor(
        lambda texts: reflect_compress(
            backend, "private__hermes", texts, budget="low", policy=policy, slot=slot
        ),
        anyio.from_thread.run,
        FORCED.compress_min_chars,
    )

    async def main() -> AuditReport:
        try:
            return await anyio.to_thread.run_sync(
                lambda: audit_agent(agent, FORCED, NOW, compressor=compressor)
            )
        finally:
            await backend.aclose()

    return anyio.run(main), backend


class TestByReflect:
    def test_a_rewrite_losing_a_detail_is_rejected_and_the_entry_kept(self, tmp_path: Path) -> None:
        """Under the held slot lock, the reflect's rewrite of entry 1 (all details kept) is applied,
        its rewrite of entry 2 (the "two people" dropped) is rejected with a note, entry 2 stays."""
        answer = ReflectResult(
            text="",
            structured={
                "entries": [
                    {"number": 1, "text": "Nextcloud 28.0.4 runs in Docker on docker01, data in /mnt/tank/nextcloud (ZFS)."},  # noqa: E501
                    {"number": 2, "text": "Koby may not push to the release branch; PRs need review."},
                ]
            },
        )  # fmt: skip
        report, backend = audit_with_reflect(tmp_path, answer)
        assert backend.held == [True]
        compress = [a for a in report.actions if a.kind == "COMPRESS"]
        assert [(a.entry, a.outcome) for a in compress] == [(WORDY, "applied")]
        assert "(reflect)" in compress[0].reason
        assert any("rejected" in note and "number 2" in note for note in report.notes), report.notes
        memory = entries(tmp_path / "agent" / "memories" / "MEMORY.md")
        assert WORDY_TOO in memory and WORDY not in memory

    def test_a_failed_reflect_falls_back_to_the_rules(self, tmp_path: Path) -> None:
        """A reflect that fails (server unavailable) leaves a note and the rules compress instead."""
        report, _ = audit_with_reflect(tmp_path, TransientBackendError("server unavailable"))
        assert any("compressed by rules" in note for note in report.notes), report.notes
        assert {a.entry for a in report.actions if a.kind == "COMPRESS"} == {WORDY, WORDY_TOO}
        assert all("(rules)" in a.reason for a in report.actions if a.kind == "COMPRESS")


@pytest.mark.hindsight
def test_against_the_real_server_no_answer_loses_a_detail(
    tmp_path: Path, hindsight_url: str, hindsight_api_key: str, fresh_bank_id: str
) -> None:
    """Through the real Hindsight test server (its LLM stub answers whatever it answers), the audit
    completes, every entry it shortened kept each protected detail, the canary is untouched, and the
    slot lock is free afterwards: the gate, not the model, decides."""
    from pydantic import SecretStr

    from dreamer.backends.base import RetainItem
    from dreamer.backends.hindsight.backend import HindsightBackend
    from dreamer.config import HindsightBackendConfig
    from dreamer.hermes.audit.compress import lost_details

    agent = make_agent(tmp_path / "agent")
    slot_path = tmp_path / "slot.lock"
    settings = HindsightBackendConfig(url=hindsight_url, api_key_env=None)
    settings = settings.model_copy(update={"api_key": SecretStr(hindsight_api_key)})
    backend = HindsightBackend(settings)
    slot = SlotLock(slot_path, acquire_timeout_s=30.0, poll_interval_s=0.05)
    policy = RetryPolicy(max_attempts=2, base_delay_s=0.05, max_delay_s=0.1, retry_after_cap_s=0.1)
    compressor = ReflectCompressor(
        lambda texts: reflect_compress(backend, fresh_bank_id, texts, budget="low", policy=policy, slot=slot),
        anyio.from_thread.run,
        FORCED.compress_min_chars,
    )

    async def main() -> AuditReport:
        try:
            await backend.retain(fresh_bank_id, [RetainItem("The bank exists for this test.")])
            return await anyio.to_thread.run_sync(
                lambda: audit_agent(agent, FORCED, NOW, compressor=compressor)
            )
        finally:
            await backend.aclose()

    report = anyio.run(main)
    assert report.status is AuditStatus.COMPLETE, report.to_json()
    # Each long entry was either rewritten (by the reflect or, unanswered, by the rules) or rejected.
    compressed = {a.entry for a in report.actions if a.kind == "COMPRESS"}
    rejected = {entry for entry in (WORDY, WORDY_TOO) if any(entry[:40] in note for note in report.notes)}
    assert compressed | rejected == {WORDY, WORDY_TOO}
    for action in report.actions:
        if action.kind == "COMPRESS":
            assert action.new_text is not None and lost_details(action.entry, action.new_text) == ()
    memory = entries(agent.memory_path)
    assert memory[0] == CANARY and len(memory) == 3
    assert lock_is_free(slot_path)


# --- the LLM tokens of the compression reflect ---------------------------------------------------

LLM_KEYS = ("llm_calls", "llm_calls_estimated", "llm_prompt_tokens", "llm_completion_tokens", "llm_tokens")
USABLE = {
    "entries": [
        {"number": 1, "text": "Nextcloud 28.0.4 runs in Docker on docker01, data in /mnt/tank/nextcloud (ZFS)."},  # noqa: E501
    ]
}  # fmt: skip


def llm_counts(report: AuditReport) -> dict[str, int]:
    return {key: report.counts[key] for key in LLM_KEYS if key in report.counts}


class TestTokens:
    def test_a_usable_answers_tokens_are_in_the_report_and_its_json(self, tmp_path: Path) -> None:
        """The reflect's reported usage is counted under the run record's llm_* names, in the
        report's counts and so in `dreamer audit --json`."""
        answer = ReflectResult(text="", structured=USABLE, usage=TokenUsage(prompt=412, completion=57))
        report, _ = audit_with_reflect(tmp_path, answer)
        expected = {
            "llm_calls": 1,
            "llm_calls_estimated": 0,
            "llm_prompt_tokens": 412,
            "llm_completion_tokens": 57,
            "llm_tokens": 469,
        }
        assert llm_counts(report) == expected
        assert report.counts["compressions"] >= 1
        assert {k: report.to_dict()["counts"][k] for k in LLM_KEYS} == expected

    def test_an_unusable_answer_still_counts_and_estimated_usage_is_told_apart(self, tmp_path: Path) -> None:
        """An answer without a usable shape falls back to the rules, but its tokens were spent: they
        count, and usage the server did not report counts as an estimated call."""
        answer = ReflectResult(text="no idea", usage=TokenUsage(prompt=90, completion=3, estimated=True))
        report, _ = audit_with_reflect(tmp_path, answer)
        assert any("compressed by rules" in note for note in report.notes), report.notes
        assert llm_counts(report) == {
            "llm_calls": 1,
            "llm_calls_estimated": 1,
            "llm_prompt_tokens": 90,
            "llm_completion_tokens": 3,
            "llm_tokens": 93,
        }

    def test_no_usage_and_a_failed_call_count_nothing(self, tmp_path: Path) -> None:
        """A reflect that used no LLM (usage None) or failed counts no call and no token (the
        reflect compressor's counts are there, zero); the rules alone add no llm_* count."""
        zero = dict.fromkeys(LLM_KEYS, 0)
        report, _ = audit_with_reflect(tmp_path / "none", ReflectResult(text="", structured=USABLE))
        assert llm_counts(report) == zero
        report, _ = audit_with_reflect(tmp_path / "failed", TransientBackendError("server unavailable"))
        assert llm_counts(report) == zero
        assert llm_counts(audit_agent(make_agent(tmp_path / "rules"), FORCED, NOW)) == {}

    def test_the_daemons_audit_job_records_the_tokens_for_the_daily_total(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """The audit job's run record carries the reflect's tokens, so the day's LLM token total
        (status, rollup.max_llm_tokens_per_day) counts them."""
        import dreamer.jobs.open as wiring
        from dreamer.jobs.audit import run_audit_job
        from dreamer.service.plan import plan_jobs
        from dreamer.service.runner import execute_job
        from dreamer.state import StateStore
        from tests.support.configs import config_data, loaded

        agent = make_agent(tmp_path / "agent")
        data = config_data(
            agents={"a": {"memories_dir": str(agent.memories_dir)}},
            audit={"compress_bank": "global"},
            slot={"lock_path": str(tmp_path / "slot.lock"), "acquire_timeout_s": 5.0},
            retry={"max_attempts": 1, "base_delay_s": 0.0},
            state_dir=str(tmp_path / "state"),
        )
        config = loaded(tmp_path, data)
        answer = ReflectResult(text="", structured=USABLE, usage=TokenUsage(prompt=300, completion=40))
        backend = ScriptedReflect(EmbeddedBackend(tmp_path / "store.sqlite3"), tmp_path / "slot.lock", answer)
        monkeypatch.setattr(wiring, "open_backend", lambda _config, **_: backend)

        async def main() -> None:
            with StateStore.open(config.state_path) as state:
                await execute_job(config, plan_jobs(config)["audit:a"], run_audit_job, recorder=state)

        anyio.run(main)
        assert backend.held == [True]
        with StateStore.open(config.state_path) as state:
            (run,) = state.runs("audit:a")
            assert run.outcome == "complete", run.detail
            assert {k: run.counts[k] for k in LLM_KEYS} == {
                "llm_calls": 1,
                "llm_calls_estimated": 0,
                "llm_prompt_tokens": 300,
                "llm_completion_tokens": 40,
                "llm_tokens": 340,
            }
            assert state.llm_tokens_since(NOW.replace(year=2000)) == 340
