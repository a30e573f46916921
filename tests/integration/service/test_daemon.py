"""The daemon as systemd runs it: a real process, a real notify socket, real signals, real SQLite.

Jobs cycle every ~1.2 s (``interval_minutes = 0.02``). Where a job must be held open, the process is
``tests.support.daemon_with_slow_job``: the real daemon with only the job body substituted.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dreamer.state import SCHEMA_VERSION, StateStore
from tests.support.daemon_harness import (
    DaemonProcess,
    NotifySocket,
    config_text,
    event_is,
    has,
    job_finished,
    parse_log_line,
    wait_until,
    write_config,
)

pytestmark = pytest.mark.slow

SYSLOG = {"debug": 7, "info": 6, "warning": 4, "error": 3, "critical": 2}


@pytest.fixture
def notify() -> Iterator[NotifySocket]:
    with NotifySocket() as sock:
        yield sock


def run_args(config: Path) -> list[str]:
    return ["-m", "dreamer", "run", "--config", str(config), "--log-format", "json"]


def slow_args(config: Path, flags: Path, mode: str = "block") -> list[str]:
    return [
        "-m",
        "tests.support.daemon_with_slow_job",
        "--config",
        str(config),
        "--flags",
        str(flags),
        "--mode",
        mode,
    ]


def runs(state_dir: Path) -> list[tuple[str, str, str | None]]:
    """(run_id, job_id, outcome) of every recorded run."""
    with sqlite3.connect(state_dir / "state.sqlite3") as conn:
        return list(conn.execute("SELECT run_id, job_id, outcome FROM runs ORDER BY started_at"))


def stop(daemon: DaemonProcess, notify: NotifySocket) -> int:
    daemon.send(signal.SIGTERM)
    notify.wait_for(has("STOPPING", "1"), what="STOPPING=1")
    return daemon.wait()


def started_flags(flags: Path) -> list[Path]:
    return sorted(flags.glob("started-*"))


def wait_for_flag(flags: Path) -> None:
    wait_until(lambda: bool(started_flags(flags)), what="run of the slow job")


class TestStartup:
    def test_ready_then_watchdog_pings_then_stopping(self, tmp_path: Path, notify: NotifySocket) -> None:
        """READY=1 arrives with a STATUS, WATCHDOG=1 pings follow, and SIGTERM gives STOPPING=1 and exit 0."""
        config = write_config(tmp_path / "config.toml", tmp_path / "state")
        env = {"NOTIFY_SOCKET": notify.path, "WATCHDOG_USEC": "400000"}
        with DaemonProcess(run_args(config), log_path=tmp_path / "out.log", env=env) as daemon:
            ready = notify.wait_for(has("READY", "1"), what="READY=1")
            assert notify.fields(ready)["STATUS"].startswith("1 profile")
            last_ping = notify.wait_for(has("WATCHDOG", "1"), after=ready, what="a watchdog ping")
            notify.wait_for(has("WATCHDOG", "1"), after=last_ping + 1, what="a second watchdog ping")
            assert stop(daemon, notify) == 0
        stopping = notify.wait_for(has("STOPPING", "1"))
        assert ready < stopping

    @pytest.mark.parametrize("older", [True, False])
    def test_an_older_state_file_asks_systemd_for_time_to_upgrade(
        self, tmp_path: Path, notify: NotifySocket, older: bool
    ) -> None:
        """Opening a state file of an older schema upgrades it before READY=1 (a minute per million
        cards): the daemon first asks for EXTEND_TIMEOUT_USEC, so TimeoutStartSec cannot kill it
        midway. A current file asks for nothing."""
        state_dir = tmp_path / "state"
        state_dir.mkdir()
        StateStore.open(state_dir / "state.sqlite3").close()
        if older:
            with sqlite3.connect(state_dir / "state.sqlite3") as raw:
                raw.execute("DROP TABLE ledger_rank")
                raw.execute("PRAGMA user_version = 4")
        config = write_config(tmp_path / "config.toml", state_dir)
        with DaemonProcess(
            run_args(config), log_path=tmp_path / "out.log", env={"NOTIFY_SOCKET": notify.path}
        ) as daemon:
            ready = notify.wait_for(has("READY", "1"), what="READY=1")
            asked = [i for i in range(ready) if "EXTEND_TIMEOUT_USEC" in notify.fields(i)]
            assert stop(daemon, notify) == 0
        if older:
            assert len(asked) == 1 and int(notify.fields(asked[0])["EXTEND_TIMEOUT_USEC"]) >= 600_000_000
            with sqlite3.connect(state_dir / "state.sqlite3") as raw:
                assert raw.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        else:
            assert asked == []

    def test_jobs_run_with_context_and_are_recorded(self, tmp_path: Path, notify: NotifySocket) -> None:
        """Each run logs start and finish with profile, bank and its own run id, and lands in the state DB."""
        state = tmp_path / "state"
        config = write_config(tmp_path / "config.toml", state)
        env = {"NOTIFY_SOCKET": notify.path}
        with DaemonProcess(run_args(config), log_path=tmp_path / "out.log", env=env) as daemon:
            finished = daemon.wait_for_records(job_finished("research", "idle"), count=2)
            status = notify.wait_for(lambda f: "last: research idle" in f.get("STATUS", ""))
            assert stop(daemon, notify) == 0
        run_ids = {record["run_id"] for _, record in finished}
        assert len(run_ids) == 2
        for _, record in finished:
            assert record["bank"] == "private__hermes__research"
            assert record["job_id"] == "rollup:research"
            assert isinstance(record["duration_s"], float)
        job_records = [r for r in daemon.records() if r.get("run_id") in run_ids]
        assert all(r["profile"] == "research" and r["bank"] for r in job_records)
        recorded = {run_id: (job_id, outcome) for run_id, job_id, outcome in runs(state)}
        for run_id in run_ids:
            assert recorded[run_id] == ("rollup:research", "idle")
        assert "next: research" in notify.fields(status)["STATUS"]

    def test_log_lines_under_the_journal_are_prefixed_json(
        self, tmp_path: Path, notify: NotifySocket
    ) -> None:
        """With stdout as the journal stream, every line is `<N>` + one JSON object, N matching the level."""
        config = write_config(tmp_path / "config.toml", tmp_path / "state")
        env = {"NOTIFY_SOCKET": notify.path}
        args = ["-m", "dreamer", "run", "--config", str(config)]  # --log-format auto
        with DaemonProcess(args, log_path=tmp_path / "out.log", env=env, journal=True) as daemon:
            notify.wait_for(has("READY", "1"))
            daemon.wait_for_record(job_finished("research"))
            config.write_text("this is = = not toml\n", encoding="utf-8")
            daemon.send(signal.SIGHUP)
            daemon.wait_for_record(lambda r: r.get("level") == "error", what="an error record")
            assert stop(daemon, notify) == 0
        lines = daemon.lines()
        priorities = set()
        for line in lines:
            priority, record = parse_log_line(line)
            assert priority is not None, line
            assert priority == SYSLOG[record["level"]], line
            priorities.add(priority)
        assert {3, 6} <= priorities
        assert daemon.stderr() == ""


class TestNoJobs:
    def test_a_configuration_without_jobs_is_warned_at_start_and_after_a_reload(
        self, tmp_path: Path, notify: NotifySocket
    ) -> None:
        """No enabled profile and no audited agent: the daemon still starts (a reload may add one)
        but warns that it has nothing to do and what to add; a reload that adds a profile ends it."""
        state = tmp_path / "state"
        config = write_config(tmp_path / "config.toml", state, profiles=())
        with DaemonProcess(
            run_args(config), log_path=tmp_path / "out.log", env={"NOTIFY_SOCKET": notify.path}
        ) as daemon:
            notify.wait_for(has("READY", "1"), what="READY=1")
            warned = daemon.wait_for_records(lambda r: str(r.get("event", "")).startswith("no jobs:"))
            assert "[profiles]" in warned[0][1]["event"]
            write_config(tmp_path / "config.toml", state)
            daemon.send(signal.SIGHUP)
            daemon.wait_for_records(job_finished("research", "idle"))
            assert stop(daemon, notify) == 0
        assert len([r for r in daemon.records() if str(r.get("event", "")).startswith("no jobs:")]) == 1


class TestStateFileSwapped:
    """8. The state file replaced under the running daemon (``mv`` of a copy onto it) or removed."""

    def test_a_file_moved_onto_the_path_is_reopened_and_gets_the_records(
        self, tmp_path: Path, notify: NotifySocket
    ) -> None:
        """After the swap the daemon says so once and reopens: every later run's record lands in
        the file now at the path, none in the deleted one."""
        state = tmp_path / "state"
        config = write_config(tmp_path / "config.toml", state)
        with DaemonProcess(
            run_args(config), log_path=tmp_path / "out.log", env={"NOTIFY_SOCKET": notify.path}
        ) as daemon:
            daemon.wait_for_records(job_finished("research", "idle"), count=1)
            copy = state / "copy.sqlite3"
            shutil.copyfile(state / "state.sqlite3", copy)
            os.replace(copy, state / "state.sqlite3")
            swapped_at = len(daemon.records())
            finished = daemon.wait_for_records(job_finished("research", "idle"), count=3, after=swapped_at)
            assert stop(daemon, notify) == 0
        warned = [r for r in daemon.records() if "replaced on disk" in str(r.get("event", ""))]
        assert len(warned) == 1, warned
        recorded = {run_id for run_id, _job, _outcome in runs(state)}
        # The first run after the swap may have started (and written its start) before it.
        assert {r["run_id"] for _, r in finished[1:]} <= recorded

    def test_a_removed_file_stops_runs_instead_of_starting_a_new_one(
        self, tmp_path: Path, notify: NotifySocket
    ) -> None:
        """With the file gone, no run starts (a roll-up would create a new, empty state file and
        promote everything again); an error names the fix; nothing is created at the path."""
        state = tmp_path / "state"
        config = write_config(tmp_path / "config.toml", state)
        with DaemonProcess(
            run_args(config), log_path=tmp_path / "out.log", env={"NOTIFY_SOCKET": notify.path}
        ) as daemon:
            daemon.wait_for_records(job_finished("research", "idle"), count=1)
            for suffix in ("", "-wal", "-shm"):
                Path(f"{state / 'state.sqlite3'}{suffix}").unlink(missing_ok=True)
            daemon.wait_for_records(lambda r: "was removed while Dreamer ran" in str(r.get("event")), count=2)
            assert stop(daemon, notify) == 0
        assert not (state / "state.sqlite3").exists()

    def test_a_reload_to_another_state_dir_makes_the_state_there_and_runs_on(
        self, tmp_path: Path, notify: NotifySocket
    ) -> None:
        """SIGHUP with state_dir moved to a directory holding no state yet: the daemon makes the
        file there as it reloads (its runs never make one), and the runs after go on, recorded
        in it."""
        first, moved = tmp_path / "state", tmp_path / "moved"
        config = write_config(tmp_path / "config.toml", first)
        with DaemonProcess(
            run_args(config), log_path=tmp_path / "out.log", env={"NOTIFY_SOCKET": notify.path}
        ) as daemon:
            daemon.wait_for_records(job_finished("research", "idle"), count=1)
            config.write_text(config_text(moved), encoding="utf-8")
            mark = len(notify.messages)
            daemon.send(signal.SIGHUP)
            reloading = notify.wait_for(has("RELOADING", "1"), after=mark, what="RELOADING=1")
            notify.wait_for(has("READY", "1"), after=reloading, what="READY=1 after reload")
            after = len(daemon.records())
            daemon.wait_for_records(job_finished("research", "idle"), after=after, count=2)
            assert stop(daemon, notify) == 0
        assert len(runs(moved)) >= 2


class TestReload:
    def test_bad_file_keeps_old_config_and_says_so(self, tmp_path: Path, notify: NotifySocket) -> None:
        """SIGHUP with a broken file: still alive, STATUS says `reload failed: <key>`, old jobs still run."""
        state = tmp_path / "state"
        config = write_config(tmp_path / "config.toml", state)
        env = {"NOTIFY_SOCKET": notify.path}
        with DaemonProcess(run_args(config), log_path=tmp_path / "out.log", env=env) as daemon:
            notify.wait_for(has("READY", "1"))
            daemon.wait_for_record(job_finished("research"))
            config.write_text(config_text(state, schedule={"intervall_minutes": 5}), encoding="utf-8")
            mark = len(notify.messages)
            daemon.send(signal.SIGHUP)
            reloading = notify.wait_for(has("RELOADING", "1"), after=mark, what="RELOADING=1")
            assert int(notify.fields(reloading)["MONOTONIC_USEC"]) > 0
            ready = notify.wait_for(has("READY", "1"), after=reloading, what="READY=1 after reload")
            status = notify.fields(ready)["STATUS"]
            assert re.match(r"reload failed \d\d:\d\dZ: ", status), status
            assert "last reload" not in status  # no reload had worked yet
            assert "schedule.intervall_minutes" in status
            failed_at, failure = daemon.wait_for_record(
                event_is("reload failed; still running the previous configuration")
            )
            assert any("schedule.intervall_minutes" in p for p in failure["problems"])
            daemon.wait_for_records(job_finished("research", "idle"), after=failed_at + 1, count=2)
            assert daemon.alive()
            assert stop(daemon, notify) == 0

    def test_good_file_adds_a_profile_and_leaves_the_rest(self, tmp_path: Path, notify: NotifySocket) -> None:
        """SIGHUP with a new profile schedules only that job; it runs; STATUS counts it."""
        state = tmp_path / "state"
        config = write_config(tmp_path / "config.toml", state)
        env = {"NOTIFY_SOCKET": notify.path}
        with DaemonProcess(run_args(config), log_path=tmp_path / "out.log", env=env) as daemon:
            notify.wait_for(has("READY", "1"))
            daemon.wait_for_record(job_finished("research"))
            write_config(config, state, profiles=("research", "homelab"))
            mark = len(notify.messages)
            daemon.send(signal.SIGHUP)
            reloading = notify.wait_for(has("RELOADING", "1"), after=mark)
            ready = notify.wait_for(has("READY", "1"), after=reloading)
            assert notify.fields(ready)["STATUS"].startswith("2 profiles")
            assert "last reload " in notify.fields(ready)["STATUS"]
            _, reloaded = daemon.wait_for_record(event_is("configuration reloaded"))
            assert reloaded["added"] == ["rollup:homelab"]
            assert reloaded["removed"] == reloaded["rescheduled"] == reloaded["updated"] == []
            _, homelab = daemon.wait_for_record(job_finished("homelab", "idle"))
            assert homelab["bank"] == "private__hermes__homelab"
            assert stop(daemon, notify) == 0
        assert ("rollup:homelab", "idle") in {(job, outcome) for _, job, outcome in runs(state)}

    def test_changed_interval_reschedules_and_removed_profile_is_dropped(
        self, tmp_path: Path, notify: NotifySocket
    ) -> None:
        state = tmp_path / "state"
        config = write_config(tmp_path / "config.toml", state, profiles=("research", "homelab"))
        env = {"NOTIFY_SOCKET": notify.path}
        with DaemonProcess(run_args(config), log_path=tmp_path / "out.log", env=env) as daemon:
            notify.wait_for(has("READY", "1"))
            write_config(config, state, profiles=("research",), schedule={"interval_minutes": 0.03})
            daemon.send(signal.SIGHUP)
            _, reloaded = daemon.wait_for_record(event_is("configuration reloaded"))
            assert reloaded["removed"] == ["rollup:homelab"]
            assert reloaded["rescheduled"] == ["rollup:research"]
            ready = notify.wait_for(lambda f: f.get("READY") == "1" and "profile;" in f.get("STATUS", ""))
            assert notify.fields(ready)["STATUS"].startswith("1 profile;")
            assert stop(daemon, notify) == 0


class TestStop:
    def test_sigterm_lets_a_running_job_finish(self, tmp_path: Path, notify: NotifySocket) -> None:
        """SIGTERM during a run: STOPPING=1, the run is waited for and finishes normally, then exit 0."""
        state, flags = tmp_path / "state", tmp_path / "flags"
        flags.mkdir()
        config = write_config(tmp_path / "config.toml", state)
        env = {"NOTIFY_SOCKET": notify.path}
        with DaemonProcess(slow_args(config, flags), log_path=tmp_path / "out.log", env=env) as daemon:
            notify.wait_for(has("READY", "1"))
            wait_for_flag(flags)
            daemon.send(signal.SIGTERM)
            notify.wait_for(has("STOPPING", "1"), what="STOPPING=1")
            daemon.wait_for_record(event_is("waiting for running jobs"))
            assert daemon.alive()
            (flags / "release").touch()
            assert daemon.wait() == 0
        finished = [r for r in daemon.records() if job_finished("research")(r)]
        assert [r["outcome"] for r in finished] == ["released"]
        assert [outcome for _, _, outcome in runs(state)] == ["released"]
        assert len(started_flags(flags)) == 1  # no new run started after SIGTERM

    def test_drain_timeout_cancels_the_job_and_exits_cleanly(
        self, tmp_path: Path, notify: NotifySocket
    ) -> None:
        """A run still going after drain_timeout_s is cancelled, recorded as cancelled, and the exit is 0."""
        state, flags = tmp_path / "state", tmp_path / "flags"
        flags.mkdir()
        config = write_config(tmp_path / "config.toml", state, schedule={"drain_timeout_s": 0.5})
        env = {"NOTIFY_SOCKET": notify.path}
        with DaemonProcess(slow_args(config, flags), log_path=tmp_path / "out.log", env=env) as daemon:
            notify.wait_for(has("READY", "1"))
            wait_for_flag(flags)
            assert stop(daemon, notify) == 0
        records = daemon.records()
        assert any(r["event"] == "drain timeout reached; cancelling running jobs" for r in records)
        finished = [r for r in records if job_finished("research")(r)]
        assert [r["outcome"] for r in finished] == ["cancelled"]
        assert [outcome for _, _, outcome in runs(state)] == ["cancelled"]
        # A cancellation the drain asked for is an outcome, not an error with a traceback.
        assert [r["event"] for r in records if r.get("level") in ("error", "critical")] == []
        assert not [r for r in records if "CancelledError" in json.dumps(r)]


class TestJobFailures:
    def test_exception_in_job_body_is_an_outcome_not_a_crash(
        self, tmp_path: Path, notify: NotifySocket
    ) -> None:
        """A raising job body is logged as outcome failed with a one-line structured traceback; runs go on."""
        state, flags = tmp_path / "state", tmp_path / "flags"
        flags.mkdir()
        config = write_config(tmp_path / "config.toml", state)
        env = {"NOTIFY_SOCKET": notify.path}
        args = slow_args(config, flags, mode="fail")
        with DaemonProcess(args, log_path=tmp_path / "out.log", env=env) as daemon:
            notify.wait_for(has("READY", "1"))
            failures = daemon.wait_for_records(job_finished("research", "failed"), count=2)
            notify.wait_for(lambda f: "last: research failed" in f.get("STATUS", ""))
            assert daemon.alive()
            assert stop(daemon, notify) == 0
        for _, record in failures:
            assert record["level"] == "error"
            exception: list[dict[str, Any]] = record["exception"]
            assert exception[0]["exc_type"] == "RuntimeError"
            assert exception[0]["exc_value"] == "job body failed on purpose"
            assert record["detail"] == "RuntimeError: job body failed on purpose"
        assert {outcome for _, _, outcome in runs(state)} == {"failed"}

    def test_job_timeout_cancels_the_run_and_frees_the_slot(
        self, tmp_path: Path, notify: NotifySocket
    ) -> None:
        """A run longer than job_timeout_s ends as timeout and the next cycle starts a new run."""
        state, flags = tmp_path / "state", tmp_path / "flags"
        flags.mkdir()
        config = write_config(tmp_path / "config.toml", state, schedule={"job_timeout_s": 0.3})
        env = {"NOTIFY_SOCKET": notify.path}
        with DaemonProcess(slow_args(config, flags), log_path=tmp_path / "out.log", env=env) as daemon:
            notify.wait_for(has("READY", "1"))
            timeouts = daemon.wait_for_records(job_finished("research", "timeout"), count=2)
            (flags / "release").touch()
            assert stop(daemon, notify) == 0
        assert timeouts[0][1]["run_id"] != timeouts[1][1]["run_id"]
        assert "job_timeout_s" in timeouts[0][1]["detail"]


class TestAuditJob:
    def test_threshold_trigger_audits_within_one_cycle(self, tmp_path: Path, notify: NotifySocket) -> None:
        """A MEMORY.md above 85% of its limit is audited by the daemon's next check: the ledger grows."""
        memories = tmp_path / "mumuni"
        memories.mkdir()
        canary = "CANARY: Do not modify this line"
        filler = [
            f"Note {i}: the staging host keeps build cache number {i} for the CI runners." for i in range(30)
        ]
        (memories / "MEMORY.md").write_text("\n§\n".join([canary, *filler]))
        (memories / "USER.md").write_text(canary)
        assert len((memories / "MEMORY.md").read_text()) > 0.85 * 2200
        config = write_config(
            tmp_path / "config.toml",
            tmp_path / "state",
            profiles=(),
            agents={"mumuni": {"memories_dir": memories}},
            audit={"check_every_minutes": 0.02},
        )
        env = {"NOTIFY_SOCKET": notify.path}
        with DaemonProcess(run_args(config), log_path=tmp_path / "out.log", env=env) as daemon:
            ready = notify.wait_for(has("READY", "1"), what="READY=1")
            assert notify.fields(ready)["STATUS"].startswith("0 profiles, 1 agent")
            _, record = daemon.wait_for_record(
                lambda r: r.get("event") == "job finished" and r.get("kind") == "audit"
            )
            assert record["outcome"] in ("complete", "dry_run"), record
            assert (memories / "MEMORY_AUDIT_LEDGER.md").exists()
            assert stop(daemon, notify) == 0


class TestBackendDown:
    def test_outage_is_deferred_warned_in_status_and_counted_in_metrics(
        self, tmp_path: Path, notify: NotifySocket
    ) -> None:
        """With Hindsight unreachable every run is `deferred` (not failed, no traceback); from
        retry.warn_after_deferrals on, STATUS says so, and the metrics file counts it."""
        state, metrics = tmp_path / "state", tmp_path / "metrics" / "dreamer.prom"
        config = write_config(
            tmp_path / "config.toml",
            state,
            backend={"kind": "hindsight", "hindsight": {"url": "http://127.0.0.1:9"}},
            retry={"max_attempts": 1, "warn_after_deferrals": 2},
            metrics={"textfile": str(metrics)},
        )
        env = {"NOTIFY_SOCKET": notify.path}
        with DaemonProcess(run_args(config), log_path=tmp_path / "out.log", env=env) as daemon:
            daemon.wait_for_records(job_finished("research", "deferred"), count=2)
            status = notify.wait_for(lambda f: "research deferred 2x in a row" in f.get("STATUS", ""))
            assert stop(daemon, notify) == 0
        assert notify.fields(status)["STATUS"]
        records = daemon.records()
        assert {o for _, _, o in runs(state)} == {"deferred"}
        assert not [r for r in records if r.get("level") == "error" or "exception" in r]
        warned = [r for r in records if str(r.get("event", "")).startswith("deferred several cycles")]
        assert warned and warned[0]["deferred_in_a_row"] == 2
        text = metrics.read_text()
        assert 'dreamer_runs_total{job_id="rollup:research",outcome="deferred"}' in text
        deferred = [line for line in text.splitlines() if line.startswith("dreamer_deferred_in_a_row{")]
        assert deferred and int(deferred[0].split()[-1]) >= 2


class TestRecorderCache:
    def test_the_services_connection_keeps_a_small_page_cache(self, tmp_path: Path) -> None:
        """The connection the service keeps open for its life caches at most 256 KiB of pages (its
        2 MiB default filled over 1,000 idle cycles: +2.1 MiB of RSS); a run's own connection keeps
        SQLite's default."""
        from datetime import UTC, datetime

        from dreamer.jobs.open import open_state
        from dreamer.service.start import RECORDER_CACHE_KIB, open_recorder
        from tests.support.configs import config_data, loaded

        cfg = loaded(tmp_path, config_data(state_dir=str(tmp_path / "state")))
        recorder = open_recorder(cfg)
        try:
            assert recorder._conn.execute("PRAGMA cache_size").fetchone()[0] == -RECORDER_CACHE_KIB
            assert recorder._conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 0
            recorder.record_run_start("r1", "rollup:research", datetime.now(UTC))  # it still writes
        finally:
            recorder.close()
        with open_state(cfg) as run_state:
            assert run_state._conn.execute("PRAGMA cache_size").fetchone()[0] == -2000
            assert run_state._conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 1000

    def test_the_state_file_is_checkpointed_once_a_run_has_finished(
        self, tmp_path: Path, notify: NotifySocket
    ) -> None:
        """The daemon's connections leave the log's checkpoint to it (a run's commit no longer pays
        for it), and it checkpoints after each run: the state file alone, copied without its log
        while the daemon still holds it open, has the run it logged as checkpointed. One run an
        hour, so nothing writes while the file is copied."""
        state = tmp_path / "state"
        config = write_config(tmp_path / "config.toml", state, schedule={"interval_minutes": 60})
        env = {"NOTIFY_SOCKET": notify.path}
        with DaemonProcess(run_args(config), log_path=tmp_path / "out.log", env=env) as daemon:
            finished = daemon.wait_for_records(job_finished("research", "idle"))
            daemon.wait_for_records(event_is("state file checkpointed"))
            alone = tmp_path / "alone.sqlite3"
            alone.write_bytes((state / "state.sqlite3").read_bytes())
            assert stop(daemon, notify) == 0
        with sqlite3.connect(alone) as conn:
            kept = {row[0] for row in conn.execute("SELECT run_id FROM runs WHERE outcome IS NOT NULL")}
        assert {record["run_id"] for _, record in finished} <= kept
        checkpoints = [r for r in daemon.records() if r.get("event") == "state file checkpointed"]
        assert all(r["pages"] >= 0 and r["seconds"] >= 0 for r in checkpoints)
