"""Sidecar locks and atomic replacement for the files in an agent's memories directory.

Same protocol as Hermes: the exclusive `fcntl.flock` is taken on a separate `<file>.lock` (for
example `MEMORY.md.lock`), never on the data file itself, because the data file is replaced by a
rename and a lock on the old inode would protect nothing. Every writer that follows the protocol
(Hermes sessions, this package) is therefore serialised, and readers always see either the old or
the new complete file.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

__all__ = ["atomic_write_text", "exclusive_lock", "lock_path_for"]


def lock_path_for(path: Path) -> Path:
    """The sidecar lock file guarding `path` (`MEMORY.md` → `MEMORY.md.lock`)."""
    return path.with_suffix(path.suffix + ".lock")


@contextlib.contextmanager
def exclusive_lock(path: Path) -> Iterator[None]:
    """Hold the exclusive sidecar lock of `path`, waiting for as long as another holder keeps it."""
    with open(lock_path_for(path), "a+", encoding="utf-8") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def atomic_write_text(path: Path, text: str) -> None:
    """Replace `path` with `text` via a synced temporary file in the same directory and a rename."""
    try:
        mode: int | None = stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        mode = None
    fd, tmp_name = tempfile.mkstemp(dir=path.parent, prefix=".mem_", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        if mode is not None:
            # mkstemp creates 0600; keep whatever permissions the operator gave the file.
            os.chmod(tmp_name, mode)
        os.replace(tmp_name, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp_name)
        raise
