"""The shared activity snapshot: one backend call serves every profile job of a cycle."""

from __future__ import annotations

from collections.abc import Sequence

from dreamer.backends.base import BankActivity
from dreamer.rollup.activity import ActivityCache


class CountingBackend:
    """Answers ``activity`` only, counting the calls (the cache uses nothing else)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, ...]] = []

    async def activity(self, bank_ids: Sequence[str]) -> dict[str, BankActivity]:
        self.calls.append(tuple(bank_ids))
        return {b: BankActivity(b, len(self.calls), None) for b in bank_ids}


class TestActivityCache:
    async def test_one_call_serves_every_bank_within_the_ttl(self) -> None:
        """Three profile jobs in one cycle cost one activity call covering all their banks."""
        now = [0.0]
        cache = ActivityCache(60, clock=lambda: now[0])
        backend = CountingBackend()
        banks = ["a", "b", "c"]
        for bank in banks:
            act = await cache.get(backend, banks, bank)  # type: ignore[arg-type]
            assert act is not None and act.bank_id == bank
        assert backend.calls == [("a", "b", "c")] and cache.fetches == 1

    async def test_a_stale_snapshot_or_an_unknown_bank_is_fetched_again(self) -> None:
        """After the TTL, or for a bank outside the snapshot, the cache asks the backend again."""
        now = [0.0]
        cache = ActivityCache(60, clock=lambda: now[0])
        backend = CountingBackend()
        await cache.get(backend, ["a"], "a")  # type: ignore[arg-type]
        now[0] = 61.0
        second = await cache.get(backend, ["a"], "a")  # type: ignore[arg-type]
        assert second is not None and second.unit_count == 2
        await cache.get(backend, ["a"], "z")  # type: ignore[arg-type]
        assert cache.fetches == 3 and backend.calls[-1] == ("a", "z")
