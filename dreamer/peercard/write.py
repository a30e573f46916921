"""Writing a peer card file atomically: a reader sees the previous complete file or the new one."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

__all__ = ["write_peer_card"]


def write_peer_card(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` atomically (mode 0600); refuses empty text.

    The text goes to a temporary file in the same directory, is flushed to disk, then renamed over
    the target, so a reader sees either the previous complete file or the new one.
    """
    if not text.strip():
        raise ValueError(f"refusing to write an empty peer card to {path}: a card is never written empty")
    path = Path(path)
    directory = path.parent
    directory.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(dir=directory, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            os.fchmod(handle.fileno(), 0o600)
            handle.write(text.encode("utf-8"))
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp_name, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp_name)
        raise
    _fsync_directory(directory)


def _fsync_directory(directory: Path) -> None:
    # Makes the rename itself durable; not every platform or file system allows it, which is fine.
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
