"""The accelerator-slot lock, shared with graph extraction and any other LLM job on the host.

An exclusive ``fcntl.flock`` on a file, so ``flock /path/to/slot.lock CMD`` serialises with Dreamer
without code changes. The file is never deleted: with unlink-on-release two processes can both
believe they hold "the" lock. Acquisition polls ``LOCK_EX | LOCK_NB`` so it can time out and be
cancelled (a blocking ``flock`` in a worker thread cannot be).
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio

from dreamer.errors import SlotBusyError


class SlotLock:
    """An exclusive, non-reentrant flock on ``path``; ``waited_s``/``held_s`` add up across uses."""

    def __init__(self, path: Path, *, acquire_timeout_s: float, poll_interval_s: float = 0.25) -> None:
        self.path = path
        self.acquire_timeout_s = acquire_timeout_s
        self.poll_interval_s = poll_interval_s
        self._fd: int | None = None
        self._held_since = 0.0
        self.waited_s = 0.0
        self.held_s = 0.0
        self.acquisitions = 0

    @property
    def held(self) -> bool:
        return self._fd is not None

    def _try_lock(self) -> bool:
        assert self._fd is not None
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True

    async def acquire(self) -> None:
        """Take the lock, polling until ``acquire_timeout_s``; raises :class:`SlotBusyError`."""
        if self._fd is not None:
            raise RuntimeError("slot lock is already held by this holder")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o660)
        self._fd = fd
        start = time.monotonic()
        try:
            while not self._try_lock():
                if time.monotonic() - start >= self.acquire_timeout_s:
                    raise SlotBusyError(
                        f"slot lock {self.path} still held by another process after "
                        f"{self.acquire_timeout_s:g}s (slot.acquire_timeout_s)"
                    )
                await anyio.sleep(self.poll_interval_s)
        except BaseException:
            self._fd = None
            os.close(fd)
            self.waited_s += time.monotonic() - start
            raise
        self.waited_s += time.monotonic() - start
        self._held_since = time.monotonic()
        self.acquisitions += 1

    def release(self) -> None:
        """Release the lock (closing the descriptor drops it); the file stays."""
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        self.held_s += time.monotonic() - self._held_since
        try:
            fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)

    @asynccontextmanager
    async def hold(self) -> AsyncIterator[SlotLock]:
        """``async with slot.hold(): ...`` — acquire, run the block, always release."""
        await self.acquire()
        try:
            yield self
        finally:
            self.release()
