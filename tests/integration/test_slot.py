"""The slot lock interoperates with flock(1), times out, and never deletes its file."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from dreamer.errors import SlotBusyError
from dreamer.slot import SlotLock


def hold_with_flock(path: Path, seconds: float) -> subprocess.Popen[bytes]:
    """Start `flock PATH sleep N` and wait until it holds the lock."""
    proc = subprocess.Popen(["flock", str(path), "sleep", str(seconds)])
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        probe = subprocess.run(["flock", "-n", str(path), "true"], check=False)
        if probe.returncode != 0:
            return proc
        time.sleep(0.02)
    proc.kill()
    raise AssertionError("flock(1) never took the lock")


class TestSlotLock:
    async def test_times_out_while_flock_holds_it(self, tmp_path: Path) -> None:
        """While `flock(1)` holds the file, acquire gives up with SlotBusyError."""
        path = tmp_path / "slot.lock"
        path.touch()
        proc = hold_with_flock(path, 30)
        try:
            slot = SlotLock(path, acquire_timeout_s=0.3, poll_interval_s=0.05)
            with pytest.raises(SlotBusyError):
                await slot.acquire()
            assert not slot.held
        finally:
            proc.kill()
            proc.wait()

    async def test_waits_for_flock_then_excludes_it(self, tmp_path: Path) -> None:
        """Once flock(1) lets go we get the lock, and then flock -n cannot take it."""
        path = tmp_path / "slot.lock"
        path.touch()
        proc = hold_with_flock(path, 0.5)
        slot = SlotLock(path, acquire_timeout_s=30, poll_interval_s=0.05)
        async with slot.hold():
            assert subprocess.run(["flock", "-n", str(path), "true"], check=False).returncode != 0
        proc.wait()
        assert subprocess.run(["flock", "-n", str(path), "true"], check=False).returncode == 0
        assert path.exists(), "the lock file must never be deleted"
        assert slot.acquisitions == 1
