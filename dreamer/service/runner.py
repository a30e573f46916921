"""How one run of a job is carried out: the one owner of every run, for the daemon and the CLI.

:func:`execute_job` wraps every run, whoever starts it (the daemon's scheduler, ``dreamer rollup``,
the demo): a run id, the log context (``job_id``, ``run_id`` and the job's own fields such as
``profile`` and ``bank``), the run record in the state store, the timeout, the one "job finished"
summary, the "deferred N times in a row" warning, and the rule that an error in a job body is an
outcome (:func:`dreamer.outcomes.classify`), never a crash. :class:`KindDispatcher` hands each job
to the body registered for its kind; the bodies are in :mod:`dreamer.jobs` (the roll-up job, the
audit job). See ``docs/design/rollup.md`` (the run owner) and ``docs/design/service.md``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import importlib
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Protocol

import anyio
import structlog

from dreamer.config import Config
from dreamer.errors import StateFileError
from dreamer.jobs.open import open_state
from dreamer.jobs.rollup import RollupJob
from dreamer.jobs.spec import JobOutcome, JobRunner, JobSpec, StepHook
from dreamer.log import get_logger
from dreamer.outcomes import TROUBLE, Outcome, classify, describe
from dreamer.service.plan import rollup_job
from dreamer.state import StateStore

if TYPE_CHECKING:
    from dreamer.backends.base import MemoryBackend
    from dreamer.rollup.report import RollupReport

log = get_logger("dreamer.jobs")


class RunRecorder(Protocol):
    """Where run records go (:class:`dreamer.state.StateStore`)."""

    def record_run_start(self, run_id: str, job_id: str, started_at: datetime) -> None: ...

    def record_run_end(
        self,
        run_id: str,
        outcome: str,
        detail: str,
        counts: Mapping[str, int],
        finished_at: datetime,
    ) -> None: ...

    def consecutive(self, job_id: str, outcome: str) -> int: ...


class ImportedRunner:
    """A job body imported at its first run, not at start: the daemon signals READY before paying
    for the packages it needs (the audit's)."""

    def __init__(self, module: str, name: str) -> None:
        self.module = module
        self.name = name

    async def __call__(self, config: Config, job: JobSpec, run_id: str) -> JobOutcome:
        runner: JobRunner = getattr(importlib.import_module(self.module), self.name)
        return await runner(config, job, run_id)


# kind -> runner used by the daemon unless a runner is injected.
DEFAULT_RUNNERS: Mapping[str, JobRunner] = {
    "rollup": RollupJob(daemon=True),
    "audit": ImportedRunner("dreamer.jobs.audit", "run_audit_job"),
}


class UnknownJobKind(RuntimeError):
    """A job of a kind no runner is registered for was scheduled: a planner without its runner in
    :data:`DEFAULT_RUNNERS`, which is a bug in Dreamer, never something a user did. It stays outside
    :class:`~dreamer.errors.DreamerError` on purpose, so the run reports it as ``failed`` with its
    traceback (:func:`dreamer.outcomes.classify` gives None for it)."""


class KindDispatcher:
    """A :class:`JobRunner` that hands each job to the runner registered for its kind."""

    def __init__(self, runners: Mapping[str, JobRunner]) -> None:
        self.runners = dict(runners)

    async def __call__(self, config: Config, job: JobSpec, run_id: str) -> JobOutcome:
        runner = self.runners.get(job.kind)
        if runner is None:
            known = ", ".join(sorted(self.runners)) or "none"
            raise UnknownJobKind(f"no runner for job kind {job.kind!r} (known: {known})")
        return await runner(config, job, run_id)


def default_runner() -> JobRunner:
    return KindDispatcher(DEFAULT_RUNNERS)


# --- one run ----------------------------------------------------------------------------------------


def new_run_id() -> str:
    return uuid.uuid4().hex[:12]


@dataclass(frozen=True, slots=True)
class RunResult:
    """One finished run, as the daemon remembers it for the STATUS line."""

    job_id: str
    run_id: str
    outcome: JobOutcome
    started_at: datetime
    finished_at: datetime
    duration_s: float


def _utcnow() -> datetime:
    return datetime.now(UTC)


def _record(action: str, call: Callable[[], None]) -> None:
    """Write a run record; a state-store failure is logged, never allowed to kill the run. A
    :class:`StateFileError` (a full disk, a read-only directory) is one line naming the fix; any
    other error is a bug and keeps its traceback."""
    try:
        call()
    except StateFileError as exc:
        log.error("could not write the run record", action=action, error=str(exc))
    except Exception:
        log.exception("could not write the run record", action=action)


async def execute_job(
    config: Config,
    job: JobSpec,
    runner: JobRunner,
    *,
    recorder: RunRecorder | None = None,
    run_id: str | None = None,
    on_start: Callable[[str], None] | None = None,
) -> RunResult:
    """Run ``job`` once under its timeout, with its log context and run record.

    An error Dreamer reports becomes its outcome (``deferred`` for a backend that is down, ...)
    with a one-line detail; any other exception is a bug: outcome ``failed``, logged with its
    traceback. The timeout becomes ``timeout``. Cancellation (the daemon stopping) is recorded as
    ``cancelled`` and then propagated, as cancellation must be.
    """
    rid = run_id or new_run_id()
    with structlog.contextvars.bound_contextvars(job_id=job.job_id, run_id=rid, **job.log_context()):
        started_at = _utcnow()
        t0 = time.monotonic()
        if recorder is not None:
            _record("start", lambda: recorder.record_run_start(rid, job.job_id, started_at))
        if on_start is not None:
            on_start(rid)
        log.info("job started", kind=job.kind)
        error: BaseException | None = None
        try:
            outcome = await _run_with_timeout(config, job, runner, rid)
        except asyncio.CancelledError:
            stopped = JobOutcome(Outcome.CANCELLED, "stopped before it finished")
            _finish(config, job, rid, recorder, t0, stopped)
            raise
        except Exception as exc:
            known = classify(exc)
            if known is None:
                error = exc
                outcome = JobOutcome(Outcome.FAILED, f"{type(exc).__name__}: {exc}")
            else:
                outcome = JobOutcome(known[0], describe(exc))
        finished_at, duration, outcome = _finish(config, job, rid, recorder, t0, outcome, error=error)
        return RunResult(job.job_id, rid, outcome, started_at, finished_at, duration)


async def _run_with_timeout(config: Config, job: JobSpec, runner: JobRunner, run_id: str) -> JobOutcome:
    scope: anyio.CancelScope | None = None
    try:
        with anyio.fail_after(job.timeout_s) as scope:
            outcome = await runner(config, job, run_id)
    except TimeoutError:
        if scope is None or not scope.cancel_called:
            raise  # the body's own TimeoutError (a socket, say): an ordinary failure
        return JobOutcome(
            Outcome.TIMEOUT,
            f"cancelled after {job.timeout_s:g}s (schedule.job_timeout_s); it will run again next cycle",
        )
    if not isinstance(outcome, JobOutcome):
        raise TypeError(f"job runner returned {type(outcome).__name__}, not JobOutcome")
    return outcome


def _deferred_in_a_row(job: JobSpec, recorder: RunRecorder | None) -> int:
    """How many runs of the job in a row were deferred, this one included."""
    if recorder is None:
        return 1
    try:
        return recorder.consecutive(job.job_id, Outcome.DEFERRED) + 1
    except Exception:
        log.exception("could not read the run records")
        return 1


def _finish(
    config: Config,
    job: JobSpec,
    run_id: str,
    recorder: RunRecorder | None,
    t0: float,
    outcome: JobOutcome,
    *,
    error: BaseException | None = None,
) -> tuple[datetime, float, JobOutcome]:
    """Record and log the end of a run; the outcome returned carries the deferral count."""
    finished_at = _utcnow()
    duration = round(time.monotonic() - t0, 3)
    counts = dict(outcome.counts)
    if outcome.outcome == Outcome.DEFERRED:
        in_a_row = _deferred_in_a_row(job, recorder)
        if in_a_row >= config.retry.warn_after_deferrals:
            log.warning(
                "deferred several cycles in a row; is the backend or its LLM down?",
                deferred_in_a_row=in_a_row,
            )
            counts["deferred_in_a_row"] = in_a_row
    if recorder is not None:
        _record(
            "end",
            lambda: recorder.record_run_end(run_id, outcome.outcome, outcome.detail, counts, finished_at),
        )
    fields = {
        "kind": job.kind,
        "outcome": str(outcome.outcome),
        "detail": outcome.detail,
        "counts": counts,
        **outcome.fields,
        "duration_s": duration,
    }
    if error is not None:
        log.error("job finished", exc_info=error, **fields)
    elif outcome.outcome in TROUBLE:
        log.warning("job finished", **fields)
    else:
        log.info("job finished", **fields)
    return finished_at, duration, dataclasses.replace(outcome, counts=counts)


# --- roll-ups now, as the daemon runs them ----------------------------------------------------------


async def run_rollups_now(
    config: Config,
    profiles: Sequence[str],
    *,
    dry_run: bool = False,
    since: datetime | None = None,
    on_step: StepHook | None = None,
    backend: MemoryBackend | None = None,
) -> list[RollupReport]:
    """Run each profile's roll-up job now, exactly as the daemon does (same runner, run record,
    timeout, peer card and deferral count); one report per profile, in order."""

    job = RollupJob(dry_run=dry_run, since=since, on_step=on_step, backend=backend, keep_reports=True)
    reports: list[RollupReport] = []
    with open_state(config) as state:
        try:
            await _run_each(config, profiles, job, state, reports, dry_run)
        finally:
            await job.aclose()
    return reports


async def _run_each(
    config: Config,
    profiles: Sequence[str],
    job: RollupJob,
    state: StateStore,
    reports: list[RollupReport],
    dry_run: bool,
) -> None:
    from dreamer.rollup.report import RollupReport

    for profile in profiles:
        result = await execute_job(config, rollup_job(config, profile), job, recorder=state)
        report = job.reports.pop(result.run_id, None)
        if report is None or report.outcome != result.outcome.outcome:
            # The run ended before or after the pipeline's report (backend down at the gate,
            # a timeout): report what the run record says.
            report = RollupReport(
                profile=profile,
                run_id=result.run_id,
                outcome=result.outcome.outcome,
                reason=result.outcome.detail,
                dry_run=dry_run,
                duration_s=result.duration_s,
            )
        reports.append(report)
