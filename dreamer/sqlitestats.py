"""SQLite's memory statistics, turned off for the process before its first connection.

SQLite counts every allocation in process-wide statistics (``SQLITE_CONFIG_MEMSTATUS``, on unless
the library was built without it), under one mutex that every connection of the process takes for
every allocation. FTS5's ranking allocates for each row it scores, so two full-text recalls on two
connections in two threads ran no faster than one after the other, and the ledger's probe in a
third thread was slowed by them (docs/benchmarks.md section 4). Dreamer reads none of what the
statistics feed (``sqlite3_memory_used``, ``sqlite3_status``, the heap limits), so the command line
turns them off as it starts (:func:`stop_memory_statistics`).

The setting can change only while SQLite is shut down, and SQLite may be shut down only with
nothing of it open. So it is done only when SQLite holds no memory at all (what the statistics
count while they are on) and once per process. When a step is not available (a platform whose
calling convention for ``sqlite3_config``'s variable arguments ctypes does not follow, a Python
whose ``_sqlite3`` module does not show the library's functions), the statistics stay on and the
reason is returned; nothing else changes. Dreamer works the same either way, only slower with two
connections reading at once.
"""

from __future__ import annotations

import ctypes
import sys
import threading

__all__ = ["SQLITE_CONFIG_MEMSTATUS", "stop_memory_statistics"]

#: ``sqlite3_config``'s option for the memory statistics (sqlite3.h).
SQLITE_CONFIG_MEMSTATUS = 9
_SQLITE_OK = 0

_lock = threading.Lock()
_outcome: str | None = None


def stop_memory_statistics() -> str:
    """Turn SQLite's memory statistics off for this process, once, before any connection or
    other thread uses SQLite; what was done, as a phrase: ``"off"`` when this call or an earlier
    one turned them off, else why they stay on."""
    global _outcome
    with _lock:
        if _outcome is None:
            _outcome = _stop()
        return _outcome


def _stop() -> str:
    if not sys.platform.startswith("linux"):
        # sqlite3_config takes variable arguments; on Linux (x86-64, AArch64) an int among them is
        # passed as a fixed one is, which is what ctypes does. Elsewhere (Apple's arm64) it is not.
        return f"left on: not tried on {sys.platform}"
    try:
        import _sqlite3

        library = ctypes.CDLL(_sqlite3.__file__)  # its own symbols, or its libsqlite3's
        used, shutdown = library.sqlite3_memory_used, library.sqlite3_shutdown
        config, initialize = library.sqlite3_config, library.sqlite3_initialize
    except (ImportError, OSError, AttributeError) as exc:
        return f"left on: the SQLite library's functions are not reachable ({exc})"
    used.restype = ctypes.c_int64
    used.argtypes = []
    config.argtypes = [ctypes.c_int, ctypes.c_int]
    if used() != 0:
        return "left on: SQLite was already in use in this process"
    if shutdown() != _SQLITE_OK:
        return "left on: SQLite would not shut down"
    try:
        changed = config(SQLITE_CONFIG_MEMSTATUS, 0) == _SQLITE_OK
    finally:
        initialize()  # were it to fail, the first connection starts SQLite again (and says why)
    return "off" if changed else "left on: SQLite refused the setting"
