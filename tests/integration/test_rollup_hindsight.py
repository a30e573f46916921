"""The roll-up end to end against a real Hindsight server: promotion, gating, the slot lock, backoff,
Retry-After and crash safety.

Needs the test server of ``scripts/hindsight-dev up`` (``DREAMER_TEST_HINDSIGHT_URL``,
``DREAMER_TEST_HINDSIGHT_API_KEY``, ``DREAMER_TEST_LLM_STUB_URL``); every test skips without it.
Other test runs share that server, so each test keeps to itself: its banks are named after its own
``fresh_bank_id`` (the *marker*), every sentence it retains carries the marker, and every fault it arms
in the LLM stub is limited to requests containing the marker (``match=``). Hindsight writes the bank
id into its reflect prompts as well, so a reflect on one of the test's banks always carries the marker.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import signal
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from structlog.testing import capture_logs

from dreamer import __version__
from dreamer.backends.base import RetainItem
from dreamer.backends.hindsight.backend import HindsightBackend
from dreamer.config import Config
from dreamer.jobs.spec import rollup_job_id
from dreamer.rollup.cards import CARD_KINDS
from dreamer.rollup.pipeline import Rollup
from dreamer.rollup.report import RollupReport
from dreamer.service.runner import run_rollups_now
from dreamer.state import StateStore, Watermark
from tests.hindsight_fixtures import HINDSIGHT_API_KEY_VAR, LLMStub, MarkedRequests
from tests.support import configs
from tests.support.held import assert_profile_held

pytestmark = [pytest.mark.hindsight]

REPO = Path(__file__).resolve().parents[2]
PROFILE = "research"
IDLE_PROFILE = "coder"
FACT_TYPES = ("world", "experience")


def sentences(marker: str) -> list[str]:
    """Distinctive homelab memories, each naming the marker so every request about them carries it."""
    return [
        f"Host atlas of {marker} runs its nightly restic backup to the NAS at 02:30.",
        f"Grafana of {marker} listens on port 3000 on host hermes-mon.",
        f"Nextcloud of {marker} runs version 27.1 on host atlas behind nginx.",
        f"The owner of {marker} prefers answers with links to the upstream documentation.",
    ]


# --- configuration ----------------------------------------------------------------------------


def config_data(
    url: str,
    bank_prefix: str,
    *,
    slot_timeout_s: float = 5.0,
    max_attempts: int = 3,
    base_delay_s: float = 0.2,
    max_delay_s: float = 1.0,
    retry_after_cap_s: float = 5.0,
) -> dict[str, Any]:
    """A configuration whose banks all start with ``bank_prefix`` and whose state (and slot lock)
    lives next to the config file; the API key is read from the test server's variable."""
    writable = {"access": "read_write"}
    return configs.config_data(
        {"global": {}, "shared": {}, PROFILE: writable, IDLE_PROFILE: writable},
        (PROFILE, IDLE_PROFILE),
        bank_id=lambda alias: f"{bank_prefix}-{alias}",
        state_dir="state",
        backend={
            "kind": "hindsight",
            "hindsight": {"url": url, "api_key_env": HINDSIGHT_API_KEY_VAR, "read_timeout_s": 120.0},
        },
        slot={"lock_path": "slot.lock", "acquire_timeout_s": slot_timeout_s, "poll_interval_s": 0.05},
        retry={
            "max_attempts": max_attempts,
            "base_delay_s": base_delay_s,
            "max_delay_s": max_delay_s,
            "retry_after_cap_s": retry_after_cap_s,
        },
    )


# --- what went over the wire ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Sent:
    """One request the backend sent: when (monotonic), what, and the status it got."""

    at: float
    method: str
    path: str
    status: int


class ForwardingTransport(httpx.AsyncBaseTransport):
    """Forwards every request to the real server and records it.

    With ``reflect_503`` set it is also a transport-level fake that injects a fault a real server
    cannot produce here: it answers ``POST .../reflect`` itself with 503 and ``Retry-After:
    <reflect_503>``. Hindsight 1.1 does gate reflect by admission control, but the test servers narrow
    only the retain lane; the reflect lane admits 16 requests per core and queues for 5 s, so a reflect
    503 would take dozens of reflects parked at once on a server other test runs share.
    """

    def __init__(self) -> None:
        self._inner = httpx.AsyncHTTPTransport()
        self.sent: list[Sent] = []
        self.reflect_503: str | None = None

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        at = time.monotonic()
        path = request.url.path
        if self.reflect_503 is not None and request.method == "POST" and path.endswith("/reflect"):
            response = httpx.Response(
                503,
                headers={"Retry-After": self.reflect_503},
                json={"detail": "reflect is at capacity (injected by the test transport)"},
                request=request,
            )
        else:
            response = await self._inner.handle_async_request(request)
        self.sent.append(Sent(at, request.method, path, response.status_code))
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()

    def reflects(self) -> list[Sent]:
        """The reflect requests sent so far, oldest first."""
        return [s for s in self.sent if s.method == "POST" and s.path.endswith("/reflect")]


# --- helpers ----------------------------------------------------------------------------------


@asynccontextmanager
async def opened(
    cfg: Config, transport: httpx.AsyncBaseTransport | None = None
) -> AsyncIterator[HindsightBackend]:
    """The configured Hindsight backend, closed afterwards."""
    backend = HindsightBackend(cfg.backend.hindsight, transport=transport)
    try:
        yield backend
    finally:
        await backend.aclose()


async def seed(cfg: Config, marker: str) -> set[str]:
    """Retain the marker's sentences into the profile's bank (synchronously); the ids of its facts."""
    bank_id = cfg.bank_id(PROFILE)
    async with opened(cfg) as backend:
        await backend.retain(
            bank_id, [RetainItem(content=" ".join(sentences(marker)), document_id=f"{marker}-seed")]
        )
        units = await backend.list_units_since(bank_id, None, fact_types=FACT_TYPES)
    assert units, "seeding stored no facts"
    return {u.id for u in units}


async def run_once(cfg: Config, backend: HindsightBackend, profile: str = PROFILE) -> RollupReport:
    """One roll-up job of ``profile``, run as the daemon and ``dreamer rollup`` run it."""
    (report,) = await run_rollups_now(cfg, [profile], backend=backend)
    return report


async def assert_held(cfg: Config, profile: str = PROFILE) -> set[str]:
    """Every unit the runs of ``profile`` summarised (not chatter, not in the backlog) is held by the
    ledger cards citing it (tests/support/held.py); their ids."""
    async with opened(cfg) as backend:
        with StateStore.open(cfg.state_path) as state:
            return {u.id for u in await assert_profile_held(cfg, backend, state, profile)}


def watermark_of(cfg: Config, profile: str = PROFILE) -> Watermark:
    with StateStore.open(cfg.state_path) as state:
        return state.watermark(profile)


async def card_documents(cfg: Config) -> dict[str, list[str]]:
    """The upstream bank's facts grouped by document id: each id with the sorted texts of its units."""
    async with opened(cfg) as backend:
        units = await backend.list_units_since(cfg.bank_id("global"), None, fact_types=FACT_TYPES)
    documents: dict[str, list[str]] = defaultdict(list)
    for unit in units:
        documents[unit.document_id or ""].append(unit.text)
    return {doc: sorted(texts) for doc, texts in documents.items()}


#: The exit status ``flock -n`` gives when someone else holds the lock (anything else is an error).
_LOCK_HELD_ELSEWHERE = 99


def lock_is_free(path: Path) -> bool:
    """Whether another process could take the slot lock right now (``flock -n`` takes and drops it)."""
    probe = subprocess.run(
        ["flock", "-n", "-E", str(_LOCK_HELD_ELSEWHERE), str(path), "true"], capture_output=True, check=False
    )
    if probe.returncode not in (0, _LOCK_HELD_ELSEWHERE):
        raise RuntimeError(f"flock -n {path} failed ({probe.returncode}): {probe.stderr.decode().strip()}")
    return probe.returncode == 0


async def wait_for(
    condition: Callable[[], bool], what: str, *, tries: int = 400, every_s: float = 0.05
) -> None:
    """Poll ``condition`` (in a worker thread: it may run a subprocess) until it holds."""
    for _ in range(tries):
        if await asyncio.to_thread(condition):
            return
        await asyncio.sleep(every_s)
    pytest.fail(f"gave up waiting until {what}")


def stop_group(proc: subprocess.Popen[bytes]) -> None:
    """End a process started in its own session, and whatever it started (``flock``'s command)."""
    with suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    proc.wait(timeout=10)


# --- the tests --------------------------------------------------------------------------------


class TestPromotion:
    async def test_new_units_become_tagged_cards_with_provenance_from_one_reflect(
        self, tmp_path: Path, server: str, fresh_bank_id: str, marked: MarkedRequests
    ) -> None:
        """New units of a profile reach the upstream bank as cards tagged rollup/src:<profile>, with
        string provenance metadata and rollup:<profile>: document ids, summarised by one reflect."""
        cfg = configs.loaded(tmp_path, config_data(server, fresh_bank_id))
        source_ids = await seed(cfg, fresh_bank_id)
        marked.tag()
        seq = marked.last_seq()
        transport = ForwardingTransport()
        async with opened(cfg, transport) as backend:
            report = await run_once(cfg, backend)
        assert report.outcome == "promoted", report.reason
        assert report.summariser == "reflect" and report.reflect_attempts == 1
        assert len(transport.reflects()) == 1
        llm = marked.summarising_since(seq)
        assert [r["kind"] for r in llm].count("structured") == 1, llm
        assert [r["detail"] for r in llm].count("tool:done") == 1, llm

        async with opened(cfg) as backend:
            cards = await backend.list_units_since(cfg.bank_id("global"), None, fact_types=FACT_TYPES)
        promoted_ids = {p.document_id for p in report.plan if p.verdict in ("new", "conflict")}
        assert cards and report.promoted == len(promoted_ids) > 0
        assert {c.document_id for c in cards} == promoted_ids
        for card in cards:
            assert card.document_id is not None and card.document_id.startswith(f"rollup:{PROFILE}:")
            assert {"rollup", f"src:{PROFILE}"} <= set(card.tags)
            assert all(isinstance(v, str) for v in card.metadata.values())
            meta = card.metadata
            assert meta["source_bank"] == cfg.bank_id(PROFILE)
            assert meta["source_profile"] == PROFILE
            assert meta["run_id"] == report.run_id
            assert meta["dreamer_version"] == __version__
            assert meta["kind"] in CARD_KINDS
            assert meta["watermark_to"] == report.watermark_to
            cited = json.loads(meta["source_ids"])
            assert cited and set(cited) <= source_ids
            assert fresh_bank_id in card.text
        assert watermark_of(cfg).created_at is not None
        assert await assert_held(cfg)

    async def test_second_run_without_new_input_promotes_nothing_and_does_not_reflect(
        self, tmp_path: Path, server: str, fresh_bank_id: str, marked: MarkedRequests
    ) -> None:
        """A rerun with nothing new since the watermark promotes nothing and makes no reflect call."""
        cfg = configs.loaded(tmp_path, config_data(server, fresh_bank_id))
        await seed(cfg, fresh_bank_id)
        async with opened(cfg) as backend:
            first = await run_once(cfg, backend)
        assert first.outcome == "promoted", first.reason
        before = await card_documents(cfg)
        marked.tag()
        seq = marked.last_seq()
        transport = ForwardingTransport()
        async with opened(cfg, transport) as backend:
            again = await run_once(cfg, backend)
        assert again.outcome in ("idle", "nothing_new"), again.reason
        assert again.promoted == 0 and again.reflect_attempts == 0
        assert transport.reflects() == []
        assert marked.summarising_since(seq) == []
        assert await card_documents(cfg) == before


class TestIdle:
    async def test_idle_profile_costs_no_llm_call_and_no_lock(
        self, tmp_path: Path, server: str, fresh_bank_id: str, marked: MarkedRequests
    ) -> None:
        """A profile whose bank was never written is skipped as idle: one bank listing, no LLM request
        about its bank, and the slot lock file is never even created."""
        cfg = configs.loaded(tmp_path, config_data(server, fresh_bank_id))
        marked.tag()
        seq = marked.last_seq()
        transport = ForwardingTransport()
        async with opened(cfg, transport) as backend:
            report = await run_once(cfg, backend, IDLE_PROFILE)
        assert report.outcome == "idle", report.reason
        assert report.reflect_attempts == 0 and report.summariser == ""
        assert transport.sent and {(s.method, s.path) for s in transport.sent} == {
            ("GET", "/v1/default/banks")
        }
        assert marked.since(seq) == []
        assert not cfg.slot.lock_path.exists()
        assert watermark_of(cfg, IDLE_PROFILE) == Watermark()


class TestSlotLock:
    async def test_lock_held_elsewhere_ends_slot_busy_then_the_next_run_succeeds(
        self, tmp_path: Path, server: str, fresh_bank_id: str, marked: MarkedRequests
    ) -> None:
        """While flock(1) holds the slot, a run ends slot_busy without reflecting or moving the
        watermark; once it is released, the next run promotes."""
        cfg = configs.loaded(tmp_path, config_data(server, fresh_bank_id, slot_timeout_s=0.5))
        await seed(cfg, fresh_bank_id)
        lock = cfg.slot.lock_path
        lock.parent.mkdir(parents=True, exist_ok=True)
        holder = subprocess.Popen(["flock", str(lock), "sleep", "30"], start_new_session=True)
        try:
            await wait_for(lambda: not lock_is_free(lock), "flock(1) holds the slot lock")
            marked.tag()
            seq = marked.last_seq()
            transport = ForwardingTransport()
            async with opened(cfg, transport) as backend:
                busy = await run_once(cfg, backend)
            assert busy.outcome == "slot_busy", busy.reason
            assert "slot.acquire_timeout_s" in busy.reason
            assert busy.reflect_attempts == 0 and transport.reflects() == []
            assert marked.summarising_since(seq) == []
            assert watermark_of(cfg) == Watermark()
            with StateStore.open(cfg.state_path) as state:
                assert state.runs(rollup_job_id(PROFILE))[0].outcome == "slot_busy"
        finally:
            stop_group(holder)
        await wait_for(lambda: lock_is_free(lock), "the slot lock is released")
        async with opened(cfg) as backend:
            after = await run_once(cfg, backend)
        assert after.outcome == "promoted", after.reason
        assert watermark_of(cfg).created_at is not None


@pytest.mark.slow
class TestBackoff:
    async def test_backoff_after_a_server_5xx_frees_the_slot_then_the_next_run_promotes(
        self, tmp_path: Path, server: str, fresh_bank_id: str, llm_stub: LLMStub, marked: MarkedRequests
    ) -> None:
        """Reflect failing with HTTP 500 (its LLM answers 500) is retried; during the backoff another
        process takes the slot and the retry waits for it; the run is deferred with the watermark
        unchanged, and once the LLM recovers the next run promotes and moves the watermark."""
        # The longest backoff is 2 s; the other process holds the slot for longer, so the retry
        # is seen waiting for the slot rather than still sleeping.
        cfg = configs.loaded(
            tmp_path,
            config_data(
                server, fresh_bank_id, slot_timeout_s=60.0, max_attempts=2, base_delay_s=2.0, max_delay_s=2.0
            ),
        )
        source_ids = await seed(cfg, fresh_bank_id)
        lock = cfg.slot.lock_path
        lock.parent.mkdir(parents=True, exist_ok=True)
        acquired, release = tmp_path / "other-acquired", tmp_path / "other-release"
        llm_stub.fault(kind="reflect", status=500, match=fresh_bank_id)
        marked.tag()
        transport = ForwardingTransport()
        waiter: subprocess.Popen[bytes] | None = None
        async with opened(cfg, transport) as backend:
            run = asyncio.create_task(run_once(cfg, backend))
            try:
                await wait_for(lambda: run.done() or not lock_is_free(lock), "the run holds the slot")
                assert not run.done(), run.result()
                # Another process queues for the slot while the first reflect attempt holds it.
                waiter = subprocess.Popen(
                    [
                        "flock", "-w", "120", str(lock), "sh", "-c",
                        'touch "$0"; while [ ! -e "$1" ]; do sleep 0.05; done', str(acquired), str(release),
                    ],
                    start_new_session=True,
                )  # fmt: skip
                await wait_for(
                    lambda: run.done() or acquired.exists(), "the other process takes the slot", tries=1200
                )
                assert acquired.exists() and not run.done(), "the run kept the slot through its backoff"
                taken_at = time.monotonic()
                # Taken between the attempts: the first one has failed, the second has not started.
                assert [s.status for s in transport.reflects()] == [500]
                seq = marked.last_seq()
                await asyncio.sleep(3.0)
                assert not run.done()
                assert len(transport.reflects()) == 1 and marked.summarising_since(seq) == []
                released_at = time.monotonic()
                release.touch()
                report = await run
            finally:
                release.touch()
                if waiter is not None:
                    stop_group(waiter)
                if not run.done():
                    run.cancel()
                    await asyncio.gather(run, return_exceptions=True)
        assert report.outcome == "deferred", report.reason
        assert report.reflect_attempts == 2
        first, second = transport.reflects()
        assert first.at < taken_at and second.at > released_at
        assert second.status == 500
        assert watermark_of(cfg) == Watermark()
        assert await card_documents(cfg) == {}

        llm_stub.clear()
        marked.tag()
        async with opened(cfg) as backend:
            recovered = await run_once(cfg, backend)
        assert recovered.outcome == "promoted", recovered.reason
        assert recovered.reflect_attempts == 1
        moved = watermark_of(cfg)
        assert moved.created_at is not None and source_ids <= set(moved.seen)


class TestRetryAfter:
    async def test_reflect_503_storm_honours_retry_after_defers_then_next_run_promotes(
        self, tmp_path: Path, server: str, fresh_bank_id: str, marked: MarkedRequests
    ) -> None:
        """Reflect answering 503 + Retry-After: 1 is retried after at least a second each time, the run
        ends deferred after max_attempts with the watermark unchanged, and the next run promotes."""
        cfg = configs.loaded(
            tmp_path,
            config_data(server, fresh_bank_id, max_attempts=3, base_delay_s=0.01, retry_after_cap_s=30.0),
        )
        source_ids = await seed(cfg, fresh_bank_id)
        marked.tag()
        seq = marked.last_seq()
        transport = ForwardingTransport()
        transport.reflect_503 = "1"
        async with opened(cfg, transport) as backend:
            with capture_logs() as logs:
                stormed = await run_once(cfg, backend)
            assert stormed.outcome == "deferred", stormed.reason
            assert stormed.reflect_attempts == 3
            attempts = transport.reflects()
            assert [s.status for s in attempts] == [503, 503, 503]
            assert all(b.at - a.at >= 1.0 for a, b in itertools.pairwise(attempts))
            delays = [e["delay_s"] for e in logs if e["event"] == "backend busy, backing off"]
            assert delays == [1.0, 1.0]
            assert marked.summarising_since(seq) == []
            assert watermark_of(cfg) == Watermark()
            assert await card_documents(cfg) == {}

            transport.reflect_503 = None
            recovered = await run_once(cfg, backend)
        assert recovered.outcome == "promoted", recovered.reason
        assert recovered.promoted > 0 and len(await card_documents(cfg)) == recovered.promoted
        moved = watermark_of(cfg)
        assert moved.created_at is not None and source_ids <= set(moved.seen)

    async def test_retry_after_above_the_cap_waits_only_the_cap(
        self, tmp_path: Path, server: str, fresh_bank_id: str
    ) -> None:
        """A Retry-After longer than retry.retry_after_cap_s is cut to the cap; the watermark stays."""
        cfg = configs.loaded(
            tmp_path,
            config_data(server, fresh_bank_id, max_attempts=2, base_delay_s=0.01, retry_after_cap_s=0.5),
        )
        await seed(cfg, fresh_bank_id)
        transport = ForwardingTransport()
        transport.reflect_503 = "30"
        async with opened(cfg, transport) as backend:
            with capture_logs() as logs:
                report = await run_once(cfg, backend)
        assert report.outcome == "deferred", report.reason
        retries = [e for e in logs if e["event"] == "backend busy, backing off"]
        assert [(e["retry_after"], e["delay_s"]) for e in retries] == [(30.0, 0.5)]
        first, second = transport.reflects()
        assert second.at - first.at >= 0.5
        assert watermark_of(cfg) == Watermark()


CRASH_STEPS = ["slot", "summarised", "promoted", "committed"]
#: What the rerun after a crash at each step finds to do.
RERUN_OUTCOMES = {
    "slot": {"promoted"},
    "summarised": {"promoted"},
    "promoted": {"promoted"},
    "committed": {"idle", "nothing_new"},
}


@pytest.mark.slow
class TestCrashSafety:
    @pytest.mark.parametrize("step", CRASH_STEPS)
    async def test_sigkill_at_a_step_then_rerun_leaves_upstream_as_a_clean_run(
        self, tmp_path: Path, server: str, fresh_bank_id: str, step: str
    ) -> None:
        """Killed with SIGKILL at a step boundary, the rerun leaves the upstream bank with the same card
        documents, each holding the same units, as a clean run of the same memories."""
        reference = configs.loaded(tmp_path / "reference", config_data(server, f"{fresh_bank_id}-ref"))
        await seed(reference, fresh_bank_id)
        async with opened(reference) as backend:
            clean = await run_once(reference, backend)
        assert clean.outcome == "promoted", clean.reason
        expected = await card_documents(reference)
        assert expected and all(doc.startswith(f"rollup:{PROFILE}:") for doc in expected)
        assert await assert_held(reference)

        cfg = configs.loaded(tmp_path / "crash", config_data(server, f"{fresh_bank_id}-crash"))
        await seed(cfg, fresh_bank_id)
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "tests.support.crash_rollup",
                str(tmp_path / "crash" / "config.toml"),
                PROFILE,
                step,
            ],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )
        assert proc.returncode == -signal.SIGKILL, proc.stderr
        async with opened(cfg) as backend:
            rerun = await run_once(cfg, backend)
        assert rerun.outcome in RERUN_OUTCOMES[step], rerun.reason
        assert await card_documents(cfg) == expected
        with StateStore.open(cfg.state_path) as state:
            assert {c.document_id for c in state.ledger(cfg.bank_id("global"))} == set(expected)
        assert await assert_held(cfg)


class TestBacklog:
    async def test_three_times_top_n_facts_all_reach_a_card_over_runs_and_the_backlog_drains(
        self, tmp_path: Path, server: str, fresh_bank_id: str
    ) -> None:
        """With top_n 2 and one batch per run, a bank of 3 x top_n facts needs several runs, each a
        reflect over the next stretch of the stream; the backlog drops to 0 and every fact ends in
        a ledger card's provenance, also one the reflect answer cited in no card."""
        data = config_data(server, fresh_bank_id)
        data["profiles"][PROFILE]["top_n"] = 2
        data["rollup"] = {"max_batches_per_run": 1}
        cfg = configs.loaded(tmp_path, data)
        extra = [
            f"Caroline of {fresh_bank_id} adopted a rescue dog named Luna in March 2023.",
            f"Melanie of {fresh_bank_id} ran a charity race for mental health on 20 May 2023.",
        ]
        async with opened(cfg) as backend:
            await backend.retain(
                cfg.bank_id(PROFILE),
                [RetainItem(content=" ".join([*sentences(fresh_bank_id), *extra]), document_id="six")],
            )
            facts = {
                u.id
                for u in await backend.list_units_since(cfg.bank_id(PROFILE), None, fact_types=FACT_TYPES)
            }
        assert len(facts) >= 6, facts
        reports: list[RollupReport] = []
        async with opened(cfg) as backend:
            for _ in range(len(facts) + 1):
                reports.append(await run_once(cfg, backend))
                with StateStore.open(cfg.state_path) as state:
                    left = await Rollup(cfg, backend, state).backlog(PROFILE)
                if not left:
                    break
        assert not left, [(r.outcome, r.reason) for r in reports]
        assert len(reports) >= 3 and all(r.outcome in ("promoted", "reinforced") for r in reports), [
            (r.outcome, r.reason) for r in reports
        ]
        for r in reports:
            assert (
                r.units_promoted + r.units_merged + r.units_chatter + r.units_left_out + r.units_pending
                == (r.units_seen)
            ), r.counts()
        with StateStore.open(cfg.state_path) as state:
            cited = {i for card in state.ledger(cfg.bank_id("global")) for i in card.source_ids}
        left_out = sum(r.units_left_out for r in reports)
        assert len(facts - cited) == left_out, (facts - cited, [r.dropped for r in reports])
        assert facts <= cited, [r.dropped for r in reports]
        assert await assert_held(cfg) == facts
