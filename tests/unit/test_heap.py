"""dreamer.heap: freed memory goes back to the system where glibc can be asked to."""

from __future__ import annotations

import subprocess
import sys

import pytest

from dreamer import heap

PROBE = """
import sys
from dreamer.heap import give_back_memory

def rss():
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith("VmRSS"))

# Many small blocks (below the mmap threshold, so they live in the heap), then all but the last
# freed: the heap cannot shrink past the one still held, and only a trim returns the pages.
blocks = [bytearray(4000) for _ in range(40_000)]
keep = blocks[-1]
del blocks
before = rss()
ran = give_back_memory()
print(ran, before, rss())
"""


def test_a_trim_hands_freed_heap_pages_back() -> None:
    """In a fresh process, 150 MiB of small blocks freed behind one still held stay in RSS until
    the trim; after it RSS is at least 100 MiB lower (Linux with glibc, the daemon's platform)."""
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True)
    ran, before, after = done.stdout.split()
    if ran != "True":  # pragma: no cover - a libc without malloc_trim
        return
    assert int(before) - int(after) > 100 * 1024, (before, after)


def test_without_the_call_it_does_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the C library has no malloc_trim, the call is a no-op that says so."""
    monkeypatch.setattr(heap, "_trim", lambda: None)
    assert heap.give_back_memory() is False
