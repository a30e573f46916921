"""Sidecar locks and atomic replacement for the files in an agent's memories directory.

Same protocol as Hermes: the exclusive `fcntl.flock` is taken on a separate `<file>.lock` (for
example `MEMORY.md.lock`), never on the data file itself, because the data file is replaced by a
rename and a lock on the old inode would protect nothing. Every writer that follows the protocol
(Hermes sessions, this package) is therefore serialised, and readers always see either the old or
the new complete file.

Files Dreamer writes in an agent's folders (lock files, the ledger, the audit state, the rules
skill) are never reached through a symbolic link: a link planted in their place would make a write
land outside the folder, so it is refused with `SymlinkRefusedError`.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

from dreamer.errors import MemoryFileError

__all__ = [
    "TEMP_PATTERN",
    "SymlinkRefusedError",
    "atomic_write_text",
    "exclusive_lock",
    "lock_path_for",
    "open_no_follow",
    "refuse_symlink",
]

#: The temporary files of `atomic_write_text` (Hermes' own writer names them the same way).
TEMP_PREFIX, TEMP_SUFFIX = ".mem_", ".tmp"
TEMP_PATTERN = f"{TEMP_PREFIX}*{TEMP_SUFFIX}"


class SymlinkRefusedError(MemoryFileError, OSError):
    """A file Dreamer would write is a symbolic link; remove the link (or move the real file there).
    Caught as an `OSError`: the audit reports ERROR, the store refuses with `StoreWriteError`."""

    def __init__(self, path: Path) -> None:
        super().__init__(
            errno.ELOOP,
            f"refusing to write {path}: it is a symbolic link, and Dreamer does not follow links in an "
            f"agent's folders; remove the link and retry",
        )
        self.filename = str(path)

    def __str__(self) -> str:
        return str(self.strerror)


def refuse_symlink(path: Path) -> None:
    """Raise `SymlinkRefusedError` if `path` is a symbolic link (a missing path is fine)."""
    if path.is_symlink():
        raise SymlinkRefusedError(path)


def open_no_follow(path: Path, flags: int, mode: int = 0o666) -> int:
    """`os.open` that refuses a symbolic link at `path` (O_NOFOLLOW) instead of writing through it."""
    try:
        return os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    except OSError as exc:
        if exc.errno == errno.ELOOP and path.is_symlink():
            raise SymlinkRefusedError(path) from None
        raise


def lock_path_for(path: Path) -> Path:
    """The sidecar lock file guarding `path` (`MEMORY.md` → `MEMORY.md.lock`)."""
    return path.with_suffix(path.suffix + ".lock")


@contextlib.contextmanager
def exclusive_lock(path: Path) -> Iterator[None]:
    """Hold the exclusive sidecar lock of `path`, waiting for as long as another holder keeps it.

    A symbolic link in place of the lock file is refused (`SymlinkRefusedError`), never followed.
    """
    fd = open_no_follow(lock_path_for(path), os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def atomic_write_text(path: Path, text: str, *, refuse_link: bool = False) -> None:
    """Replace `path` with `text` via a synced temporary file in the same directory and a rename.

    The temporary file is created exclusively (never through a link) and the rename replaces a link
    at `path` rather than writing through it; `refuse_link` refuses such a link instead.
    """
    if refuse_link:
        refuse_symlink(path)
    try:
        mode: int | None = stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        mode = None
    fd, tmp_name = tempfile.mkstemp(dir=path.parent, prefix=TEMP_PREFIX, suffix=TEMP_SUFFIX)
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
