"""A real small file system for disk-full and read-only tests: a tmpfs of a given size mounted on a
temporary directory, which a test can fill to the last few bytes or remount read-only.

Why a real one: SQLite reports a full disk in two ways ("database or disk is full" when a write
comes up short, "disk I/O error" when it fails outright), and which one depends on where the write
falls; a per-connection ``max_page_count`` only imitates the first. Mounting needs the right to
mount (root in a container that allows it); without it the tests that need one are skipped with
that reason.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


@contextlib.contextmanager
def small_fs(where: Path, size_kib: int = 1024) -> Iterator[Path]:
    """A tmpfs of ``size_kib`` mounted on ``where`` (created), unmounted afterwards."""
    where.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size_kib}k,mode=0755", "tmpfs", str(where)],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({proc.stderr.strip() or proc.returncode}): needs root")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True)


def fill(where: Path, leave_bytes: int = 0) -> None:
    """Fill the file system of ``where`` until ``leave_bytes`` (or fewer) are free."""
    stats = os.statvfs(where)
    free = stats.f_bavail * stats.f_frsize
    with contextlib.suppress(OSError), open(where / "filler", "wb") as handle:
        handle.write(b"\0" * max(0, free - leave_bytes))


def remount_read_only(where: Path) -> None:
    subprocess.run(["mount", "-o", "remount,ro", str(where)], check=True, capture_output=True)
