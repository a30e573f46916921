"""The running service: scheduler, signals, reload, drain, watchdog, STATUS.

``dreamer run`` starts it through :func:`dreamer.service.start.run_daemon`. :meth:`Daemon.serve`
starts the signal handlers, the scheduler (one job per entry of
:func:`dreamer.service.plan.plan_jobs`) and the watchdog, *then* sends ``READY=1``. SIGHUP reloads
the configuration (a bad file keeps the old one running); SIGTERM/SIGINT stop new runs, drain the
running ones within ``schedule.drain_timeout_s`` and exit 0. The job body is injected (a
:class:`dreamer.jobs.spec.JobRunner`): the daemon does not know what a roll-up is.

Why it is built this way: ``docs/design/service.md``.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from apscheduler.events import (
    EVENT_JOB_ERROR,
    EVENT_JOB_MAX_INSTANCES,
    EVENT_JOB_MISSED,
    JobEvent,
    JobExecutionEvent,
)
from apscheduler.jobstores.base import JobLookupError
from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.triggers.interval import IntervalTrigger

from dreamer.config import Config, load_config
from dreamer.embeddings.factory import EmbedderChoice, check_embeddings, describe_embedder
from dreamer.errors import ConfigError, DreamerError, ExitCode
from dreamer.jobs.leases import runs_here, start_hosting
from dreamer.jobs.open import state_name
from dreamer.jobs.spec import JobRunner, JobSpec
from dreamer.jobs.upkeep import after_run
from dreamer.log import get_logger
from dreamer.service.metrics import write_metrics
from dreamer.service.notify import Notifier, watchdog_interval_s
from dreamer.service.plan import PlanDiff, diff_plans, plan_jobs
from dreamer.service.runner import RunRecorder, RunResult, execute_job
from dreamer.service.status import ReloadRecord, format_status
from dreamer.state import StateStore

log = get_logger("dreamer.daemon")


def _utcnow() -> datetime:
    return datetime.now(UTC)


# After the drain timeout, cancelled jobs get this long to run their cleanup (release the slot lock,
# write the run record) before the process exits regardless.
CANCEL_GRACE_S = 10.0


def _problems_text(exc: ConfigError) -> str:
    return "; ".join(exc.problems)


def log_embedder(config: Config, choice: EmbedderChoice) -> None:
    """One line naming the dedup's embedder, at start and after each reload: the provider
    configured, the one in use (``auto``: local or none) and why; a warning when ``auto`` found model
    files it cannot use."""
    fields = {
        "provider": choice.configured,
        "resolved": choice.provider,
        "embedder": describe_embedder(config, choice),
        "reason": choice.reason,
    }
    if choice.warning is not None:
        log.warning(
            "embeddings: model files found but not usable; lexical dedup", problem=choice.warning, **fields
        )
    else:
        log.info("embeddings: dedup embedder chosen", **fields)


class Daemon:
    """One running service. Create it with a loaded config; :meth:`serve` runs until stopped.

    Attributes tests and the STATUS line read: ``config``, ``plan``, ``last_runs`` (job id ->
    :class:`~dreamer.service.runner.RunResult`), ``running`` (job id -> run id), ``last_reload``.
    """

    def __init__(
        self,
        config: Config,
        config_path: Path,
        *,
        runner: JobRunner,
        recorder: RunRecorder | None,
        notifier: Notifier,
        open_recorder: Callable[[Config], RunRecorder] | None = None,
        on_config: Callable[[Config], None] | None = None,
    ) -> None:
        self.config = config
        self.config_path = config_path
        self.runner = runner
        self.recorder = recorder
        self.notifier = notifier
        self._open_recorder = open_recorder
        #: State stores replaced by a reopen (a file moved onto the path): closed at shutdown.
        self.retired_recorders: list[RunRecorder] = []
        self._on_config = on_config
        self.plan: dict[str, JobSpec] = {}
        self.last_runs: dict[str, RunResult] = {}
        self.running: dict[str, str] = {}
        self.last_reload: ReloadRecord | None = None
        self.stopping = False
        self._tasks: set[asyncio.Task[Any]] = set()
        self._commands: asyncio.Queue[signal.Signals] | None = None
        self._scheduler: AsyncIOScheduler | None = None

    # --- lifecycle -------------------------------------------------------------------------

    async def serve(self) -> int:
        """Run until SIGTERM/SIGINT; returns the exit status."""
        loop = asyncio.get_running_loop()
        self._commands = asyncio.Queue()
        commands = self._commands
        handled = (signal.SIGHUP, signal.SIGTERM, signal.SIGINT)
        for sig in handled:
            loop.add_signal_handler(sig, commands.put_nowait, sig)

        scheduler = AsyncIOScheduler(
            timezone=UTC,
            job_defaults={
                "coalesce": True,
                "max_instances": 1,
                "misfire_grace_time": self.config.schedule.misfire_grace_s,
            },
        )
        scheduler.add_listener(self._on_scheduler_event, EVENT_JOB_MISSED | EVENT_JOB_MAX_INSTANCES)
        scheduler.add_listener(self._on_scheduler_event, EVENT_JOB_ERROR)
        self._scheduler = scheduler
        new_plan = plan_jobs(self.config)
        self._apply(diff_plans({}, new_plan), new_plan)
        scheduler.start()

        stop_hosting = start_hosting(self.config, self.recorder)
        watchdog: asyncio.Task[None] | None = None
        interval = watchdog_interval_s()
        if interval is not None:
            watchdog = asyncio.create_task(self._watchdog(interval), name="watchdog")

        try:
            self.notifier.ready(status=self.status_line())
            log.info(
                "daemon ready",
                config=str(self.config_path),
                jobs=sorted(self.plan),
                watchdog_interval_s=interval,
            )
            self._warn_if_idle()
            while True:
                sig = await commands.get()
                if sig == signal.SIGHUP:
                    self.reload()
                else:
                    log.info("stop requested", signal=sig.name)
                    break
            await self._drain()
        finally:
            if watchdog is not None:
                watchdog.cancel()
            if stop_hosting is not None:
                await stop_hosting()
            for sig in handled:
                loop.remove_signal_handler(sig)
        log.info("daemon stopped")
        return ExitCode.OK

    async def _drain(self) -> None:
        """Stop taking new runs, let running ones finish (bounded), then cancel what is left."""
        assert self._scheduler is not None
        self.stopping = True
        drain_s = self.config.schedule.drain_timeout_s
        self.notifier.send(
            {
                "STOPPING": 1,
                # Ask systemd for enough time to drain, whatever TimeoutStopSec says.
                "EXTEND_TIMEOUT_USEC": int((drain_s + CANCEL_GRACE_S + 5) * 1_000_000),
                "STATUS": self.status_line(),
            }
        )
        self._scheduler.pause()
        # A run submitted just before the pause has a task that has not started yet; one loop
        # iteration lets it register itself so it is drained rather than lost.
        await asyncio.sleep(0)
        pending = set(self._tasks)
        if pending:
            log.info("waiting for running jobs", jobs=sorted(self.running), drain_timeout_s=drain_s)
            _, pending = await asyncio.wait(pending, timeout=drain_s)
        if pending:
            log.warning(
                "drain timeout reached; cancelling running jobs",
                jobs=sorted(self.running),
                drain_timeout_s=drain_s,
            )
            for task in pending:
                task.cancel()
            _, stuck = await asyncio.wait(pending, timeout=CANCEL_GRACE_S)
            if stuck:
                log.error("jobs did not stop after cancellation; exiting anyway", jobs=sorted(self.running))
        self._scheduler.shutdown(wait=False)

    async def _watchdog(self, interval_s: float) -> None:
        # A task on the same loop as the jobs: if the loop is blocked, pings stop and systemd acts.
        while True:
            self.notifier.watchdog()
            await asyncio.sleep(interval_s)

    def _warn_if_idle(self) -> None:
        """A daemon with no job runs and does nothing: say so, with what to add."""
        if not self.plan:
            log.warning(
                "no jobs: the configuration has no enabled profile under [profiles] and no enabled "
                "agent under [agents] with audit.enabled; add one, then reload (SIGHUP)",
                config=str(self.config_path),
            )

    # --- reload ----------------------------------------------------------------------------

    def reload(self) -> ReloadRecord:
        """Re-read the configuration file; keep the current one if the new one is not usable."""
        self.notifier.reloading(status="reloading configuration")
        log.info("reloading configuration", config=str(self.config_path))
        try:
            new_config = load_config(self.config_path)
            embedder = check_embeddings(new_config, str(self.config_path))
            new_plan = plan_jobs(new_config)
            recorder = self.recorder
            # Another state (a moved state_dir, another backend or schema): the daemon opens it,
            # making it if need be, as it did at start; its runs open only a state that is there.
            if self._open_recorder is not None and state_name(new_config) != state_name(self.config):
                recorder = self._open_recorder(new_config)
        except ConfigError as exc:
            record = ReloadRecord(_utcnow(), False, _problems_text(exc))
            log.error(
                "reload failed; still running the previous configuration",
                config=str(self.config_path),
                problems=exc.problems,
            )
        except Exception as exc:
            record = ReloadRecord(_utcnow(), False, f"{type(exc).__name__}: {exc}")
            log.exception("reload failed; still running the previous configuration")
        else:
            record = self._switch_to(new_config, new_plan, recorder)
            if record.ok:
                log_embedder(new_config, embedder)
        record = record.after(self.last_reload)
        self.last_reload = record
        self.notifier.ready(status=self.status_line())
        return record

    def _switch_to(
        self, config: Config, plan: Mapping[str, JobSpec], recorder: RunRecorder | None
    ) -> ReloadRecord:
        diff = diff_plans(self.plan, plan)
        try:
            self._apply(diff, plan)
        except Exception as exc:
            # Should not happen; if it does, say so and keep serving rather than go down.
            log.exception("reload could not be applied to the schedule", **diff.summary())
            return ReloadRecord(_utcnow(), False, f"{type(exc).__name__}: {exc}")
        self.config = config
        self.recorder = recorder
        if self._on_config is not None:
            self._on_config(config)
        log.info("configuration reloaded", **diff.summary())
        self._warn_if_idle()
        return ReloadRecord(_utcnow(), True, _describe(diff) if diff.changed else "jobs unchanged")

    def _apply(self, diff: PlanDiff, new_plan: Mapping[str, JobSpec]) -> None:
        """Make the scheduler match ``new_plan``, touching only what ``diff`` lists."""
        assert self._scheduler is not None
        scheduler = self._scheduler
        now = _utcnow()
        for jid in diff.removed:
            with contextlib.suppress(JobLookupError):
                scheduler.remove_job(jid)
        for jid in diff.added:
            spec = new_plan[jid]
            scheduler.add_job(
                self._run_scheduled,
                trigger=_trigger(spec),
                args=[jid],
                id=jid,
                name=jid,
                max_instances=1,
                coalesce=True,
                misfire_grace_time=spec.misfire_grace_s,
                next_run_time=now + timedelta(seconds=spec.first_run_delay_s),
                replace_existing=True,
            )
        for jid in diff.rescheduled:
            spec = new_plan[jid]
            scheduler.reschedule_job(jid, trigger=_trigger(spec))
            scheduler.modify_job(jid, misfire_grace_time=spec.misfire_grace_s)
        for jid in diff.updated:
            scheduler.modify_job(jid, misfire_grace_time=new_plan[jid].misfire_grace_s)
        self.plan = dict(new_plan)

    # --- one run ---------------------------------------------------------------------------

    async def _run_scheduled(self, job_id: str) -> None:
        # Snapshot now: a reload during the run must not change what this run works with.
        spec = self.plan.get(job_id)
        config = self.config
        recorder = self.recorder
        if spec is None:
            log.warning("job is no longer planned; run skipped", job_id=job_id)
            return
        if not runs_here(config, spec.kind, spec.key):
            log.debug("another host runs this profile; skipped here", job_id=job_id)
            return
        usable, recorder = self._state_still_there(config, recorder)
        if not usable:
            return
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)

        def started(run_id: str) -> None:
            self.running[job_id] = run_id
            self._publish_status()

        try:
            result = await execute_job(config, spec, self.runner, recorder=recorder, on_start=started)
            self.last_runs[job_id] = result
            self._write_metrics(config, recorder)
            await after_run(config, recorder)
        except asyncio.CancelledError:
            if not self.stopping:
                raise
            # The drain cancelled it: execute_job recorded and logged the run as cancelled. Ending
            # the task quietly keeps the scheduler from reporting the cancellation as an error.
        finally:
            self._tasks.discard(task)
            self.running.pop(job_id, None)
            if not self.stopping:
                self._publish_status()

    def _state_still_there(
        self, config: Config, recorder: RunRecorder | None
    ) -> tuple[bool, RunRecorder | None]:
        """Whether a run may start, and the recorder it runs with: the state file the daemon holds,
        reopened when another file was moved onto its path (a restored backup: the run records
        would go to the deleted file). When the file was removed the run is skipped: a roll-up
        would otherwise start a new, empty state file and promote every fact again."""
        if not isinstance(recorder, StateStore):
            return True, recorder
        moved = recorder.file_moved()
        if not moved:
            return True, recorder
        if moved == "removed":
            log.error(
                "the state file was removed while Dreamer ran; no run until it is back",
                path=str(recorder.path),
                fix="restore the file (or move it back), or restart Dreamer to start a new one",
            )
            return False, None
        if self._open_recorder is None:
            return True, recorder
        try:
            reopened = self._open_recorder(config)
        except DreamerError as exc:
            log.error(
                "the state file was replaced by one that cannot be opened",
                path=str(recorder.path),
                error=str(exc),
            )
            return False, None
        log.warning(
            "the state file was replaced on disk while Dreamer ran; reopened it (run records written "
            "since the swap went to the old file)",
            path=str(recorder.path),
        )
        if self.recorder is recorder:
            self.recorder = reopened
        # Not closed here: a run that started before the swap may still be writing its record.
        self.retired_recorders.append(recorder)
        return True, reopened

    def _write_metrics(self, config: Config, recorder: RunRecorder | None) -> None:
        """Rewrite the operator metrics file (``metrics.textfile``) after a run; a failure is a
        warning, never the run's."""
        path = config.metrics.textfile
        if path is None or not isinstance(recorder, StateStore):
            return
        try:
            write_metrics(path, recorder, config.profiles)
        except (OSError, DreamerError) as exc:
            log.warning("could not write the metrics file", path=str(path), error=str(exc))

    def _on_scheduler_event(self, event: JobEvent) -> None:
        spec = self.plan.get(event.job_id)
        context = spec.log_context() if spec is not None else {}
        if event.code == EVENT_JOB_MISSED:
            assert isinstance(event, JobExecutionEvent)
            log.warning(
                "run missed its start by more than misfire_grace_s; skipped",
                job_id=event.job_id,
                scheduled_for=event.scheduled_run_time.isoformat(),
                **context,
            )
        elif event.code == EVENT_JOB_MAX_INSTANCES:
            log.warning("previous run still going; this run skipped", job_id=event.job_id, **context)
        elif event.code == EVENT_JOB_ERROR:
            assert isinstance(event, JobExecutionEvent)
            log.error(
                "job task ended with an error", job_id=event.job_id, exc_info=event.exception, **context
            )

    # --- STATUS ----------------------------------------------------------------------------

    def next_runs(self) -> dict[str, datetime | None]:
        if self._scheduler is None:
            return {}
        return {job.id: job.next_run_time for job in self._scheduler.get_jobs()}

    def status_line(self) -> str:
        return format_status(
            plan=self.plan,
            last_runs=self.last_runs,
            running=self.running,
            next_runs=self.next_runs(),
            last_reload=self.last_reload,
            now=_utcnow(),
            stopping=self.stopping,
        )

    def _publish_status(self) -> None:
        self.notifier.status(self.status_line())


def _trigger(spec: JobSpec) -> IntervalTrigger:
    return IntervalTrigger(seconds=spec.interval_s, jitter=spec.jitter_s or None, timezone=UTC)


def _describe(diff: PlanDiff) -> str:
    parts = [f"{name} {', '.join(ids)}" for name, ids in diff.summary().items() if ids]
    return "; ".join(parts)
