"""Temporary files a crashed writer left in an agent's memories directory, removed at the next audit.

A writer creates its `.mem_*.tmp` file only while it holds the sidecar lock of the file it replaces
and renames it away before letting go, so a temporary file found while holding those locks belongs
to a writer that died. Files younger than a minute stay anyway, in case a writer that ignores the
locks is still at work.
"""

from __future__ import annotations

import contextlib
import stat
import time
from collections.abc import Callable

import structlog

from dreamer.hermes.audit.settings import AgentFiles
from dreamer.hermes.memory.locking import TEMP_PATTERN, exclusive_lock

__all__ = ["STALE_AFTER_S", "remove_leftover_temp_files"]

STALE_AFTER_S = 60.0

log = structlog.get_logger("dreamer.hermes.audit")


def remove_leftover_temp_files(
    agent: AgentFiles, notes: list[str], *, clock: Callable[[], float] = time.time
) -> tuple[str, ...]:
    """Remove the stale temporary files of `agent`'s memories directory; the names removed.

    Holds the locks of MEMORY.md and USER.md meanwhile; the caller holds the audit state's lock, the
    third file written through such a temporary file. A file that cannot be removed adds a note.
    """
    removed: list[str] = []
    with exclusive_lock(agent.memory_path), exclusive_lock(agent.user_path):
        now = clock()
        for path in sorted(agent.memories_dir.glob(TEMP_PATTERN)):
            try:
                info = path.lstat()
                if not stat.S_ISREG(info.st_mode) or now - info.st_mtime < STALE_AFTER_S:
                    continue
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
                    removed.append(path.name)
            except FileNotFoundError:
                continue
            except OSError as exc:
                notes.append(f"leftover temporary file {path.name} not removed: {exc}")
                log.error("hermes_audit_temp_file_not_removed", agent=agent.name, error=str(exc))
    return tuple(removed)
