"""Reading and changing an agent's SOUL.md, block by block, never through a symbolic link.

A SOUL.md may be missing (Hermes then uses its built-in persona), unreadable, or a symbolic link
(often to the default profile's): each is read as far as it can be and reported, and only a regular
file is ever written. A write takes SOUL.md's sidecar lock, re-reads the file under it, changes one
block (appends a paragraph, or removes a block's exact lines) and replaces the file atomically; a
block that is no longer there is reported, never forced.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from dreamer.config.files import read_text_file
from dreamer.errors import AuditError
from dreamer.hermes.memory.locking import atomic_write_text, exclusive_lock, refuse_symlink

__all__ = ["SoulRead", "SoulWriteError", "append_to_soul", "modified_at", "read_soul", "remove_from_soul"]


class SoulWriteError(AuditError, OSError):
    """SOUL.md could not be changed; the message says why. The file is as it was. Catch it around a
    move into or out of SOUL.md, to skip that move (and take back its other half)."""


@dataclass(frozen=True)
class SoulRead:
    """SOUL.md as read: its text (None when missing or unreadable), time, and what stops writing it."""

    path: Path
    text: str | None
    modified: datetime | None
    problem: str = ""
    link_target: Path | None = None

    @property
    def writable(self) -> str:
        """Why moves into or out of this SOUL.md cannot be made ("" when they can)."""
        if self.problem:
            return self.problem
        if self.link_target is not None:
            return f"{self.path} is a symbolic link (to {self.link_target}); Dreamer never writes through one"
        return ""


def modified_at(path: Path | None) -> datetime | None:
    """The modification time of `path` (following links), None when it cannot be read."""
    if path is None:
        return None
    try:
        return datetime.fromtimestamp(path.stat().st_mtime, UTC)
    except OSError:
        return None


#: A SOUL.md larger than this is reported unreadable, not read (Hermes' own are a few kilobytes).
MAX_SOUL_BYTES = 10_000_000


def _read_text(path: Path) -> str:
    """SOUL.md's text: a regular file only (a FIFO would hang the audit, a link to /dev/zero would
    be read without end), at most MAX_SOUL_BYTES; OSError or UnicodeDecodeError otherwise."""
    return read_text_file(path, MAX_SOUL_BYTES)


def read_soul(path: Path) -> SoulRead:
    """SOUL.md at `path`, whatever state it is in."""
    link = Path(os.readlink(path)) if os.path.islink(path) else None
    try:
        text = _read_text(path)
    except FileNotFoundError:
        where = f" (a link to {link}, which does not exist)" if link is not None else ""
        problem = f"{path} does not exist{where}; Hermes uses its built-in persona"
        return SoulRead(path, None, None, problem, link)
    except (OSError, UnicodeDecodeError) as exc:
        return SoulRead(path, None, None, f"cannot read {path}: {exc}; fix its permissions or encoding", link)
    return SoulRead(path, text, modified_at(path), "", link)


def _locked_text(path: Path) -> str:
    refuse_symlink(path)
    try:
        return _read_text(path)
    except FileNotFoundError as exc:
        raise SoulWriteError(f"{path} disappeared since the audit read it") from exc


def append_to_soul(path: Path, text: str) -> bool:
    """Add `text` to SOUL.md as a paragraph; False when a block with this text is already there."""
    try:
        with exclusive_lock(path):
            current = _locked_text(path)
            if f"\n{text.strip()}\n" in f"\n{current}\n":
                return False
            body = current.rstrip("\n")
            atomic_write_text(path, (body + "\n\n" if body else "") + text.strip() + "\n", refuse_link=True)
    except (OSError, UnicodeDecodeError) as exc:
        raise SoulWriteError(f"cannot add to {path}: {exc}") from exc
    return True


def remove_from_soul(path: Path, raw_block: str) -> None:
    """Remove the block written as `raw_block` (its exact lines) from SOUL.md."""
    try:
        with exclusive_lock(path):
            current = _locked_text(path)
            lines = current.split("\n")
            block = raw_block.split("\n")
            for start in range(len(lines) - len(block) + 1):
                if lines[start : start + len(block)] == block:
                    break
            else:
                raise SoulWriteError(
                    f"the block is no longer in {path}; it was changed since the audit read it"
                )
            del lines[start : start + len(block)]
            # One blank line where the block was, not two.
            if 0 < start < len(lines) and not lines[start - 1].strip() and not lines[start].strip():
                del lines[start]
            atomic_write_text(path, "\n".join(lines), refuse_link=True)
    except SoulWriteError:
        raise
    except (OSError, UnicodeDecodeError) as exc:
        raise SoulWriteError(f"cannot change {path}: {exc}") from exc
