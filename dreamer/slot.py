"""File locks: the accelerator-slot lock, shared with graph extraction and any other LLM job on the
host, and the per-profile run lock in the state directory.

An exclusive ``fcntl.flock`` on a file, so ``flock /path/to/slot.lock CMD`` serialises with Dreamer
without code changes. The file is never deleted: with unlink-on-release two processes can both
believe they hold "the" lock. Acquisition polls ``LOCK_EX | LOCK_NB`` so it can time out and be
cancelled (a blocking ``flock`` in a worker thread cannot be).
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Protocol

import anyio

from dreamer.errors import DreamerError, LockFileError, SlotBusyError

BusyError = Callable[[Path, float], DreamerError]


def _slot_busy(path: Path, timeout_s: float) -> DreamerError:
    return SlotBusyError(
        f"slot lock {path} still held by another process after {timeout_s:g}s (slot.acquire_timeout_s)"
    )


class SlotSettings(Protocol):
    """What the accelerator-slot lock is built from (``[slot]``, :class:`dreamer.config.SlotConfig`)."""

    @property
    def lock_path(self) -> Path: ...

    @property
    def acquire_timeout_s(self) -> float: ...

    @property
    def poll_interval_s(self) -> float: ...


class SlotLock:
    """An exclusive, non-reentrant flock on ``path``; ``waited_s``/``held_s`` add up across uses.

    ``busy`` builds the error raised when the lock stays taken; ``follow_symlinks=False`` refuses a
    lock file that is a symbolic link (for files in Dreamer's own directories).
    """

    def __init__(
        self,
        path: Path,
        *,
        acquire_timeout_s: float,
        poll_interval_s: float = 0.25,
        busy: BusyError = _slot_busy,
        follow_symlinks: bool = True,
    ) -> None:
        self.path = path
        self.acquire_timeout_s = acquire_timeout_s
        self.poll_interval_s = poll_interval_s
        self.busy = busy
        self.flags = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | (0 if follow_symlinks else os.O_NOFOLLOW)
        self._fd: int | None = None
        self._held_since = 0.0
        self.waited_s = 0.0
        self.held_s = 0.0
        self.acquisitions = 0

    @classmethod
    def from_config(cls, slot: SlotSettings) -> SlotLock:
        """The accelerator-slot lock ``[slot]`` configures: one per run or reflect, so its
        ``waited_s`` and ``held_s`` are that run's."""
        return cls(
            slot.lock_path, acquire_timeout_s=slot.acquire_timeout_s, poll_interval_s=slot.poll_interval_s
        )

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
        try:
            fd = os.open(self.path, self.flags, 0o660)
        except OSError as exc:
            link = " (it is a symbolic link, which is not followed here)" if self.path.is_symlink() else ""
            raise LockFileError(f"cannot open the lock file {self.path}{link}: {exc.strerror}") from None
        self._fd = fd
        start = time.monotonic()
        try:
            while not self._try_lock():
                if time.monotonic() - start >= self.acquire_timeout_s:
                    raise self.busy(self.path, self.acquire_timeout_s)
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
