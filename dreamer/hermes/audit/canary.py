"""Canary lines: fixed markers whose presence proves a memory file was not rewritten wholesale.

Each of an agent's two memory files carries a line containing `CANARY_MARKER`. An audit refuses to
touch anything when one is missing, never edits the entry holding it, and checks afterwards that
the same canary lines are still there.
"""

from __future__ import annotations

__all__ = ["CANARY_MARKER", "canary_lines", "is_canary_entry"]

CANARY_MARKER = "CANARY: Do not modify this line"


def canary_lines(raw: str) -> tuple[str, ...]:
    """Every line of `raw` that contains the canary marker, verbatim and in order."""
    return tuple(line for line in raw.splitlines() if CANARY_MARKER in line)


def is_canary_entry(entry: str) -> bool:
    """True if `entry` holds a canary line and must therefore never be changed or removed."""
    return CANARY_MARKER in entry
