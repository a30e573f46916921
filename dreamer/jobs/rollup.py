"""The roll-up job's body: gate on the cycle's shared activity snapshot, run the pipeline under the
profile's and the upstream bank's run locks, and refresh the profile's peer card after a run that
promoted or reinforced something."""

from __future__ import annotations

import contextlib
import importlib
import sys
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING

import anyio

from dreamer.config import Config
from dreamer.errors import DreamerError
from dreamer.heap import give_back_memory
from dreamer.jobs.leases import HostSeat, seat_for
from dreamer.jobs.locks import profile_run_lock, upstream_run_lock
from dreamer.jobs.open import open_for
from dreamer.jobs.spec import JobOutcome, JobSpec, StepHook
from dreamer.log import get_logger
from dreamer.outcomes import Outcome
from dreamer.rollup.activity import ActivityCache
from dreamer.slot import SlotLock

if TYPE_CHECKING:
    from dreamer.backends.base import MemoryBackend
    from dreamer.rollup.report import RollupReport
    from dreamer.rollup.semantic import SemanticJudge
    from dreamer.state import StateStore

log = get_logger("dreamer.jobs")


class RollupJob:
    """The roll-up job: one instance serves every profile, so all roll-up jobs of a cycle share one
    activity call.

    The options are the CLI's (``--dry-run``, ``--since``, progress). With ``keep_reports``,
    ``reports`` keeps each run's full report by run id for a caller that prints it and pops it; the
    daemon's job keeps none (a report kept per run, idle runs included, was most of the +7.9 MiB
    the daemon grew over 1,000 cycles of ``bench.daemon``; +2.1 MiB without them).
    ``backend``, when given, is used and not closed. With ``daemon`` (the daemon's job) a run's
    commits leave the state file's checkpoint to the daemon, which runs it once the run has
    finished (:meth:`~dreamer.state.StateStore.defer_checkpoints`), and a run opens the state file
    only if it is there (the daemon made it at start; a run must not start a new, empty one).
    """

    def __init__(
        self,
        *,
        dry_run: bool = False,
        since: datetime | None = None,
        on_step: StepHook | None = None,
        backend: MemoryBackend | None = None,
        keep_reports: bool = False,
        daemon: bool = False,
    ) -> None:
        self.dry_run = dry_run
        self.daemon = daemon
        self.keep_reports = keep_reports
        self.since = since
        self.on_step = on_step
        self.backend = backend
        self.reports: dict[str, RollupReport] = {}
        self._caches: dict[float, ActivityCache] = {}
        # The embedder and the ledger vectors it keeps in memory live as long as this job (the
        # daemon's life), rebuilt when a reload changes [embeddings] or the top k, or when what
        # [embeddings] resolves to changes.
        self._semantic: tuple[object, SemanticJudge | None] = (None, None)
        #: Runs in flight: the last one to end lets go of the local model (``keep_loaded``).
        self._active = 0

    def _cache(self, config: Config) -> ActivityCache:
        ttl = min(config.schedule.interval_minutes * 30.0, config.schedule.jitter_s + 60.0)
        return self._caches.setdefault(ttl, ActivityCache(ttl))

    async def _semantic_judge(self, config: Config) -> SemanticJudge | None:
        from dreamer.embeddings.factory import make_embedder, resolve_embeddings
        from dreamer.rollup.semantic import SemanticJudge

        # What "auto" resolves to is part of the key: model files installed, removed or damaged
        # since the last run change the embedder as they change the status and the reload's line.
        key = (config.embeddings, config.rollup.semantic_top_k, resolve_embeddings(config))
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
                embedder,
                reembed_batch=config.embeddings.reembed_batch,
                top_k=config.rollup.semantic_top_k,
                lexical_fallback=config.embeddings.provider == "auto",
                index_dir=config.vector_index_dir,
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
        profile = job.key
        # On a PostgreSQL state shared by hosts the run locks are leases, taken once it is open.
        seat = None if self.dry_run else seat_for(config)
        locks = (
            []
            if self.dry_run or seat is not None
            else [profile_run_lock(config, profile), upstream_run_lock(config, profile)]
        )
        self._active += 1
        try:
            await _acquire_all(locks)
            try:
                return await self._run(config, profile, run_id, seat)
            finally:
                for lock in reversed(locks):
                    lock.release()
        finally:
            self._active -= 1
            if self._active == 0:
                with anyio.CancelScope(shield=True):
                    await anyio.to_thread.run_sync(self._after_the_last_run, config.embeddings.keep_loaded)

    def _after_the_last_run(self, keep_loaded: bool) -> None:
        """Once no run is in flight (a daemon idles for most of the hour): let go of the local
        model's weights unless ``keep_loaded`` (the next run loads them again; a no-op for other
        embedders), and hand the memory the runs freed back to the system (:mod:`dreamer.heap`)."""
        _, held = self._semantic
        if held is not None and not keep_loaded:
            held.release_model()
        give_back_memory()

    async def _run(self, config: Config, profile: str, run_id: str, seat: HostSeat | None) -> JobOutcome:
        # Imported at the first run, not at start: the daemon signals READY before paying for them,
        # and in a worker thread, so the event loop goes on answering the watchdog meanwhile.
        await import_off_loop(run_modules(config))
        from dreamer.rollup.pipeline import Rollup

        semantic = await self._semantic_judge(config)
        if semantic is not None:
            await import_off_loop(("numpy",))
        # The judge's embedder also makes the embedded store's recall hybrid (Hindsight ignores it).
        embedder = semantic.embedder if semantic is not None else None
        async with open_for(
            config, backend=True, use_backend=self.backend, embedder=embedder,
            state="there" if self.daemon else "write",
        ) as opened, _leases(seat, opened.state, profile, config.upstream_bank_id(profile)):
            backend, state = opened.backend, opened.state
            if self.daemon:
                state.defer_checkpoints()
            banks = [config.bank_id(p.bank) for p in config.enabled_profiles().values()]
            bank_id = config.profile_bank_id(profile)
            if bank_id not in banks:
                banks.append(bank_id)
            activity = await self._cache(config).get(backend, banks, bank_id)
            rollup = Rollup(config, backend, state, on_step=self.on_step, semantic=semantic)
            report = await rollup.run(
                profile, activity=activity, run_id=run_id, dry_run=self.dry_run, since=self.since
            )
            if self.keep_reports:
                self.reports[run_id] = report
            counts = dict(report.counts())
            await _refresh_peer_card(config, state, backend, profile, report, counts)
            if activity is not None:
                # Units written to the bank and not rolled up yet, as this run leaves them.
                counts["backlog"] = max(0, activity.unit_count - state.watermark(profile).unit_count)
            summary = report.to_json()
            fields = {k: summary[k] for k in _REPORT_FIELDS}
            return JobOutcome(report.outcome, report.reason, counts, fields)


def run_modules(config: Config) -> tuple[str, ...]:
    """What a run imports beyond the daemon's start: the pipeline, the peer card and the backend."""
    backend = (
        "dreamer.backends.hindsight.backend"
        if config.backend.kind == "hindsight"
        else "dreamer.backends.embedded.backend"
    )
    return ("dreamer.rollup.pipeline", "dreamer.peercard.refresh", "dreamer.peercard.polish", backend)


async def import_off_loop(names: Sequence[str]) -> None:
    """Import the modules of ``names`` not imported yet, in a worker thread: on the event loop the
    first run's imports were its longest stall between two watchdog pings."""
    missing = [name for name in names if name not in sys.modules]
    if missing:
        await anyio.to_thread.run_sync(lambda: [importlib.import_module(name) for name in missing])


def _leases(
    seat: HostSeat | None, state: StateStore, profile: str, upstream_bank: str
) -> contextlib.AbstractAsyncContextManager[object]:
    """The run's leases (:meth:`HostSeat.holding`), or nothing on a state of one host."""
    if seat is None:
        return contextlib.nullcontext()
    return seat.holding(state, profile, upstream_bank)


async def _acquire_all(locks: list[SlotLock]) -> None:
    """Take the locks in order; on a failure release the ones taken."""
    taken: list[SlotLock] = []
    try:
        for lock in locks:
            await lock.acquire()
            taken.append(lock)
    except BaseException:
        for lock in reversed(taken):
            lock.release()
        raise


async def _refresh_peer_card(
    config: Config,
    state: StateStore,
    backend: MemoryBackend,
    profile: str,
    report: RollupReport,
    counts: dict[str, int],
) -> None:
    """Refresh the profile's peer card after a run that promoted or reinforced something. The run
    has committed: a peer card that cannot be refreshed is a warning, never the run's outcome. The
    polish reflects' LLM tokens are this run's tokens too (status, metrics, the daily budget), and
    ``polish_llm_*`` in ``counts`` tell them apart."""
    from dreamer.peercard.polish import PolishTokens
    from dreamer.peercard.refresh import refresh_peer_cards

    polish = PolishTokens()
    if report.outcome in (Outcome.PROMOTED, Outcome.REINFORCED) and config.peer_card.enabled:
        try:
            await refresh_peer_cards(config, state, profiles=[profile], backend=backend, tokens=polish)
        except (OSError, DreamerError) as exc:
            log.warning("could not write the peer card", error=str(exc))
    polish.add_to(counts)


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
