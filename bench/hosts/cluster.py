"""The simulated hosts together: started, cycled side by side, stopped and joined mid-cycle.

Each cycle runs every live host's cycle in a thread of its own and waits for all of them (the
heartbeats go on meanwhile), so cycle ``k`` is one window of time for every host. A host that stops
in a cycle is out of the next; one that joins mid-cycle starts once the first live host has run
half its share, and is in every cycle after.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor

from bench._common import progress
from bench.hosts.host import CycleStats, Run, SimHost
from dreamer.state import StateStore

__all__ = ["Cluster"]

#: How long a joining host waits for the others to be halfway through their cycle.
JOIN_WAIT_S = 600.0


class Cluster:
    """The hosts, the cycles they ran and the phase of each cycle."""

    def __init__(
        self, open_store: Callable[[], StateStore], *, own_beat_store: bool, ttl_s: float, seed: int = 0
    ) -> None:
        self.open_store = open_store
        self.own_beat_store = own_beat_store
        self.ttl_s = ttl_s
        self.seed = seed
        self.live: list[SimHost] = []
        self.every: list[SimHost] = []
        self.stats: list[CycleStats] = []
        self.phase: dict[int, str] = {}
        self.span: dict[int, tuple[float, float]] = {}
        self.next_cycle = 0

    def host(self, label: str) -> SimHost:
        """A new host (a new seat: a new owner id), its store open, not yet beating."""
        host = SimHost(label, self.ttl_s, self.open_store, own_beat_store=self.own_beat_store)
        self.every.append(host)
        return host

    def add(self, label: str) -> SimHost:
        host = self.host(label)
        host.start()
        self.live.append(host)
        return host

    def agree(self, timeout_s: float) -> float:
        """Seconds until every live host's last heartbeat saw exactly the live hosts."""
        started = time.monotonic()
        owners = sorted(h.owner for h in self.live)
        while any(sorted(h.seat.hosts) != owners for h in self.live):
            if time.monotonic() - started > timeout_s:
                raise TimeoutError(f"the hosts did not agree on who is alive within {timeout_s:g} s")
            time.sleep(0.01)
        return time.monotonic() - started

    def runs(self, cycles: Sequence[int] | None = None) -> list[Run]:
        wanted = None if cycles is None else set(cycles)
        return [r for s in self.stats if wanted is None or s.cycle in wanted for r in s.runs]

    def cycles_of(self, phase: str) -> list[int]:
        return [k for k, p in self.phase.items() if p == phase]

    def cycle(
        self,
        phase: str,
        profiles: Sequence[str],
        bank_of: Callable[[str], str],
        *,
        stopping: SimHost | None = None,
        how: str = "",
        joining: SimHost | None = None,
        work_s: float = 0.0,
    ) -> list[CycleStats]:
        """One cycle of every live host over ``profiles``; ``stopping`` stops (``how``: "kill" or
        "leave") halfway through its share, ``joining`` starts when the first host is halfway; each
        run holds its leases ``work_s`` seconds."""
        k = self.next_cycle
        self.next_cycle += 1
        self.phase[k] = phase
        half = int(len(profiles) / len(self.live) / 2)
        halfway = threading.Event()
        trigger = next(h for h in self.live if h is not stopping)
        started = time.monotonic()
        with ThreadPoolExecutor(len(self.live) + 1, thread_name_prefix=f"cycle {k}") as pool:
            futures: list[Future[CycleStats]] = []
            for h in self.live:
                futures.append(
                    pool.submit(
                        h.cycle, k, profiles, bank_of, seed=self.seed,
                        stop=how if h is stopping else "", stop_after=half,
                        halfway=halfway if h is trigger else None, half=half, work_s=work_s,
                    )
                )
            if joining is not None:
                futures.append(pool.submit(self._join, joining, halfway, k, profiles, bank_of))
            done = [f.result() for f in futures]
        self.span[k] = (started, time.monotonic())
        self.stats.extend(done)
        progress(
            f"bench.hosts: cycle {k} ({phase}): {sum(s.ran for s in done)} runs by {len(done)} hosts "
            f"in {self.span[k][1] - started:.1f} s"
        )
        if stopping is not None:
            self.live.remove(stopping)
        if joining is not None:
            self.live.append(joining)
        return done

    def _join(
        self, host: SimHost, halfway: threading.Event, k: int, profiles: Sequence[str],
        bank_of: Callable[[str], str],
    ) -> CycleStats:
        halfway.wait(JOIN_WAIT_S)
        host.start()
        return host.cycle(k, profiles, bank_of, seed=self.seed)

    def close(self) -> None:
        """Every host's heartbeat stopped and its stores closed (its row and leases left as they
        are: the database is thrown away next)."""
        for host in self.every:
            host.close()
