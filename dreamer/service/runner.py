"""How one run of a job is carried out: the one owner of every run, for the daemon and the CLI.

:func:`execute_job` wraps every run, whoever starts it (the daemon's scheduler, ``dreamer rollup``,
the demo): a run id, the log context (``job_id``, ``run_id`` and the job's own fields such as
``profile`` and ``bank``), the run record in the state store, the timeout, the one "job finished"
summary, the "deferred N times in a row" warning, and the rule that an error in a job body is an
outcome (:func:`dreamer.outcomes.classify`), never a crash. The job bodies are runners:
:class:`RollupJob` (the pipeline, then the peer card) and :func:`run_audit_job`.
See ``docs/design/rollup.md`` (the run owner) and ``docs/design/service.md``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
import urllib.parse
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Protocol

import anyio
import structlog

from dreamer.config import Config
from dreamer.errors import DreamerError, RunBusyError, StateFileError
from dreamer.log import get_logger
from dreamer.outcomes import TROUBLE, Outcome, classify, describe
from dreamer.rollup.activity import ActivityCache
from dreamer.service.jobs import JobSpec, rollup_job
from dreamer.slot import SlotLock
from dreamer.state import StateStore

if TYPE_CHECKING:
    from dreamer.backends.base import MemoryBackend
    from dreamer.rollup.report import RollupReport
    from dreamer.rollup.semantic import SemanticJudge

log = get_logger("dreamer.jobs")


@dataclass(frozen=True, slots=True)
class JobOutcome:
    """What a run did: an outcome word, a human detail line, counters for the run record, and
    further fields for the run's log summary."""

    outcome: str
    detail: str = ""
    counts: Mapping[str, int] = field(default_factory=dict)
    fields: Mapping[str, object] = field(default_factory=dict)


class JobRunner(Protocol):
    """The body of a job. Raise to report failure; return a :class:`JobOutcome` otherwise."""

    async def __call__(self, config: Config, job: JobSpec, run_id: str) -> JobOutcome: ...


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


StepHook = Callable[[str, str], None]


# --- the job bodies -------------------------------------------------------------------------------


class RollupJob:
    """The roll-up job: gate on the cycle's shared activity snapshot, run the pipeline, and refresh
    the profile's peer card after a run that promoted or reinforced something.

    One instance serves every profile, so all roll-up jobs of a cycle share one activity call. The
    options are the CLI's (``--dry-run``, ``--since``, progress); ``reports`` keeps each run's full
    report by run id for a caller that prints it. ``backend``, when given, is used and not closed.
    """

    def __init__(
        self,
        *,
        dry_run: bool = False,
        since: datetime | None = None,
        on_step: StepHook | None = None,
        backend: MemoryBackend | None = None,
    ) -> None:
        self.dry_run = dry_run
        self.since = since
        self.on_step = on_step
        self.backend = backend
        self.reports: dict[str, RollupReport] = {}
        self._caches: dict[float, ActivityCache] = {}
        # The embedder and the ledger vectors it keeps in memory live as long as this job (the
        # daemon's life), rebuilt when a reload changes [embeddings] or the top k.
        self._semantic: tuple[object, SemanticJudge | None] = (None, None)

    def _cache(self, config: Config) -> ActivityCache:
        ttl = min(config.schedule.interval_minutes * 30.0, config.schedule.jitter_s + 60.0)
        return self._caches.setdefault(ttl, ActivityCache(ttl))

    async def _semantic_judge(self, config: Config) -> SemanticJudge | None:
        from dreamer.embeddings.factory import make_embedder
        from dreamer.rollup.semantic import SemanticJudge

        key = (config.embeddings, config.rollup.semantic_top_k)
        held_key, held = self._semantic
        if held_key == key:
            return held
        if held is not None:
            await held.aclose()
        embedder = make_embedder(config)
        judge = (
            None
            if embedder is None
            else SemanticJudge(
                embedder, reembed_batch=config.embeddings.reembed_batch, top_k=config.rollup.semantic_top_k
            )
        )
        self._semantic = (key, judge)
        return judge

    async def aclose(self) -> None:
        """Close the embedder (its HTTP client), if one was made."""
        _, held = self._semantic
        self._semantic = (None, None)
        if held is not None:
            await held.aclose()

    async def __call__(self, config: Config, job: JobSpec, run_id: str) -> JobOutcome:
        # Imported at the first run, not at start: the daemon signals READY before paying for them.
        from dreamer.backends import open_backend
        from dreamer.peercard.polish import PolishTokens
        from dreamer.peercard.refresh import refresh_peer_cards
        from dreamer.rollup.pipeline import Rollup

        profile = job.key
        run_lock = None if self.dry_run else profile_run_lock(config, profile)
        upstream_lock = None if self.dry_run else upstream_run_lock(config, profile)
        if run_lock is not None:
            await run_lock.acquire()
        if upstream_lock is not None:
            try:
                await upstream_lock.acquire()
            except BaseException:
                if run_lock is not None:
                    run_lock.release()
                raise
        backend = self.backend
        try:
            semantic = await self._semantic_judge(config)
            if backend is None:
                # The judge's embedder also makes the embedded store's recall hybrid (Hindsight ignores it).
                backend = open_backend(config, embedder=semantic.embedder if semantic is not None else None)
            with StateStore.open(config.state_path) as state:
                banks = [config.bank_id(p.bank) for p in config.enabled_profiles().values()]
                bank_id = config.profile_bank_id(profile)
                if bank_id not in banks:
                    banks.append(bank_id)
                activity = await self._cache(config).get(backend, banks, bank_id)
                rollup = Rollup(config, backend, state, on_step=self.on_step, semantic=semantic)
                report = await rollup.run(
                    profile, activity=activity, run_id=run_id, dry_run=self.dry_run, since=self.since
                )
                self.reports[run_id] = report
                polish = PolishTokens()
                if report.outcome in (Outcome.PROMOTED, Outcome.REINFORCED) and config.peer_card.enabled:
                    try:
                        await refresh_peer_cards(
                            config, state, profiles=[profile], backend=backend, tokens=polish
                        )
                    except (OSError, DreamerError) as exc:
                        # The run has committed: a peer card that cannot be refreshed is a warning,
                        # never the run's outcome.
                        log.warning("could not write the peer card", error=str(exc))
                summary = report.to_json()
                fields = {k: summary[k] for k in _REPORT_FIELDS}
                counts = dict(report.counts())
                # The peer card's polish reflects are this run's LLM tokens too (status, metrics,
                # the daily budget), and polish_llm_* tell them apart.
                polish.add_to(counts)
                if activity is not None:
                    # Units written to the bank and not rolled up yet, as this run leaves them.
                    counts["backlog"] = max(0, activity.unit_count - state.watermark(profile).unit_count)
                return JobOutcome(report.outcome, report.reason, counts, fields)
        finally:
            if self.backend is None and backend is not None:
                await backend.aclose()
            if upstream_lock is not None:
                upstream_lock.release()
            if run_lock is not None:
                run_lock.release()


#: How long a roll-up waits for another run of the same profile before it reports ``busy``.
RUN_LOCK_WAIT_S = 2.0


def profile_run_lock(config: Config, profile: str) -> SlotLock:
    """The lock that makes runs of one profile one at a time, across the daemon and the CLI: a
    flock on ``<state_dir>/locks/rollup-<profile>.lock`` (never unlinked, never a followed link)."""
    return _run_lock(config, "rollup-" + profile, f"roll-up of profile {profile!r}", "its run lock")


def upstream_run_lock(config: Config, profile: str) -> SlotLock:
    """The lock that makes runs into one upstream bank one at a time, across processes: two
    profiles judged at once would each miss the other's new cards and promote the same fact twice
    into an append-only bank. A flock on ``<state_dir>/locks/upstream-<bank id>.lock``."""
    bank_id = config.upstream_bank_id(profile)
    return _run_lock(config, "upstream-" + bank_id, f"roll-up into the upstream bank {bank_id!r}", "its lock")


def _run_lock(config: Config, name: str, what: str, lock: str) -> SlotLock:
    """A run lock under ``<state_dir>/locks/``: waited for ``RUN_LOCK_WAIT_S``, then ``busy``."""
    return SlotLock(
        config.state_dir / "locks" / (urllib.parse.quote(name, safe="") + ".lock"),
        acquire_timeout_s=RUN_LOCK_WAIT_S,
        poll_interval_s=0.1,
        busy=lambda path, waited: RunBusyError(
            f"another {what} is running ({lock} {path} stayed taken for {waited:g}s); "
            "this one is skipped and the next cycle runs it"
        ),
        follow_symlinks=False,
    )


_REPORT_FIELDS = (
    "summariser",
    "embedder",
    "reembedded",
    "slot_wait_s",
    "slot_held_s",
    "dry_run",
    "watermark_from",
    "watermark_to",
)


async def run_audit_job(config: Config, job: JobSpec, run_id: str) -> JobOutcome:
    """Audit one agent's MEMORY.md / USER.md when due (interval or utilisation threshold)."""
    from dreamer.hermes.configured import audit_once  # at the first audit, not at start

    report = await audit_once(config, job.key)
    if report is None:
        return JobOutcome(Outcome.NOT_DUE, "no audit due")
    doc = report.to_dict()
    counts = {k: v for k, v in doc.get("counts", {}).items() if isinstance(v, int)}
    return JobOutcome(str(report.status).lower(), f"audit {report.status}", counts)


# kind -> runner used by the daemon unless a runner is injected.
DEFAULT_RUNNERS: Mapping[str, JobRunner] = {
    "rollup": RollupJob(),
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

    job = RollupJob(dry_run=dry_run, since=since, on_step=on_step, backend=backend)
    reports: list[RollupReport] = []
    with StateStore.open(config.state_path) as state:
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
