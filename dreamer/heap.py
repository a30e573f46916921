"""Freed memory handed back to the system: ``malloc_trim`` once a run has ended.

glibc keeps memory a process freed in its heaps for the next allocation, so the RSS of a daemon
that freed the model's weights or a run's rows stays where the run left it. ``malloc_trim(0)``
returns the free pages at the top of each heap and the free whole pages inside them. Elsewhere
(musl, macOS) there is no such call and this does nothing.
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable


@functools.cache
def _trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim``, looked up once; None where the C library has none."""
    try:
        found: Callable[[int], int] = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return None
    return found


def give_back_memory() -> bool:
    """Return the C heap's free pages to the system; True when the call exists here and ran
    (ctypes lets go of the GIL for it, so a worker thread can call it while the loop runs)."""
    trim = _trim()
    if trim is None:
        return False
    trim(0)
    return True
