"""One simulated host: its own state store, its own seat, its heartbeat thread, its cycles.

A cycle mirrors what the daemon does on PostgreSQL, with the store's synchronous calls in the
host's own thread instead of the event loop's worker threads: a heartbeat (:meth:`HostSeat.beat`),
then, for each profile in the host's own order (every host walks all of them, as every daemon plans
every profile), :meth:`HostSeat.runs_here`; for a profile that is its own, the steps of
:meth:`HostSeat.holding`: take the profile's lease (refused at once when another host holds it),
wait for the upstream bank's (polled every 0.1 s for ``RUN_LOCK_WAIT_S``), run with the store
fenced by both, give both back. The run does no work and commits a tiny roll-up: it reads the
watermark, records the run's start and calls :meth:`StateStore.commit_rollup` with the watermark
moved, no cards, and the watermark it read as ``expected``; the commit checks both leases.

The heartbeat thread beats every third of the lease time, as :meth:`HostSeat.keep_alive` does. On
SQLite it has a connection of its own (one ``sqlite3`` connection cannot hold two threads'
transactions); on PostgreSQL it shares the host's pool, as the daemon's heartbeat does.
"""

from __future__ import annotations

import contextlib
import itertools
import random
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from bench.hosts.counting import CountingConnection, StatementCounter, role
from dreamer.errors import DreamerError, LeaseLostError, RunBusyError
from dreamer.jobs.leases import PROFILE_LEASE, UPSTREAM_LEASE, HostSeat
from dreamer.jobs.locks import RUN_LOCK_WAIT_S
from dreamer.state import Lease, StateStore, Watermark

__all__ = ["CycleStats", "Run", "SimHost"]

#: How often a run asks again for a taken upstream lease (as ``HostSeat._wait_for`` does).
UPSTREAM_POLL_S = 0.1


@dataclass(frozen=True, slots=True)
class Run:
    """One run that committed: which profile, which host (its label and its seat's owner id), the
    tokens of its two leases, its cycle, and when it held them (``time.monotonic()`` seconds: from
    the profile lease taken to just before it is given back; the upstream bank's from ``bank_at``)."""

    profile: str
    host: str
    owner: str
    token: int
    bank: str
    bank_token: int
    cycle: int
    start: float
    bank_at: float
    end: float


@dataclass
class CycleStats:
    """What one host did in one cycle."""

    host: str
    owner: str
    cycle: int
    started: float = 0.0
    ended: float = 0.0
    mine: int = 0  # profiles runs_here said were this host's
    ran: int = 0
    busy_profile: int = 0  # the profile's lease was held by another host
    busy_upstream: int = 0  # the upstream bank's lease stayed taken for RUN_LOCK_WAIT_S
    lease_lost: int = 0  # the commit's fence refused (LeaseLostError)
    watermark_moved: int = 0  # the commit's watermark check refused (RunBusyError)
    upstream_waits: list[float] = field(default_factory=list)
    #: How the host stopped in this cycle: "" (it did not), "kill" or "leave"; when; what it held.
    stopped: str = ""
    stopped_at: float = 0.0
    held: tuple[str, ...] = ()
    runs: list[Run] = field(default_factory=list)
    statements: dict[str, dict[str, int]] = field(default_factory=dict)
    statement_s: dict[str, float] = field(default_factory=dict)


def counted(store: StateStore, counter: StatementCounter) -> StateStore:
    """``store`` with every statement it sends counted in ``counter``."""
    store._conn = CountingConnection(store._conn, counter)
    return store


class SimHost:
    """A host of the simulation: a seat, a store (two on SQLite), a heartbeat thread."""

    def __init__(
        self, label: str, ttl_s: float, open_store: Callable[[], StateStore], *, own_beat_store: bool
    ) -> None:
        self.label = label
        self.ttl_s = ttl_s
        self.seat = HostSeat(label, ttl_s)
        self.counter = StatementCounter()
        self.store = counted(open_store(), self.counter)
        self.beat_store = counted(open_store(), self.counter) if own_beat_store else self.store
        self.beats_failed = 0
        #: When each heartbeat returned (``time.monotonic()``), whichever thread sent it.
        self.beaten_at: list[float] = []
        #: How long each heartbeat took (most of it, when long, waiting for the write lock).
        self.beat_took: list[float] = []
        self._stop_beating = threading.Event()
        self._beater: threading.Thread | None = None

    @property
    def owner(self) -> str:
        return self.seat.owner

    # --- the heartbeat ------------------------------------------------------------------------

    def start(self) -> None:
        """The first heartbeat (this host's row made), then one every third of the lease time."""
        self.beat()
        self._beater = threading.Thread(target=self._keep_alive, name=f"beat {self.label}", daemon=True)
        self._beater.start()

    def beat(self, store: StateStore | None = None) -> list[Lease]:
        started = time.monotonic()
        with role("beat"):
            kept = self.seat.beat(store or self.store)
        self.beaten_at.append(time.monotonic())
        self.beat_took.append(self.beaten_at[-1] - started)
        return kept

    def beat_gaps(self) -> list[float]:
        """The times between this host's heartbeats (a host whose gap passes the lease time is
        dead to the others meanwhile)."""
        return [b - a for a, b in itertools.pairwise(sorted(self.beaten_at))]

    def longest_beat_gap(self) -> float:
        return max(self.beat_gaps(), default=0.0)

    def _keep_alive(self) -> None:
        while not self._stop_beating.wait(self.ttl_s / 3):
            try:
                self.beat(self.beat_store)
            except DreamerError:
                self.beats_failed += 1

    def stop_beating(self) -> None:
        self._stop_beating.set()
        if self._beater is not None:
            self._beater.join()

    def close(self) -> None:
        self.stop_beating()
        for store in {id(self.store): self.store, id(self.beat_store): self.beat_store}.values():
            with contextlib.suppress(Exception):
                store.close()

    # --- a cycle ------------------------------------------------------------------------------

    def cycle(
        self,
        k: int,
        profiles: Sequence[str],
        bank_of: Callable[[str], str],
        *,
        seed: int = 0,
        stop: str = "",
        stop_after: int = 0,
        halfway: threading.Event | None = None,
        half: int = 0,
        work_s: float = 0.0,
    ) -> CycleStats:
        """One cycle over ``profiles``; with ``stop`` ("kill" or "leave") the host stops once it
        has run ``stop_after`` profiles. ``halfway`` is set once it has run ``half``. A run holds
        its leases ``work_s`` seconds before it commits (its LLM calls; none by default)."""
        stats = CycleStats(self.label, self.owner, k, started=time.monotonic())
        before = self.counter.snapshot()
        self.beat()
        order = list(profiles)
        random.Random(f"{seed}:{self.label}:{k}").shuffle(order)
        for profile in order:
            if not self.seat.runs_here(profile):
                continue
            if stop and stats.ran >= stop_after:
                self._stop(stop, profile, bank_of(profile), stats)
                break
            stats.mine += 1
            self._run(profile, bank_of(profile), stats, work_s)
            if halfway is not None and stats.ran >= half:
                halfway.set()
        stats.ended = time.monotonic()
        self._count(before, stats)
        return stats

    def _count(self, before: tuple[Any, Any], stats: CycleStats) -> None:
        counts, seconds = self.counter.snapshot()
        counts.subtract(before[0])
        seconds.subtract(before[1])
        for (who, kind), n in counts.items():
            if n:
                stats.statements.setdefault(who, {})[kind] = n
        for (who, kind), s in seconds.items():
            if s > 0:
                stats.statement_s[f"{who} {kind}"] = s

    def _run(self, profile: str, bank: str, stats: CycleStats, work_s: float = 0.0) -> None:
        """The steps of :meth:`HostSeat.holding` around a tiny fenced commit."""
        store, owner = self.store, self.owner
        mine = store.take_lease(PROFILE_LEASE + profile, owner, self.ttl_s)
        if mine is None:
            stats.busy_profile += 1
            return
        start = time.monotonic()
        leases = [mine]
        try:
            upstream = self._wait_for(UPSTREAM_LEASE + bank, stats)
            if upstream is None:
                stats.busy_upstream += 1
                return
            leases.append(upstream)
            bank_at = time.monotonic()
            with store.fenced(leases):
                if work_s > 0:
                    time.sleep(work_s)
                self._commit(profile, bank, stats.cycle)
            stats.runs.append(
                Run(profile, self.label, owner, mine.token, bank, upstream.token, stats.cycle, start,
                    bank_at, time.monotonic())
            )
            stats.ran += 1
        except LeaseLostError:
            stats.lease_lost += 1
        except RunBusyError:
            stats.watermark_moved += 1
        finally:
            for lease in reversed(leases):
                with contextlib.suppress(DreamerError):
                    store.release_lease(lease.name, owner)

    def _wait_for(self, name: str, stats: CycleStats) -> Lease | None:
        started = time.monotonic()
        deadline = started + RUN_LOCK_WAIT_S
        while True:
            lease = self.store.take_lease(name, self.owner, self.ttl_s)
            if lease is not None or time.monotonic() >= deadline:
                stats.upstream_waits.append(time.monotonic() - started)
                return lease
            time.sleep(UPSTREAM_POLL_S)

    def _commit(self, profile: str, bank: str, k: int) -> None:
        store = self.store
        read = store.watermark(profile)
        now = datetime.now(UTC)
        run_id = f"{self.owner}:{k}:{profile}"
        store.record_run_start(run_id, f"rollup:{profile}", now)
        store.commit_rollup(
            profile=profile,
            bank_id=bank,
            watermark=Watermark(now, {}, read.unit_count + 1, now),
            promoted=(),
            reinforced=(),
            run_id=run_id,
            outcome="nothing_new",
            detail="bench.hosts",
            counts={},
            finished_at=now,
            expected=read,
        )

    def _stop(self, how: str, profile: str, bank: str, stats: CycleStats) -> None:
        """Stop mid-cycle. "kill": take the next run's two leases, then stop beating and never give
        them back (a process killed in the middle of a run). "leave": stop beating, then
        :meth:`StateStore.leave`, as the daemon's clean stop does."""
        if how == "kill":
            held = [self.store.take_lease(PROFILE_LEASE + profile, self.owner, self.ttl_s)]
            if held[0] is not None:
                held.append(self.store.take_lease(UPSTREAM_LEASE + bank, self.owner, self.ttl_s))
            self.stop_beating()
            stats.held = tuple(lease.name for lease in held if lease is not None)
        else:
            self.stop_beating()
            self.store.leave(self.owner)
        stats.stopped, stats.stopped_at = how, time.monotonic()
