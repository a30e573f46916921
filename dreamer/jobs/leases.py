"""Profiles shared out among hosts that share one PostgreSQL state: which host runs a profile, the
leases a run holds, and the heartbeat that keeps a host in the list. Why: docs/design/leases.md.

- **Which host**: every live host (a current heartbeat row) ranks the hosts for a profile by a hash
  of (host, profile) and the first runs it (rendezvous hashing, :func:`preferred_host`). No
  coordinator, no fixed assignment: a host that joins takes about 1/n of the profiles, one that
  dies gives its own to the others, each to one of them.
- **Leases**: a run holds its profile's lease and its upstream bank's (the promotion lock of one
  host made a lease) for as long as it runs, renewed by a heartbeat every third of
  ``[state] lease_ttl_s``, and gives them back at its end. Its commit checks their fencing tokens
  (:meth:`dreamer.state.StateStore.commit_rollup`), so a host that lost one cannot commit.
- **Heartbeat**: a host's row (and the leases it holds) renewed on that same beat; a host whose
  row is older than ``lease_ttl_s`` is dead to the others.

With the SQLite state there is one host: nothing here is used (the run locks are flocks).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import secrets
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence

import anyio

from dreamer.config import Config
from dreamer.errors import DreamerError, RunBusyError
from dreamer.jobs.locks import RUN_LOCK_WAIT_S
from dreamer.log import get_logger
from dreamer.state import Lease, StateStore

__all__ = [
    "PROFILE_LEASE",
    "UPSTREAM_LEASE",
    "HostSeat",
    "preferred_host",
    "runs_here",
    "seat_for",
    "start_hosting",
]

log = get_logger("dreamer.jobs")

#: The name of a profile's lease is this plus the profile; an upstream bank's, the other plus its id.
PROFILE_LEASE = "profile:"
UPSTREAM_LEASE = "upstream:"


def preferred_host(profile: str, hosts: Sequence[str]) -> str | None:
    """The host that runs ``profile`` among ``hosts`` (None when there are none): the one whose
    hash with the profile is highest, so each host's share is even and a host that comes or goes
    moves only the profiles it gains or held."""
    if not hosts:
        return None
    return max(hosts, key=lambda host: hashlib.sha256(f"{host}\0{profile}".encode()).digest())


class HostSeat:
    """This process's place among the hosts: its owner id (``<host id>#<random>``, new at every
    start, so a restarted daemon never inherits the tokens of the one before), the hosts alive at
    its last heartbeat, and the leases its runs hold."""

    def __init__(self, label: str, ttl_s: float) -> None:
        self.label = label
        self.owner = f"{label}#{secrets.token_hex(4)}"
        self.ttl_s = ttl_s
        #: The hosts alive at the last heartbeat, this one included once it has beaten.
        self.hosts: tuple[str, ...] = ()
        # One run per lease name at a time within this process: a lease is this owner's whoever of
        # its runs took it, so two runs into one upstream bank must not both hold it (the first to
        # end would give it back under the other).
        self._held: dict[str, asyncio.Lock] = {}

    def beat(self, store: StateStore) -> list[Lease]:
        """One heartbeat: this host's row and its leases renewed, the live hosts read again."""
        kept = store.heartbeat(self.owner, self.label, self.ttl_s)
        self.hosts = tuple(h.owner for h in store.live_hosts())
        return kept

    async def keep_alive(self, store: StateStore) -> None:
        """Beat every third of the lease time until cancelled, the first a third from now; a beat
        that fails is a warning (the next one tries again; past the expiry the other hosts take
        this one's runs over)."""
        while True:
            await asyncio.sleep(self.ttl_s / 3)
            try:
                await anyio.to_thread.run_sync(self.beat, store)
            except DreamerError as exc:
                log.warning("heartbeat failed; leases expire unless the next one succeeds", error=str(exc))

    def runs_here(self, profile: str) -> bool:
        """Whether this host is the one to run ``profile``, by the hosts of its last heartbeat
        (True before the first: a run then takes the lease, which decides)."""
        if not self.hosts:
            return True
        hosts = self.hosts if self.owner in self.hosts else (*self.hosts, self.owner)
        return preferred_host(profile, hosts) == self.owner

    @contextlib.asynccontextmanager
    async def holding(
        self, store: StateStore, profile: str, upstream_bank: str
    ) -> AsyncIterator[list[Lease]]:
        """Hold the profile's lease and the upstream bank's for the block, renewed meanwhile, and
        fence the store's commits with them; give both back at the end. The profile's is refused
        at once when another host holds it (:class:`RunBusyError`); the bank's is waited for
        ``RUN_LOCK_WAIT_S``, as the run lock it replaces."""
        name, bank = PROFILE_LEASE + profile, UPSTREAM_LEASE + upstream_bank
        async with contextlib.AsyncExitStack() as stack:
            await stack.enter_async_context(self._in_process(name, f"profile {profile!r}", 0.0))
            mine = await anyio.to_thread.run_sync(store.take_lease, name, self.owner, self.ttl_s)
            if mine is None:
                raise RunBusyError(_held(store, name, f"profile {profile!r}"))
            # Each given back before its turn in this process ends: given back after, it would expire
            # under the next run of this host that took it meanwhile.
            stack.push_async_callback(self._release, store, mine)
            what = f"the upstream bank {upstream_bank!r}"
            deadline = time.monotonic() + RUN_LOCK_WAIT_S
            await stack.enter_async_context(self._in_process(bank, what, RUN_LOCK_WAIT_S))
            theirs = await self._wait_for(store, bank, what, deadline)
            stack.push_async_callback(self._release, store, theirs)
            leases = [mine, theirs]
            renewing = asyncio.create_task(self._renew(store), name=f"leases {profile}")
            stack.callback(renewing.cancel)
            with store.fenced(leases):
                yield leases

    @contextlib.asynccontextmanager
    async def _in_process(self, name: str, what: str, wait_s: float) -> AsyncIterator[None]:
        """The lease name's turn among this process's runs: waited for ``wait_s``, then busy."""
        lock = self._held.setdefault(name, asyncio.Lock())
        deadline = time.monotonic() + wait_s
        while lock.locked():
            if time.monotonic() >= deadline:
                raise RunBusyError(
                    f"{what} is being rolled up by another run of this host; this run is skipped and "
                    "the next cycle runs it"
                )
            await asyncio.sleep(0.05)
        await lock.acquire()  # free: taken at once, with no other task between
        try:
            yield
        finally:
            lock.release()

    async def _release(self, store: StateStore, lease: Lease) -> None:
        with contextlib.suppress(DreamerError):
            await anyio.to_thread.run_sync(store.release_lease, lease.name, self.owner)

    async def _wait_for(self, store: StateStore, name: str, what: str, deadline: float) -> Lease:
        while True:
            lease = await anyio.to_thread.run_sync(store.take_lease, name, self.owner, self.ttl_s)
            if lease is not None:
                return lease
            if time.monotonic() >= deadline:
                raise RunBusyError(_held(store, name, what))
            await asyncio.sleep(0.1)

    async def _renew(self, store: StateStore) -> None:
        while True:
            await asyncio.sleep(self.ttl_s / 3)
            with contextlib.suppress(DreamerError):
                await anyio.to_thread.run_sync(self.beat, store)


def _held(store: StateStore, name: str, what: str) -> str:
    """Why a lease was refused: who holds it and for how long."""
    holder = next((h for h in store.holders(name) if h.name == name), None)
    by = "another host" if holder is None else f"{holder.owner} for {max(holder.left_s, 0):.0f} s more"
    return f"{what} is being rolled up by {by} (its lease); this run is skipped and the next cycle runs it"


_SEAT: HostSeat | None = None


def seat_for(config: Config) -> HostSeat | None:
    """This process's seat among the hosts when the state is on PostgreSQL (made at the first
    call, with ``[state] host_id`` or the host name and process id as its label); None on SQLite."""
    global _SEAT
    if config.state.backend != "postgres":
        return None
    if _SEAT is None or _SEAT.ttl_s != config.state.lease_ttl_s:
        label = config.state.host_id or f"{socket.gethostname()}:{os.getpid()}"
        _SEAT = HostSeat(label, config.state.lease_ttl_s)
    return _SEAT


def start_hosting(config: Config, store: object) -> Callable[[], Awaitable[None]] | None:
    """Start this process's heartbeat on the daemon's state store (PostgreSQL only) and return
    what stops it: the heartbeat cancelled, then this host's row removed and its leases expired,
    so the other hosts take its profiles at their next cycle. None when there is nothing to beat."""
    seat = seat_for(config)
    if seat is None or not isinstance(store, StateStore):
        return None
    try:  # the first beat before any run: the runs then know the hosts alive
        seat.beat(store)
    except DreamerError as exc:
        log.warning("heartbeat failed; leases expire unless the next one succeeds", error=str(exc))
    beating = asyncio.create_task(seat.keep_alive(store), name="heartbeat")

    async def stop() -> None:
        beating.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await beating
        try:
            await anyio.to_thread.run_sync(store.leave, seat.owner)
        except DreamerError as exc:
            log.warning("could not give back this host's leases; they expire on their own", error=str(exc))

    return stop


def runs_here(config: Config, kind: str, key: str) -> bool:
    """Whether the daemon of this host runs this job now: a roll-up only when this host is its
    profile's (:meth:`HostSeat.runs_here`); every job on a state of one host."""
    seat = seat_for(config)
    return seat is None or kind != "rollup" or seat.runs_here(key)
