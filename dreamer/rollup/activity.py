"""One activity snapshot per cycle for every profile, however many jobs ask for it.

Each profile has its own scheduled job (with jitter), but the activity of all their banks comes
from one backend call: the first job of a cycle fetches it for every enabled profile's bank, the
others of the same cycle reuse it while it is younger than ``ttl_s``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import anyio

from dreamer.backends.base import BankActivity, MemoryBackend


class ActivityCache:
    """A shared, short-lived snapshot of bank activity; ``fetches`` counts backend calls."""

    def __init__(self, ttl_s: float, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl_s = ttl_s
        self.clock = clock
        self.fetches = 0
        self._lock = anyio.Lock()
        self._banks: tuple[str, ...] = ()
        self._at = float("-inf")
        self._data: dict[str, BankActivity] = {}

    async def get(
        self, backend: MemoryBackend, all_bank_ids: Sequence[str], bank_id: str
    ) -> BankActivity | None:
        """The activity of ``bank_id``, from a snapshot of ``all_bank_ids`` at most ``ttl_s`` old."""
        wanted = tuple(sorted(set(all_bank_ids) | {bank_id}))
        async with self._lock:
            stale = self.clock() - self._at > self.ttl_s
            if stale or not set(wanted) <= set(self._banks):
                self._data = await backend.activity(list(wanted))
                self._banks = wanted
                self._at = self.clock()
                self.fetches += 1
            return self._data.get(bank_id)
