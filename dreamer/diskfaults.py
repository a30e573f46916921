"""SQLite errors that come from the file system a database lives on, not from the database: a
full disk, a read-only directory. Both files Dreamer keeps (the state file, the embedded store) tell
them apart from damage with :func:`space_fault`, so a healthy file is never called damaged and its
user is never told to move it aside.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

__all__ = ["LOW_SPACE_BYTES", "space_fault"]

#: Free space below which a failed write is put down to a full file system, not to the file.
LOW_SPACE_BYTES = 1 << 20


def space_fault(path: Path | str, exc: sqlite3.Error, what: str = "the state file") -> str:
    """What to say when an SQLite error on ``path`` comes from its file system rather than from the
    file (a full disk, a read-only directory), else "". SQLite reports a full disk as "database or
    disk is full" or, where a write fails outright, as "disk I/O error": the free space tells."""
    text = str(exc)
    where = Path(path).parent
    try:
        stats = os.statvfs(where)
        free = stats.f_bavail * stats.f_frsize
    except OSError:
        free = None
    low = free is not None and free < LOW_SPACE_BYTES
    if "is full" in text or ("I/O error" in text and low):
        shown = f", {free:,} bytes free" if free is not None else ""
        return (
            f"cannot write {what}: the file system holding {where} is full ({text}{shown}); "
            "free space there, then run again (the file itself is not damaged)"
        )
    if "readonly" in text or ("unable to open" in text and not os.access(where, os.W_OK)):
        return (
            f"cannot write {what}: {where} is read-only or not writable by this user ({text}); "
            "make it writable, or set state_dir to a directory that is"
        )
    return ""
