"""Scheduled jobs: which jobs a configuration asks for, and how one run of a job is carried out.

The job plan is pure data. :func:`plan_jobs` turns a :class:`~dreamer.config.Config` into a table
``{job_id: JobSpec}``; the daemon schedules that table, and on reload :func:`diff_plans` says which
jobs to add, remove or reschedule, so untouched jobs keep their place in the schedule.

To add a kind of job (say ``audit:<agent>``):

1. write a planner ``def plan_audit_jobs(config) -> Iterable[JobSpec]`` and register it in
   :data:`PLANNERS` under its kind;
2. write a runner ``async def run_audit(config, job, run_id) -> JobOutcome`` and register it in
   :data:`DEFAULT_RUNNERS` (the daemon's default runner dispatches on ``job.kind``);
3. optionally give the kind a noun for the STATUS line in :data:`KIND_NOUNS`.

A runner is any coroutine function matching :class:`JobRunner`. It is given the configuration the
run started with (a reload never changes it under a running job), the job's spec and the run id.
:func:`execute_job` wraps every run: a fresh run id, log context (``job_id``, ``run_id`` and the
job's own fields such as ``profile`` and ``bank``), the run record in the state store, the timeout,
and the rule that an exception in a job body is an outcome (``failed``), never a crash.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Protocol

import anyio
import structlog

from dreamer.config import Config
from dreamer.log import get_logger
from dreamer.rollup.activity import ActivityCache
from dreamer.state import StateStore

log = get_logger("dreamer.jobs")

# Outcomes every job can end with, whatever its body does. Runners add their own
# (for a roll-up: "promoted", "skipped", "deferred", ...).
OUTCOME_NOOP = "noop"
OUTCOME_FAILED = "failed"
OUTCOME_TIMEOUT = "timeout"
OUTCOME_CANCELLED = "cancelled"


@dataclass(frozen=True, slots=True)
class JobSpec:
    """One scheduled job: what it is, when it runs, and the log context of its runs.

    ``interval_s`` and ``jitter_s`` form the trigger; changing either reschedules the job.
    ``first_run_delay_s`` applies only when the job is added. ``context`` is bound into every log
    record of a run (for a roll-up: ``profile`` and ``bank``).
    """

    job_id: str
    kind: str
    key: str
    interval_s: float
    jitter_s: int
    first_run_delay_s: float
    misfire_grace_s: int
    timeout_s: float
    context: tuple[tuple[str, str], ...] = ()

    @property
    def trigger(self) -> tuple[float, int]:
        return (self.interval_s, self.jitter_s)

    @property
    def label(self) -> str:
        """How the STATUS line names the job: the profile for a roll-up, else the job id."""
        return self.key if self.kind == "rollup" else self.job_id

    def log_context(self) -> dict[str, str]:
        return dict(self.context)


@dataclass(frozen=True, slots=True)
class JobOutcome:
    """What a run did: a short outcome word, a human detail line, and counters for the run record."""

    outcome: str
    detail: str = ""
    counts: Mapping[str, int] = field(default_factory=dict)


class JobRunner(Protocol):
    """The body of a job. Raise to report failure; return a :class:`JobOutcome` otherwise."""

    async def __call__(self, config: Config, job: JobSpec, run_id: str) -> JobOutcome: ...


class RunRecorder(Protocol):
    """Where run records go (:class:`dreamer.state.StateStore` in the daemon)."""

    def record_run_start(self, run_id: str, job_id: str, started_at: datetime) -> None: ...

    def record_run_end(
        self,
        run_id: str,
        outcome: str,
        detail: str,
        counts: Mapping[str, int],
        finished_at: datetime,
    ) -> None: ...


# --- the plan -----------------------------------------------------------------------------------

Planner = Callable[[Config], Iterable[JobSpec]]


def job_id(kind: str, key: str) -> str:
    return f"{kind}:{key}"


def plan_rollup_jobs(config: Config) -> Iterable[JobSpec]:
    """One roll-up job per enabled profile."""
    schedule = config.schedule
    for name, profile in sorted(config.enabled_profiles().items()):
        yield JobSpec(
            job_id=job_id("rollup", name),
            kind="rollup",
            key=name,
            interval_s=schedule.interval_minutes * 60.0,
            jitter_s=schedule.jitter_s,
            first_run_delay_s=schedule.first_run_delay_s,
            misfire_grace_s=schedule.misfire_grace_s,
            timeout_s=schedule.job_timeout_s,
            context=(("profile", name), ("bank", config.bank_id(profile.bank))),
        )


def plan_audit_jobs(config: Config) -> Iterable[JobSpec]:
    """One memory-file audit check per enabled agent (the audit itself runs only when due)."""
    if not config.audit.enabled:
        return
    schedule = config.schedule
    for name, agent in sorted(config.agents.items()):
        if not agent.enabled:
            continue
        yield JobSpec(
            job_id=job_id("audit", name),
            kind="audit",
            key=name,
            interval_s=config.audit.check_every_minutes * 60.0,
            jitter_s=schedule.jitter_s,
            first_run_delay_s=schedule.first_run_delay_s,
            misfire_grace_s=schedule.misfire_grace_s,
            timeout_s=schedule.job_timeout_s,
            context=(("agent", name), ("memories_dir", str(agent.memories_dir))),
        )


# kind -> planner. Register a new kind of job here.
PLANNERS: Mapping[str, Planner] = {
    "rollup": plan_rollup_jobs,
    "audit": plan_audit_jobs,
}

# kind -> (singular, plural) noun used to count jobs in the STATUS line.
KIND_NOUNS: Mapping[str, tuple[str, str]] = {
    "rollup": ("profile", "profiles"),
    "audit": ("agent", "agents"),
}


def plan_jobs(config: Config, planners: Mapping[str, Planner] = PLANNERS) -> dict[str, JobSpec]:
    """The full job table for ``config``, keyed by job id (``rollup:<profile>``, ...)."""
    plan: dict[str, JobSpec] = {}
    for kind, planner in planners.items():
        for spec in planner(config):
            if spec.kind != kind:
                raise ValueError(f"planner for {kind!r} produced a {spec.kind!r} job ({spec.job_id})")
            if spec.job_id in plan:
                raise ValueError(f"two jobs share the id {spec.job_id!r}")
            plan[spec.job_id] = spec
    return plan


@dataclass(frozen=True, slots=True)
class PlanDiff:
    """How a new job table differs from the running one; each field is a sorted tuple of job ids.

    - ``added`` / ``removed``: schedule or unschedule;
    - ``rescheduled``: the trigger (interval or jitter) changed, so the next run time is recomputed;
    - ``updated``: the trigger is the same but something else changed (timeout, misfire grace, log
      context): the job keeps its next run time and picks up the new spec at its next run;
    - ``unchanged``: nothing to do.
    """

    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    rescheduled: tuple[str, ...] = ()
    updated: tuple[str, ...] = ()
    unchanged: tuple[str, ...] = ()

    @property
    def changed(self) -> bool:
        return bool(self.added or self.removed or self.rescheduled or self.updated)

    def summary(self) -> dict[str, list[str]]:
        return {
            "added": list(self.added),
            "removed": list(self.removed),
            "rescheduled": list(self.rescheduled),
            "updated": list(self.updated),
        }


def diff_plans(old: Mapping[str, JobSpec], new: Mapping[str, JobSpec]) -> PlanDiff:
    """Compare two job tables (pure)."""
    rescheduled: list[str] = []
    updated: list[str] = []
    unchanged: list[str] = []
    for jid in sorted(old.keys() & new.keys()):
        before, after = old[jid], new[jid]
        if before.trigger != after.trigger:
            rescheduled.append(jid)
        elif before != after:
            updated.append(jid)
        else:
            unchanged.append(jid)
    return PlanDiff(
        added=tuple(sorted(new.keys() - old.keys())),
        removed=tuple(sorted(old.keys() - new.keys())),
        rescheduled=tuple(rescheduled),
        updated=tuple(updated),
        unchanged=tuple(unchanged),
    )


# --- runners ------------------------------------------------------------------------------------


class RollupRunner:
    """The roll-up job: gate on the cycle's shared activity snapshot, run the pipeline, and refresh
    the profile's peer card after a run that promoted or reinforced something.

    One instance serves every profile, so all roll-up jobs of a cycle share one activity call.
    """

    def __init__(self) -> None:
        self._caches: dict[float, ActivityCache] = {}

    def _cache(self, config: Config) -> ActivityCache:
        ttl = min(config.schedule.interval_minutes * 30.0, config.schedule.jitter_s + 60.0)
        return self._caches.setdefault(ttl, ActivityCache(ttl))

    async def __call__(self, config: Config, job: JobSpec, run_id: str) -> JobOutcome:
        # Imported at the first run, not at start: the daemon signals READY before paying for them.
        from dreamer.backends import open_backend
        from dreamer.peercard.card import refresh_peer_cards
        from dreamer.rollup.pipeline import Rollup

        profile = job.key
        backend = open_backend(config)
        try:
            with StateStore.open(config.state_path) as state:
                banks = [config.bank_id(p.bank) for p in config.enabled_profiles().values()]
                bank_id = config.bank_id(config.profiles[profile].bank)
                activity = await self._cache(config).get(backend, banks, bank_id)
                report = await Rollup(config, backend, state).run(profile, activity=activity, run_id=run_id)
                counts: dict[str, int] = report.counts()
                if report.outcome == "deferred":
                    in_a_row = state.consecutive(job.job_id, "deferred")
                    if in_a_row >= config.retry.warn_after_deferrals:
                        log.warning(
                            "roll-up deferred several cycles in a row; is the backend or its LLM down?",
                            deferred_in_a_row=in_a_row,
                        )
                        counts["deferred_in_a_row"] = in_a_row
                if report.outcome in ("promoted", "reinforced") and config.peer_card.enabled:
                    try:
                        await refresh_peer_cards(config, state, profiles=[profile], backend=backend)
                    except OSError as exc:
                        log.warning("could not write the peer card", error=str(exc))
                return JobOutcome(report.outcome, report.reason, counts)
        finally:
            await backend.aclose()


async def run_audit_job(config: Config, job: JobSpec, run_id: str) -> JobOutcome:
    """Audit one agent's MEMORY.md / USER.md when due (interval or utilisation threshold)."""
    from dreamer.commands.audit import audit_once  # at the first audit, not at start (see RollupRunner)

    report = await audit_once(config, job.key)
    if report is None:
        return JobOutcome("not_due", "no audit due")
    doc = report.to_dict()
    counts = {k: v for k, v in doc.get("counts", {}).items() if isinstance(v, int)}
    return JobOutcome(str(report.status).lower(), f"audit {report.status}", counts)


# kind -> runner used by the daemon unless a runner is injected.
DEFAULT_RUNNERS: Mapping[str, JobRunner] = {
    "rollup": RollupRunner(),
    "audit": run_audit_job,
}


class UnknownJobKind(Exception):
    """A job of a kind no runner is registered for was scheduled."""


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


# --- one run ------------------------------------------------------------------------------------


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
    """Write a run record; a state-store failure is logged, never allowed to kill the run."""
    try:
        call()
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

    Exceptions from the body become outcome ``failed`` (logged with a structured traceback); the
    timeout becomes ``timeout``. Cancellation (the daemon stopping) is recorded as ``cancelled``
    and then propagated, as cancellation must be.
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
            _finish(job, rid, recorder, t0, JobOutcome(OUTCOME_CANCELLED, "stopped before it finished"))
            raise
        except Exception as exc:
            error = exc
            outcome = JobOutcome(OUTCOME_FAILED, f"{type(exc).__name__}: {exc}")
        finished_at, duration = _finish(job, rid, recorder, t0, outcome, error=error)
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
            OUTCOME_TIMEOUT,
            f"cancelled after {job.timeout_s:g}s (schedule.job_timeout_s); it will run again next cycle",
        )
    if not isinstance(outcome, JobOutcome):
        raise TypeError(f"job runner returned {type(outcome).__name__}, not JobOutcome")
    return outcome


def _finish(
    job: JobSpec,
    run_id: str,
    recorder: RunRecorder | None,
    t0: float,
    outcome: JobOutcome,
    *,
    error: BaseException | None = None,
) -> tuple[datetime, float]:
    finished_at = _utcnow()
    duration = round(time.monotonic() - t0, 3)
    if recorder is not None:
        _record(
            "end",
            lambda: recorder.record_run_end(
                run_id, outcome.outcome, outcome.detail, dict(outcome.counts), finished_at
            ),
        )
    fields = {
        "kind": job.kind,
        "outcome": outcome.outcome,
        "detail": outcome.detail,
        "counts": dict(outcome.counts),
        "duration_s": duration,
    }
    if error is not None:
        log.error("job finished", exc_info=error, **fields)
    elif outcome.outcome in (OUTCOME_TIMEOUT, OUTCOME_CANCELLED):
        log.warning("job finished", **fields)
    else:
        log.info("job finished", **fields)
    return finished_at, duration
