"""The STATUS line systemd shows for the daemon: short, and true."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

from dreamer.jobs.spec import JobOutcome, JobSpec
from dreamer.service.runner import RunResult
from dreamer.service.status import ReloadRecord, count_jobs, format_status, format_time

NOW = datetime(2025, 3, 4, 12, 30, tzinfo=UTC)


def spec(job_id: str) -> JobSpec:
    kind, _, key = job_id.partition(":")
    return JobSpec(job_id, kind, key, 3600.0, 120, 10.0, 900, 1800.0)


PLAN = {j: spec(j) for j in ("rollup:research", "rollup:homelab", "rollup:coder")}


def result(job_id: str, outcome: str, finished: datetime) -> RunResult:
    return RunResult(job_id, "abc", JobOutcome(outcome), finished - timedelta(seconds=5), finished, 5.0)


class TestFormatStatus:
    def test_counts_last_and_next(self) -> None:
        """The line counts profiles, names the last finished run and the next one due."""
        status = format_status(
            plan=PLAN,
            last_runs={
                "rollup:research": result("rollup:research", "promoted", NOW.replace(hour=12, minute=0)),
                "rollup:coder": result("rollup:coder", "skipped", NOW.replace(hour=11, minute=0)),
            },
            running=[],
            next_runs={
                "rollup:homelab": NOW.replace(hour=13, minute=2),
                "rollup:research": NOW.replace(hour=13, minute=5),
                "rollup:coder": None,
            },
            last_reload=None,
            now=NOW,
        )
        assert status == "3 profiles; last: research promoted 12:00Z; next: homelab 13:02Z"

    def test_failed_reload_comes_first_and_stays(self) -> None:
        """After a failed reload the line leads with `reload failed HH:MMZ: <reason>`, and with no
        reload that worked before it, ends with no `last reload` (which would read as taken)."""
        failed = ReloadRecord(NOW, False, "config.toml: schedule.x: unknown key").after(None)
        status = format_status(
            plan=PLAN, last_runs={}, running=[], next_runs={}, last_reload=failed, now=NOW
        )
        assert status == "reload failed 12:30Z: config.toml: schedule.x: unknown key; 3 profiles"

    def test_failed_reload_keeps_the_time_of_the_last_one_that_worked(self) -> None:
        """A reload that worked at 09:41 and one that failed at 12:30: the line says both, each
        for what it was, and a later good reload clears the failure."""
        good = ReloadRecord(NOW.replace(hour=9, minute=41), True, "jobs unchanged").after(None)
        failed = ReloadRecord(NOW, False, "config.toml: bad").after(good)
        status = format_status(
            plan=PLAN, last_runs={}, running=[], next_runs={}, last_reload=failed, now=NOW
        )
        assert status == "reload failed 12:30Z: config.toml: bad; 3 profiles; last reload 09:41Z"
        again = ReloadRecord(NOW.replace(minute=45), True, "jobs unchanged").after(failed)
        status = format_status(plan=PLAN, last_runs={}, running=[], next_runs={}, last_reload=again, now=NOW)
        assert status == "3 profiles; last reload 12:45Z"

    def test_long_reload_reason_is_shortened(self) -> None:
        """A long list of problems is cut so the rest of the line stays visible."""
        status = format_status(
            plan=PLAN,
            last_runs={},
            running=[],
            next_runs={},
            last_reload=ReloadRecord(NOW, False, "problem " * 200).after(None),
            now=NOW,
        )
        assert status.endswith("...; 3 profiles")
        assert len(status) < 400

    def test_successful_reload_adds_only_its_time(self) -> None:
        """A successful reload leaves the normal line, ending with when it happened."""
        status = format_status(
            plan=PLAN,
            last_runs={},
            running=[],
            next_runs={},
            last_reload=ReloadRecord(NOW.replace(hour=9, minute=41), True, "jobs unchanged").after(None),
            now=NOW,
        )
        assert status == "3 profiles; last reload 09:41Z"

    def test_running_jobs_are_listed(self) -> None:
        status = format_status(
            plan=PLAN,
            last_runs={},
            running=["rollup:research", "rollup:coder"],
            next_runs={},
            last_reload=None,
            now=NOW,
        )
        assert status == "3 profiles; running: coder, research"

    def test_stopping_has_no_next_run(self) -> None:
        """While stopping, the line says so and promises no next run."""
        status = format_status(
            plan=PLAN,
            last_runs={},
            running=["rollup:research"],
            next_runs={"rollup:homelab": NOW},
            last_reload=None,
            now=NOW,
            stopping=True,
        )
        assert status == "stopping; 3 profiles; running: research"

    def test_empty_plan(self) -> None:
        """With no enabled profile the line says nothing is scheduled."""
        status = format_status(plan={}, last_runs={}, running=[], next_runs={}, last_reload=None, now=NOW)
        assert status == "0 profiles; nothing scheduled"


class TestCountJobs:
    def test_singular_and_other_kinds(self) -> None:
        """One profile is singular; audits count agents; unknown kinds count as jobs."""
        plan = {
            "rollup:research": spec("rollup:research"),
            "audit:a": dataclasses.replace(spec("audit:a")),
            "audit:b": spec("audit:b"),
            "other:x": spec("other:x"),
        }
        assert count_jobs(plan) == "1 profile, 2 agents, 1 other job"


class TestFormatTime:
    def test_same_day_is_hours_and_minutes(self) -> None:
        """A time today (UTC) is `HH:MMZ`."""
        assert format_time(NOW.replace(hour=9, minute=5), NOW) == "09:05Z"

    def test_other_day_carries_the_date(self) -> None:
        assert format_time(NOW + timedelta(days=14), NOW) == "2025-03-18 12:30Z"
