"""The job plan, the reload diff, and the wrapper around one run of a job."""

from __future__ import annotations

import asyncio
import dataclasses
import io
import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog

from dreamer.config import Config
from dreamer.errors import (
    PermanentBackendError,
    RetriesExhausted,
    SlotBusyError,
    TransientBackendError,
)
from dreamer.jobs.spec import JobOutcome, JobSpec
from dreamer.service.plan import PLANNERS, diff_plans, plan_jobs
from dreamer.service.runner import KindDispatcher, execute_job
from dreamer.state import StateStore
from tests.support.configs import config_data, parsed
from tests.support.imports import JOB_BODIES, loaded_after
from tests.support.logs import json_logs


def make_config(**sections: Any) -> Config:
    """Two profiles on an hourly schedule; each of ``sections`` replaces that top-level key."""
    data = config_data(
        ("global", "shared", "research", "homelab"),
        ("research", "homelab"),
        state_dir="/var/lib/dreamer",
        schedule={"interval_minutes": 60, "jitter_s": 120, "first_run_delay_s": 10},
    )
    return parsed({**data, **sections})


def spec(job_id: str = "rollup:research", **changes: Any) -> JobSpec:
    kind, _, key = job_id.partition(":")
    base = JobSpec(
        job_id=job_id,
        kind=kind,
        key=key,
        interval_s=3600.0,
        jitter_s=120,
        first_run_delay_s=10.0,
        misfire_grace_s=900,
        timeout_s=1800.0,
        context=(("profile", key),),
    )
    return dataclasses.replace(base, **changes)


class TestPlanJobs:
    def test_one_rollup_job_per_enabled_profile(self) -> None:
        """Each enabled profile gets `rollup:<profile>` with the schedule trigger and its bank in context."""
        plan = plan_jobs(make_config())
        assert sorted(plan) == ["rollup:homelab", "rollup:research"]
        research = plan["rollup:research"]
        assert (research.kind, research.key) == ("rollup", "research")
        assert research.trigger == (3600.0, 120)
        assert research.first_run_delay_s == 10.0
        assert research.misfire_grace_s == 900
        assert research.timeout_s == 1800.0
        assert research.log_context() == {"profile": "research", "bank": "private__hermes__research"}

    def test_disabled_profiles_get_no_job(self) -> None:
        """A profile with enabled = false is not scheduled."""
        config = make_config(
            profiles={"research": {"bank": "research"}, "homelab": {"bank": "homelab", "enabled": False}}
        )
        assert list(plan_jobs(config)) == ["rollup:research"]

    def test_a_new_kind_of_job_is_one_planner(self) -> None:
        """Registering a planner for another kind adds its jobs to the same table."""

        def plan_audits(config: Config) -> Iterable[JobSpec]:
            yield spec("audit:mumuni", kind="audit", key="mumuni", context=(("agent", "mumuni"),))

        plan = plan_jobs(make_config(), {**PLANNERS, "audit": plan_audits})
        assert sorted(plan) == ["audit:mumuni", "rollup:homelab", "rollup:research"]

    def test_planner_mistakes_are_caught(self) -> None:
        """A planner that emits another kind, or a duplicate id, is a programming error."""
        with pytest.raises(ValueError, match="produced a 'rollup' job"):
            plan_jobs(make_config(), {"audit": lambda c: [spec()]})
        with pytest.raises(ValueError, match="two jobs share the id"):
            plan_jobs(make_config(), {"rollup": lambda c: [spec(), spec()]})


class TestDiffPlans:
    def test_identical_plans_change_nothing(self) -> None:
        """Reloading the same configuration touches no job."""
        plan = plan_jobs(make_config())
        diff = diff_plans(plan, dict(plan))
        assert not diff.changed
        assert diff.unchanged == ("rollup:homelab", "rollup:research")

    def test_added_and_removed_profiles(self) -> None:
        """A new profile is added and a dropped one removed; the others are untouched."""
        old = {"rollup:research": spec(), "rollup:homelab": spec("rollup:homelab")}
        new = {"rollup:research": spec(), "rollup:coder": spec("rollup:coder")}
        diff = diff_plans(old, new)
        assert diff.added == ("rollup:coder",)
        assert diff.removed == ("rollup:homelab",)
        assert diff.unchanged == ("rollup:research",)
        assert diff.rescheduled == diff.updated == ()

    @pytest.mark.parametrize("change", [{"interval_s": 1800.0}, {"jitter_s": 0}])
    def test_trigger_change_reschedules(self, change: dict[str, Any]) -> None:
        """A different interval or jitter reschedules the job (its next run time is recomputed)."""
        diff = diff_plans({"rollup:research": spec()}, {"rollup:research": spec(**change)})
        assert diff.rescheduled == ("rollup:research",)
        assert diff.updated == ()

    @pytest.mark.parametrize(
        "change",
        [
            {"timeout_s": 60.0},
            {"misfire_grace_s": 30},
            {"first_run_delay_s": 0.0},
            {"context": (("profile", "research"), ("bank", "other"))},
        ],
    )
    def test_other_changes_update_without_rescheduling(self, change: dict[str, Any]) -> None:
        """Changes outside the trigger keep the job's place in the schedule."""
        diff = diff_plans({"rollup:research": spec()}, {"rollup:research": spec(**change)})
        assert diff.updated == ("rollup:research",)
        assert diff.rescheduled == ()

    def test_diff_from_config_changes(self) -> None:
        """Schedule, bank and profile edits in the config map to reschedule, update, add and remove."""
        old = plan_jobs(make_config())
        banks = {
            "global": {},
            "shared": {},
            "research": {"bank_id": "private__hermes__research_v2"},
            "coder": {},
        }
        new = plan_jobs(make_config(**config_data(banks, ("research", "coder"))))
        diff = diff_plans(old, new)
        assert diff.summary() == {
            "added": ["rollup:coder"],
            "removed": ["rollup:homelab"],
            "rescheduled": [],
            "updated": ["rollup:research"],
        }
        faster = plan_jobs(make_config(schedule={"interval_minutes": 30, "jitter_s": 120}))
        assert diff_plans(old, faster).rescheduled == ("rollup:homelab", "rollup:research")


class Recorder:
    """An in-memory run log with the state store's two methods."""

    def __init__(self) -> None:
        self.events: list[tuple[Any, ...]] = []

    def record_run_start(self, run_id: str, job_id: str, started_at: Any) -> None:
        self.events.append(("start", run_id, job_id))

    def record_run_end(self, run_id: str, outcome: str, detail: str, counts: Any, finished_at: Any) -> None:
        self.events.append(("end", run_id, outcome, detail, dict(counts)))

    def consecutive(self, job_id: str, outcome: str) -> int:
        n = 0
        for event in reversed(self.events):
            if event[0] == "end":
                if event[2] != outcome:
                    break
                n += 1
        return n


@pytest.fixture
def logs() -> Iterator[io.StringIO]:
    with json_logs() as out:
        yield out


def records(out: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.getvalue().splitlines()]


class TestExecuteJob:
    async def test_success_is_logged_and_recorded_with_context(self, logs: io.StringIO) -> None:
        """A run gets a 12-hex run id; its logs carry job_id, profile, run_id; start and end are recorded."""
        recorder = Recorder()

        async def runner(config: Config, job: JobSpec, run_id: str) -> JobOutcome:
            structlog.get_logger("body").info("working")
            return JobOutcome("promoted", "2 cards", {"promoted": 2})

        result = await execute_job(make_config(), spec(), runner, recorder=recorder)
        assert result.outcome == JobOutcome("promoted", "2 cards", {"promoted": 2})
        assert len(result.run_id) == 12 and int(result.run_id, 16) >= 0
        assert recorder.events == [
            ("start", result.run_id, "rollup:research"),
            ("end", result.run_id, "promoted", "2 cards", {"promoted": 2}),
        ]
        lines = records(logs)
        assert [r["event"] for r in lines] == ["job started", "working", "job finished"]
        for r in lines:
            assert (r["run_id"], r["profile"], r["job_id"]) == (result.run_id, "research", "rollup:research")
        assert lines[-1]["outcome"] == "promoted"
        assert "duration_s" in lines[-1]
        assert structlog.contextvars.get_contextvars() == {}

    async def test_each_run_has_a_fresh_run_id(self, logs: io.StringIO) -> None:
        """Two runs of the same job never share a run id."""

        async def runner(config: Config, job: JobSpec, run_id: str) -> JobOutcome:
            return JobOutcome("noop")

        first = await execute_job(make_config(), spec(), runner)
        second = await execute_job(make_config(), spec(), runner)
        assert first.run_id != second.run_id

    async def test_exception_becomes_outcome_failed(self, logs: io.StringIO) -> None:
        """A raising body is outcome `failed`, logged at error level with a structured traceback."""
        recorder = Recorder()

        async def runner(config: Config, job: JobSpec, run_id: str) -> JobOutcome:
            raise KeyError("missing")

        result = await execute_job(make_config(), spec(), runner, recorder=recorder)
        assert result.outcome.outcome == "failed"
        assert result.outcome.detail == "KeyError: 'missing'"
        assert recorder.events[-1][2] == "failed"
        finished = records(logs)[-1]
        assert finished["level"] == "error"
        assert finished["exception"][0]["exc_type"] == "KeyError"

    async def test_timeout_becomes_outcome_timeout(self, logs: io.StringIO) -> None:
        """A body that outlives timeout_s is cancelled and reported as `timeout`."""

        async def runner(config: Config, job: JobSpec, run_id: str) -> JobOutcome:
            await asyncio.Event().wait()
            raise AssertionError("unreachable")

        result = await execute_job(make_config(), spec(timeout_s=0.05), runner)
        assert result.outcome.outcome == "timeout"
        assert records(logs)[-1]["level"] == "warning"

    async def test_the_body_s_own_timeout_error_is_a_failure(self, logs: io.StringIO) -> None:
        """A TimeoutError raised by the body itself (a socket) is `failed`, not the job timeout."""

        async def runner(config: Config, job: JobSpec, run_id: str) -> JobOutcome:
            raise TimeoutError("read timed out")

        result = await execute_job(make_config(), spec(), runner)
        assert result.outcome.outcome == "failed"

    async def test_cancellation_is_recorded_and_propagated(self, logs: io.StringIO) -> None:
        """Cancelling a run (the drain gave up) records `cancelled` and re-raises CancelledError."""
        recorder = Recorder()
        started = asyncio.Event()

        async def runner(config: Config, job: JobSpec, run_id: str) -> JobOutcome:
            started.set()
            await asyncio.Event().wait()
            raise AssertionError("unreachable")

        task = asyncio.create_task(execute_job(make_config(), spec(), runner, recorder=recorder))
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert recorder.events[-1][2] == "cancelled"

    async def test_a_failing_recorder_does_not_fail_the_run(self, logs: io.StringIO) -> None:
        """If the run record cannot be written, the error is logged and the run still happens."""

        class Broken(Recorder):
            def record_run_start(self, run_id: str, job_id: str, started_at: Any) -> None:
                raise OSError("disk full")

        async def runner(config: Config, job: JobSpec, run_id: str) -> JobOutcome:
            return JobOutcome("noop")

        result = await execute_job(make_config(), spec(), runner, recorder=Broken())
        assert result.outcome.outcome == "noop"
        assert any(r["event"] == "could not write the run record" for r in records(logs))

    async def test_a_runner_returning_the_wrong_type_fails_clearly(self, logs: io.StringIO) -> None:
        """A body that returns something other than a JobOutcome is reported as a failure."""

        async def runner(config: Config, job: JobSpec, run_id: str) -> JobOutcome:
            return "done"  # type: ignore[return-value]

        result = await execute_job(make_config(), spec(), runner)
        assert result.outcome.outcome == "failed"
        assert "not JobOutcome" in result.outcome.detail


class TestKindDispatcher:
    async def test_dispatches_on_kind(self) -> None:
        """Each job goes to the runner registered for its kind."""

        async def rollup(config: Config, job: JobSpec, run_id: str) -> JobOutcome:
            return JobOutcome("rolled", job.key)

        async def audit(config: Config, job: JobSpec, run_id: str) -> JobOutcome:
            return JobOutcome("audited", job.key)

        dispatch = KindDispatcher({"rollup": rollup, "audit": audit})
        config = make_config()
        assert await dispatch(config, spec(), "r1") == JobOutcome("rolled", "research")
        audit_job = spec("audit:mumuni", kind="audit", key="mumuni")
        assert await dispatch(config, audit_job, "r2") == JobOutcome("audited", "mumuni")

    async def test_unknown_kind_fails_the_run(self, logs: io.StringIO) -> None:
        """A job whose kind has no runner ends as `failed`, named as the bug it is (the error's
        class, logged with its traceback), naming the known kinds."""
        dispatch = KindDispatcher({})
        result = await execute_job(make_config(), spec("audit:x", kind="audit", key="x"), dispatch)
        assert result.outcome.outcome == "failed"
        assert result.outcome.detail.startswith("UnknownJobKind: no runner for job kind 'audit'")
        assert '"exc_type": "UnknownJobKind"' in logs.getvalue()

    async def test_default_runner_runs_the_rollup_pipeline(self, logs: io.StringIO, tmp_path: Path) -> None:
        """The default roll-up runner is the real pipeline: an empty embedded bank ends `idle`
        (on the state the daemon made at start)."""
        from dreamer.jobs.open import open_state
        from dreamer.service.runner import default_runner

        config = make_config(state_dir=str(tmp_path))
        open_state(config).close()
        result = await execute_job(config, spec(), default_runner())
        assert result.outcome.outcome == "idle"
        assert "empty or not created" in result.outcome.detail


class TestTheDaemonsRunner:
    def test_its_rollup_job_is_the_daemons(self) -> None:
        """The runner the daemon uses defers the checkpoint (`dreamer.jobs.upkeep` checkpoints once
        a run has finished) and never creates the state file; `dreamer rollup`'s
        (`run_rollups_now`) is made apart and does neither."""
        from dreamer.service.runner import DEFAULT_RUNNERS

        assert DEFAULT_RUNNERS["rollup"].daemon is True  # type: ignore[attr-defined]


class TestErrorsAsOutcomes:
    """An error Dreamer reports is the run's outcome, with one line of detail and no traceback."""

    @pytest.mark.parametrize(
        ("error", "outcome"),
        [
            (TransientBackendError("cannot reach Hindsight at http://127.0.0.1:9", status=None), "deferred"),
            (
                RetriesExhausted("reflect", 3, TransientBackendError("503", status=503)),
                "deferred",
            ),
            (SlotBusyError("slot held for 5 s (slot.acquire_timeout_s)"), "slot_busy"),
            (PermanentBackendError("bank refused", status=400, detail="bad bank id"), "failed"),
        ],
    )
    async def test_reported_errors_become_their_outcome(
        self, logs: io.StringIO, error: Exception, outcome: str
    ) -> None:
        recorder = Recorder()

        async def runner(config: Config, job: JobSpec, run_id: str) -> JobOutcome:
            raise error

        result = await execute_job(make_config(), spec(), runner, recorder=recorder)
        assert result.outcome.outcome == outcome
        assert str(error) in result.outcome.detail
        assert recorder.events[-1][2] == outcome
        finished = records(logs)[-1]
        assert finished["level"] == "warning"
        assert "exception" not in finished

    async def test_permanent_error_detail_carries_the_servers_message(self, logs: io.StringIO) -> None:
        async def runner(config: Config, job: JobSpec, run_id: str) -> JobOutcome:
            raise PermanentBackendError("bank refused", status=400, detail="bad bank id")

        result = await execute_job(make_config(), spec(), runner)
        assert result.outcome.detail == "bank refused bad bank id"

    async def test_deferred_runs_in_a_row_warn_from_the_threshold_on(
        self, logs: io.StringIO, tmp_path: Path
    ) -> None:
        """With retry.warn_after_deferrals = 2, the second deferral in a row warns and is counted in
        the run record; a success resets the count."""
        config = make_config(state_dir=str(tmp_path), retry={"warn_after_deferrals": 2})
        down = True

        async def runner(config: Config, job: JobSpec, run_id: str) -> JobOutcome:
            if down:
                raise TransientBackendError("cannot reach the backend")
            return JobOutcome("nothing_new")

        with StateStore.open(config.state_path) as state:
            for _ in range(3):
                await execute_job(config, spec(), runner, recorder=state)
            in_a_row = [r.counts.get("deferred_in_a_row") for r in reversed(state.runs("rollup:research"))]
            assert in_a_row == [None, 2, 3]
            warnings = [r for r in records(logs) if r["event"].startswith("deferred several cycles")]
            assert [w["deferred_in_a_row"] for w in warnings] == [2, 3]
            down = False
            await execute_job(config, spec(), runner, recorder=state)
            down = True
            await execute_job(config, spec(), runner, recorder=state)
            assert state.runs("rollup:research", limit=1)[0].counts.get("deferred_in_a_row") is None


class TestStartupImports:
    def test_daemon_start_leaves_job_bodies_unimported(self) -> None:
        """Importing the daemon does not load the roll-up pipeline, backends or audit: READY comes first."""
        assert loaded_after("import dreamer.service.daemon", JOB_BODIES) == []

    def test_a_runs_modules_on_the_embedded_store_load_no_http_client_nor_the_audit(self) -> None:
        """What a run imports on the embedded store without ``[llm]`` (`run_modules`): no httpx (its
        client loads with a model or a server to call) and no Hermes audit (the peer card needs one
        constant of the Hermes package)."""
        run = (
            "import dreamer.service.daemon, dreamer.jobs.rollup as r\n"
            "from dreamer.config import Config\n"
            "[__import__(m) for m in r.run_modules(Config())]"
        )
        assert loaded_after(run, ["httpx", "dreamer.hermes.audit.run", "dreamer.hermes.memory.store"]) == []
