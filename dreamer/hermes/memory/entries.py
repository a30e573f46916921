"""The on-disk entry format shared by Hermes' MEMORY.md and USER.md.

A memory file is a list of entries joined by `ENTRY_DELIMITER` ("\\n§\\n"); entries may span several
lines. The size that counts against a file's budget is the length in characters (not bytes, not
tokens) of the joined text, and an empty list has size 0. Parsing strips every entry and drops empty
ones, exactly as Hermes' `MemoryStore._read_file` does, so a file written by Hermes and a file
written by this package are interchangeable.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from enum import StrEnum

__all__ = [
    "DEFAULT_MEMORY_CHAR_LIMIT",
    "DEFAULT_USER_CHAR_LIMIT",
    "ENTRY_DELIMITER",
    "MEMORY_FILENAME",
    "USER_FILENAME",
    "Target",
    "dedupe",
    "has_delimiter_line",
    "joined_length",
    "parse_entries",
    "serialize_entries",
    "usage_percent",
]

ENTRY_DELIMITER = "\n§\n"
MEMORY_FILENAME = "MEMORY.md"
USER_FILENAME = "USER.md"
DEFAULT_MEMORY_CHAR_LIMIT = 2200
DEFAULT_USER_CHAR_LIMIT = 1375


class Target(StrEnum):
    """Which of an agent's two memory files an operation addresses."""

    MEMORY = "memory"
    USER = "user"

    @property
    def filename(self) -> str:
        """The file name of this target inside the memories directory."""
        return USER_FILENAME if self is Target.USER else MEMORY_FILENAME

    @classmethod
    def from_filename(cls, filename: str) -> Target:
        """The target stored in `filename` (MEMORY.md or USER.md)."""
        if filename == USER_FILENAME:
            return cls.USER
        if filename == MEMORY_FILENAME:
            return cls.MEMORY
        raise ValueError(f"{filename!r} is not a memory file; expected {MEMORY_FILENAME} or {USER_FILENAME}")


def parse_entries(raw: str) -> list[str]:
    """Split raw file text into stripped, non-empty entries (duplicates kept, order preserved)."""
    if not raw.strip():
        return []
    # Split on the full delimiter, never on a bare "§": an entry may contain the sign itself.
    return [entry for entry in (part.strip() for part in raw.split(ENTRY_DELIMITER)) if entry]


def has_delimiter_line(text: str) -> bool:
    """True if a line of `text` holds only "§": stored, that text would split into several entries."""
    return any(line == ENTRY_DELIMITER.strip("\n") for line in text.split("\n"))


def dedupe(entries: Iterable[str]) -> list[str]:
    """Drop exact repeats, keeping the first occurrence (what Hermes does on every load)."""
    return list(dict.fromkeys(entries))


def serialize_entries(entries: Sequence[str]) -> str:
    """The file text for `entries`: joined by the delimiter, no trailing newline, "" when empty."""
    return ENTRY_DELIMITER.join(entries) if entries else ""


def joined_length(entries: Sequence[str]) -> int:
    """Characters the entries occupy against the budget: the length of the joined text."""
    return len(serialize_entries(entries))


def usage_percent(current: int, limit: int) -> int:
    """Whole-percent usage as Hermes prints it: truncated, capped at 100, 0 for a zero limit."""
    # Same float expression as Hermes (not integer division), so the printed figure is identical
    # even where float rounding makes the two disagree.
    return min(100, int((current / limit) * 100)) if limit > 0 else 0
