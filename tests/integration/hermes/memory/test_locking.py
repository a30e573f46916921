"""Other processes writing the same memory files: the sidecar flock serialises them, nothing is lost."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from dreamer.hermes.audit.report import AuditReport, AuditStatus
from dreamer.hermes.audit.run import audit_agent
from dreamer.hermes.audit.settings import AgentFiles, AuditSettings
from dreamer.hermes.memory.entries import Target
from dreamer.hermes.memory.store import MemoryStore

REPO_ROOT = Path(__file__).resolve().parents[4]
NOW = datetime(2025, 3, 1, tzinfo=UTC)
CANARY = "CANARY: Do not modify this line"
# A safety net against a hung test, not a performance expectation.
HANG_GUARD_S = 60.0

# A second process that holds MEMORY.md.lock the way Hermes does, and on request writes a new entry
# (temp file + rename, like Hermes) before releasing the lock.
HOLDER = r"""
import fcntl, os, sys, tempfile
lock_path, memory_path, fresh = sys.argv[1:4]
with open(lock_path, "a+", encoding="utf-8") as lock:
    fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
    print("locked", flush=True)
    sys.stdin.readline()
    with open(memory_path, encoding="utf-8") as handle:
        raw = handle.read()
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(memory_path))
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(raw + "\n§\n" + fresh)
    os.replace(tmp, memory_path)
    fcntl.flock(lock.fileno(), fcntl.LOCK_UN)
print("released", flush=True)
"""

ADDER = r"""
import sys
from pathlib import Path
from dreamer.hermes.memory.entries import Target
from dreamer.hermes.memory.store import MemoryStore
store = MemoryStore(Path(sys.argv[1]), memory_char_limit=100_000)
for index in range(int(sys.argv[3])):
    store.add(Target.MEMORY, f"{sys.argv[2]} entry {index}")
"""


def child_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT), env.get("PYTHONPATH", "")])
    return env


def wait_for_lock_waiter(lock_path: Path) -> None:
    """Return once /proc/locks shows a process blocked on the flock of `lock_path`."""
    inode = lock_path.stat().st_ino
    waiter = re.compile(rf"->\s+FLOCK\s+\S+\s+WRITE\s+\d+\s+[0-9a-f]+:[0-9a-f]+:{inode}\s")
    deadline = time.monotonic() + HANG_GUARD_S
    while time.monotonic() < deadline:
        if waiter.search(Path("/proc/locks").read_text()):
            return
        time.sleep(0.01)
    pytest.fail(f"nobody started waiting for {lock_path}")


@pytest.mark.skipif(not Path("/proc/locks").exists(), reason="needs /proc/locks to see a blocked flock")
class TestAuditWaitsForTheLock:
    """An audit that meets a held MEMORY.md.lock waits, then edits the file as the holder left it."""

    def test_audit_waits_then_applies_on_fresh_content(self, tmp_path: Path) -> None:
        """The holder's entry, written while the audit waited, survives; the audit's deletion lands."""
        memories = tmp_path / "memories"
        memories.mkdir()
        (memories / "MEMORY.md").write_text(
            "\n§\n".join([CANARY, "Session note: this session was long.", "The project uses Rust."]),
            encoding="utf-8",
        )
        (memories / "USER.md").write_text(CANARY, encoding="utf-8")
        (memories / "MEMORY_WRITERS.md").write_text("- dreamer\n", encoding="utf-8")
        agent = AgentFiles("mumuni", memories)
        lock_path = memories / "MEMORY.md.lock"
        fresh = "Written by a Hermes session while the audit waited."

        holder = subprocess.Popen(
            [sys.executable, "-c", HOLDER, str(lock_path), str(agent.memory_path), fresh],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert holder.stdout is not None and holder.stdin is not None
            assert holder.stdout.readline().strip() == "locked"
            reports: list[AuditReport] = []
            auditor = threading.Thread(
                target=lambda: reports.append(audit_agent(agent, AuditSettings(), NOW))
            )
            auditor.start()
            wait_for_lock_waiter(lock_path)
            assert not reports  # blocked on the lock, so nothing has been applied yet
            holder.stdin.write("go\n")
            holder.stdin.flush()
            auditor.join(HANG_GUARD_S)
            assert holder.wait(HANG_GUARD_S) == 0
        finally:
            if holder.poll() is None:
                holder.kill()
                holder.wait()

        (report,) = reports
        assert report.status is AuditStatus.COMPLETE
        assert report.counts["deletions"] == 1
        assert MemoryStore(memories).list(Target.MEMORY) == (CANARY, "The project uses Rust.", fresh)


class TestConcurrentStoreWriters:
    """Two processes adding through the store at the same time lose nothing."""

    def test_no_lost_updates(self, tmp_path: Path) -> None:
        """Every add of both processes is in the file afterwards."""
        count = 25
        procs = [
            subprocess.Popen([sys.executable, "-c", ADDER, str(tmp_path), name, str(count)], env=child_env())
            for name in ("left", "right")
        ]
        assert [proc.wait(HANG_GUARD_S) for proc in procs] == [0, 0]
        entries = MemoryStore(tmp_path, memory_char_limit=100_000).list(Target.MEMORY)
        assert sorted(entries) == sorted(
            f"{name} entry {i}" for name in ("left", "right") for i in range(count)
        )
