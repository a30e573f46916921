"""Backoff: full jitter, Retry-After honoured and capped, slot released while sleeping."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

import pytest

from dreamer.errors import PermanentBackendError, TransientBackendError
from dreamer.retry import (
    RetriesExhausted,
    RetryPolicy,
    RetryStats,
    backoff_delay,
    call_with_retry,
    redirect_origin,
)
from dreamer.slot import SlotLock


class TestBackoffDelay:
    def test_retry_after_wins_over_jitter(self) -> None:
        """A server's Retry-After is used as the delay, not the exponential schedule."""
        policy = RetryPolicy(base_delay_s=2, max_delay_s=100, retry_after_cap_s=60)
        assert backoff_delay(policy, 1, 15.0, lambda: 0.0) == 15.0

    def test_retry_after_is_capped(self) -> None:
        """A huge Retry-After is capped at retry_after_cap_s."""
        policy = RetryPolicy(retry_after_cap_s=30)
        assert backoff_delay(policy, 1, 3600.0, lambda: 0.5) == 30

    def test_full_jitter_grows_exponentially_to_the_cap(self) -> None:
        """Without Retry-After the ceiling doubles per attempt up to max_delay_s."""
        policy = RetryPolicy(base_delay_s=2, max_delay_s=10)
        assert [backoff_delay(policy, n, None, lambda: 1.0) for n in (1, 2, 3, 4)] == [2, 4, 8, 10]
        assert backoff_delay(policy, 3, None, lambda: 0.25) == 2.0


class TestCallWithRetry:
    async def test_transient_errors_are_retried_until_success(self) -> None:
        """Two 503s then success: three attempts, two sleeps of the Retry-After."""
        calls: list[int] = []
        slept: list[float] = []

        async def flaky() -> str:
            calls.append(1)
            if len(calls) < 3:
                raise TransientBackendError("busy", status=503, retry_after=1.5)
            return "ok"

        async def sleep(d: float) -> None:
            slept.append(d)

        stats = RetryStats()
        out = await call_with_retry("reflect", flaky, RetryPolicy(max_attempts=5), stats=stats, sleep=sleep)
        assert out == "ok" and len(calls) == 3 and slept == [1.5, 1.5]
        assert stats.attempts == {"reflect": 3}

    async def test_gives_up_after_max_attempts(self) -> None:
        """A permanent 503 storm ends in RetriesExhausted after exactly max_attempts calls."""
        calls: list[int] = []

        async def always() -> None:
            calls.append(1)
            raise TransientBackendError("loading", status=503, retry_after=15)

        async def sleep(d: float) -> None:
            return None

        with pytest.raises(RetriesExhausted) as info:
            await call_with_retry("reflect", always, RetryPolicy(max_attempts=3), sleep=sleep)
        assert len(calls) == 3 and info.value.attempts == 3

    async def test_permanent_errors_are_not_retried(self) -> None:
        """A 401 is raised at once."""
        calls: list[int] = []

        async def denied() -> None:
            calls.append(1)
            raise PermanentBackendError("no", status=401)

        with pytest.raises(PermanentBackendError):
            await call_with_retry("recall", denied, RetryPolicy(max_attempts=5))
        assert len(calls) == 1

    async def test_slot_is_free_while_sleeping_and_held_again_after(self, tmp_path: Path) -> None:
        """During the backoff sleep another process could take the slot; afterwards we hold it."""
        lock_path = tmp_path / "slot.lock"
        slot = SlotLock(lock_path, acquire_timeout_s=5, poll_interval_s=0.01)
        await slot.acquire()
        free_during_sleep: list[bool] = []

        async def sleep(d: float) -> None:
            fd = os.open(lock_path, os.O_RDWR)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                free_during_sleep.append(True)
                fcntl.flock(fd, fcntl.LOCK_UN)
            except BlockingIOError:
                free_during_sleep.append(False)
            finally:
                os.close(fd)

        attempts: list[int] = []

        async def once_busy() -> str:
            attempts.append(1)
            if len(attempts) == 1:
                raise TransientBackendError("busy", status=503, retry_after=0)
            return "done"

        assert await call_with_retry("reflect", once_busy, RetryPolicy(), slot=slot, sleep=sleep) == "done"
        assert free_during_sleep == [True]
        assert slot.held
        slot.release()


class TestRedirectOrigin:
    """A redirect's target is told by scheme, host and port only: never its path, query or user."""

    @pytest.mark.parametrize(
        ("location", "shown"),
        [
            ("https://login.example/cb?token=Bearer%20sk-1", "https://login.example"),
            ("http://user:sk-1@10.0.0.5:8443/a/sk-1", "http://10.0.0.5:8443"),
            ("/v1/again?key=sk-1", "another path on the same server"),
            ("", "an address it did not name"),
            (None, "an address it did not name"),
            ("http://[::1", "an address that does not parse"),
            ("javascript://evil.example/x", "?://evil.example"),
        ],
    )
    def test_shown(self, location: str | None, shown: str) -> None:
        assert redirect_origin(location, lambda text: text) == shown

    def test_the_host_is_redacted_too(self) -> None:
        assert redirect_origin("https://sk-secret.example/", lambda t: t.replace("sk-secret", "***")) == (
            "https://***.example"
        )
