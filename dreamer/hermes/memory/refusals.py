"""The store's refusals: one exception per reason a store call leaves the file unchanged, and the
content checks every write makes before it takes a lock.

Each carries what a caller needs to retry (the current entries, the matches, the usage); the
messages are Hermes' own where Hermes has one, so an agent reads the same advice from either.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from dreamer.errors import MemoryFileError, MemoryTextError
from dreamer.hermes.memory.entries import has_delimiter_line
from dreamer.hermes.memory.results import Usage
from dreamer.hermes.memory.threats import first_threat_message

__all__ = [
    "AmbiguousMatchError",
    "BatchError",
    "BlockedContentError",
    "EmptyContentError",
    "EntryDelimiterError",
    "ExternalEditError",
    "MemoryStoreError",
    "NoMatchError",
    "OverBudgetError",
    "StoreReadError",
    "StoreWriteError",
    "refuse_delimiter",
    "refuse_threat",
]


class MemoryStoreError(MemoryFileError):
    """A store call that was refused; the file on disk is unchanged. Catch it around store calls to
    report the refusal; the subclasses say what to do about it."""


class EmptyContentError(MemoryStoreError, ValueError):
    """Content or old_text was empty after stripping; pass the text of the entry."""


class EntryDelimiterError(MemoryStoreError, MemoryTextError, ValueError):
    """The content holds a line with only "§", the entry delimiter; change or remove that line."""

    def __init__(self, where: str = "") -> None:
        super().__init__(
            f"{where}Content has a line holding only '§', the entry delimiter, so it would be stored as "
            f"several entries. Remove that line or add text to it (for example '§ 4'), then retry."
        )


class BlockedContentError(MemoryStoreError, MemoryTextError, ValueError):
    """Hermes' threat scan blocks the content (an injection phrase, invisible unicode); rewrite it."""


def refuse_threat(content: str, where: str = "") -> None:
    """Raise `BlockedContentError` with Hermes' reason if its threat scan blocks `content`."""
    reason = first_threat_message(content)
    if reason is not None:
        raise BlockedContentError(where + reason)


def refuse_delimiter(content: str, where: str = "") -> None:
    """Raise `EntryDelimiterError` if a line of `content` holds only "§"."""
    if has_delimiter_line(content):
        raise EntryDelimiterError(where)


class OverBudgetError(MemoryStoreError):
    """The result would exceed the file's limit; remove or shorten entries, then retry."""

    def __init__(self, message: str, *, current_entries: Sequence[str], usage: Usage) -> None:
        super().__init__(message)
        self.current_entries: tuple[str, ...] = tuple(current_entries)
        self.usage = usage


class NoMatchError(MemoryStoreError):
    """No entry contains old_text; retry with text copied from one of `current_entries`."""

    def __init__(self, message: str, *, old_text: str, current_entries: Sequence[str]) -> None:
        super().__init__(message)
        self.old_text = old_text
        self.current_entries: tuple[str, ...] = tuple(current_entries)


class AmbiguousMatchError(MemoryStoreError):
    """old_text occurs in several distinct entries; use a longer, unique piece of one of them."""

    def __init__(self, message: str, *, old_text: str, matches: Sequence[str]) -> None:
        super().__init__(message)
        self.old_text = old_text
        self.matches: tuple[str, ...] = tuple(matches)


class BatchError(MemoryStoreError):
    """One operation of a batch failed, so none was applied; fix that operation and resend all."""

    def __init__(
        self, message: str, *, index: int | None, current_entries: Sequence[str], usage: Usage | None
    ) -> None:
        super().__init__(message)
        self.index = index
        self.current_entries: tuple[str, ...] = tuple(current_entries)
        self.usage = usage


class ExternalEditError(MemoryStoreError):
    """The file was edited outside the store; it was backed up and the write refused.

    Fold what the backup holds back in with `add`, rewrite the file as a clean §-separated list,
    then retry.
    """

    def __init__(self, path: Path, backup_path: Path | None) -> None:
        saved = (
            f"A copy was saved to {backup_path}." if backup_path else "The backup copy could not be written."
        )
        super().__init__(
            f"Refusing to write {path.name}: it contains content that was not written through the memory "
            f"store (a manual edit, a shell append or another tool). {saved} Move the extra content into "
            f"entries with add, or rewrite the file as a clean list of entries separated by '§' lines, "
            f"then retry."
        )
        self.path = path
        self.backup_path = backup_path


class StoreReadError(MemoryStoreError):
    """A memory file exists but could not be read as UTF-8 text; fix its permissions or encoding."""


class StoreWriteError(MemoryStoreError):
    """A memory file could not be written; check free space and permissions of the directory."""
