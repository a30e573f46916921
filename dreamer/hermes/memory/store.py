"""Hermes' MemoryStore semantics on one agent's memories directory (MEMORY.md and USER.md).

Behaviour, matching hermes-agent `tools/memory_tool.py`:

- `add` strips the content, rejects empty content and content Hermes' threat scan blocks
  (`BlockedContentError`, with Hermes' reason; and, unlike Hermes, content with a line holding
  only "§", see below), treats an exact duplicate as success without
  writing, and refuses (`OverBudgetError`, carrying the current entries) when the joined text would
  exceed the file's limit.
- `replace` / `remove` find the entry by a substring of it; no match is `NoMatchError`, matches in
  several *distinct* entries are `AmbiguousMatchError` (identical copies: the first one is used).
- `batch` applies add/replace/remove operations to a working copy and writes only if every
  operation succeeds and the *final* size fits (all-or-nothing).
- Every write takes the sidecar lock, re-reads the file under it (so concurrent writers are merged,
  not overwritten), de-duplicates exact repeats, and replaces the file atomically with mode 0600,
  through a symbolic link as Hermes does (`disk.write_memory_file`, which also refuses a link to a
  file the folder's owner does not own).
- The limits are the constructor's; `MemoryStore.for_config` takes them from Hermes' config.yaml.
- Before a replace/remove/batch rewrites a file, the file is checked for edits made outside the
  store: text that does not survive parse → serialise unchanged, or one entry larger than the whole
  file's limit. Such a file is copied to `<file>.bak.<unix-seconds>` and the write is refused
  (`ExternalEditError`). `add` skips the check, as in Hermes, because it only appends.
- `render` returns the frozen snapshot captured by `load()` (first use loads), so writes during a
  session never change what was injected; entries Hermes' snapshot scan blocks appear as its
  `[BLOCKED: ...]` placeholders.

Differences from Hermes: `add`, `replace` and a batch refuse content with a line holding only "§"
(`EntryDelimiterError`): Hermes stores it, and the file then parses as several entries, one of
which can be a forged canary line; the sidecar lock file is never opened through a symbolic link
(`StoreWriteError` naming it); results are `WriteResult` values and refusals typed exceptions instead of
result dicts; `replace`/`remove` accept `exact=True` to address an entry by its whole text (the
audit uses it so an entry that is a substring of another can still be edited); a file that exists
but cannot be read raises `StoreReadError` instead of counting as empty, which would let the next
write erase it; a second backup within the same second gets a `.<n>` suffix instead of overwriting
the first. Not carried over, because they belong to Hermes' agent loop rather than to the files:
the per-turn limit of three failed consolidations and the write-approval gate.
"""

from __future__ import annotations

import builtins
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from dreamer.hermes.memory.disk import ForeignFileError, read_memory_text, write_memory_file
from dreamer.hermes.memory.entries import (
    DEFAULT_MEMORY_CHAR_LIMIT,
    DEFAULT_USER_CHAR_LIMIT,
    ENTRY_DELIMITER,
    Target,
    dedupe,
    has_delimiter_line,
    joined_length,
    parse_entries,
    serialize_entries,
    usage_percent,
)
from dreamer.hermes.memory.limits import hermes_config_path, read_memory_limits
from dreamer.hermes.memory.locking import exclusive_lock
from dreamer.hermes.memory.render import render_block
from dreamer.hermes.memory.threats import first_threat_message, snapshot_entries

__all__ = [
    "AmbiguousMatchError",
    "BatchError",
    "BlockedContentError",
    "EmptyContentError",
    "EntryDelimiterError",
    "ExternalEditError",
    "MemoryStore",
    "MemoryStoreError",
    "NoMatchError",
    "Operation",
    "OverBudgetError",
    "StoreReadError",
    "StoreWriteError",
    "Usage",
    "WriteResult",
    "find_external_edit",
]

_PREVIEW_WIDTH = 80


@dataclass(frozen=True)
class Usage:
    """How much of a file's budget its entries occupy."""

    chars: int
    limit: int

    @property
    def percent(self) -> int:
        """Whole percent, truncated and capped at 100, as Hermes reports it."""
        return usage_percent(self.chars, self.limit)

    def __str__(self) -> str:
        return f"{self.percent}% — {self.chars:,}/{self.limit:,} chars"


@dataclass(frozen=True)
class WriteResult:
    """A successful store call; `changed` is False when nothing had to be written."""

    target: Target
    message: str
    usage: Usage
    entry_count: int
    changed: bool


class MemoryStoreError(Exception):
    """A store call that was refused; the file on disk is unchanged."""


class EmptyContentError(MemoryStoreError, ValueError):
    """Content or old_text was empty after stripping; pass the text of the entry."""


class EntryDelimiterError(MemoryStoreError, ValueError):
    """The content holds a line with only "§", the entry delimiter; change or remove that line."""

    def __init__(self, where: str = "") -> None:
        super().__init__(
            f"{where}Content has a line holding only '§', the entry delimiter, so it would be stored as "
            f"several entries. Remove that line or add text to it (for example '§ 4'), then retry."
        )


class BlockedContentError(MemoryStoreError, ValueError):
    """Hermes' threat scan blocks the content (an injection phrase, invisible unicode); rewrite it."""


def _refuse_threat(content: str, where: str = "") -> None:
    reason = first_threat_message(content)
    if reason is not None:
        raise BlockedContentError(where + reason)


def _refuse_delimiter(content: str, where: str = "") -> None:
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


@dataclass(frozen=True)
class Operation:
    """One step of a batch: add `content`, or replace/remove the entry found by `old_text`."""

    action: Literal["add", "replace", "remove"]
    content: str = ""
    old_text: str = ""
    exact: bool = False

    @classmethod
    def add(cls, content: str) -> Operation:
        """Add `content` as a new entry."""
        return cls("add", content=content)

    @classmethod
    def replace(cls, old_text: str, content: str, *, exact: bool = False) -> Operation:
        """Replace the entry containing (or, with exact, equal to) `old_text` by `content`."""
        return cls("replace", content=content, old_text=old_text, exact=exact)

    @classmethod
    def remove(cls, old_text: str, *, exact: bool = False) -> Operation:
        """Remove the entry containing (or, with exact, equal to) `old_text`."""
        return cls("remove", old_text=old_text, exact=exact)


def find_external_edit(raw: str, limit: int) -> bool:
    """True if `raw` could not have been written by the store (Hermes' drift test)."""
    if not raw.strip():
        return False
    parsed = [part.strip() for part in raw.split(ENTRY_DELIMITER) if part.strip()]
    longest = max((len(entry) for entry in parsed), default=0)
    return raw.strip() != ENTRY_DELIMITER.join(parsed) or longest > limit


def _previews(entries: Sequence[str]) -> list[str]:
    return [entry[:_PREVIEW_WIDTH] + ("..." if len(entry) > _PREVIEW_WIDTH else "") for entry in entries]


class MemoryStore:
    """Bounded, file-backed memory of one agent: its `MEMORY.md` and `USER.md`."""

    def __init__(
        self,
        memories_dir: Path,
        *,
        memory_char_limit: int = DEFAULT_MEMORY_CHAR_LIMIT,
        user_char_limit: int = DEFAULT_USER_CHAR_LIMIT,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if memory_char_limit <= 0 or user_char_limit <= 0:
            raise ValueError("character limits must be positive")
        self._dir = Path(memories_dir)
        self._limits = {Target.MEMORY: memory_char_limit, Target.USER: user_char_limit}
        self._clock = clock
        self._snapshot: dict[Target, str] | None = None

    @classmethod
    def for_config(cls, memories_dir: Path, config_yaml: Path | None = None) -> MemoryStore:
        """A store with the limits Hermes reads from the agent's config.yaml (`limits.py`).

        Raises `MemoryLimitsError` when that file sets a limit that is not a positive whole number.
        """
        limits = read_memory_limits(hermes_config_path(Path(memories_dir), config_yaml))
        return cls(memories_dir, memory_char_limit=limits.memory, user_char_limit=limits.user)

    # --- reading ------------------------------------------------------------------------------

    @property
    def memories_dir(self) -> Path:
        """The directory holding MEMORY.md and USER.md."""
        return self._dir

    def path_for(self, target: Target) -> Path:
        """The file backing `target`."""
        return self._dir / target.filename

    def limit_for(self, target: Target) -> int:
        """The character limit of `target`."""
        return self._limits[target]

    def list(self, target: Target) -> tuple[str, ...]:
        """The live entries of `target` as they are on disk now (exact repeats dropped)."""
        return tuple(dedupe(parse_entries(self._read_raw(target))))

    def stats(self, target: Target) -> Usage:
        """Live usage of `target`."""
        return Usage(joined_length(self.list(target)), self.limit_for(target))

    # --- frozen snapshot ----------------------------------------------------------------------

    def load(self) -> None:
        """Capture the snapshot both render blocks are built from (what a session start does)."""
        self._snapshot = {
            target: render_block(
                target, snapshot_entries(self.list(target), target.filename), self.limit_for(target)
            )
            for target in Target
        }

    def render(self, target: Target) -> str:
        """The frozen snapshot block of `target` ("" when it was empty); loads on first use."""
        if self._snapshot is None:
            self.load()
        assert self._snapshot is not None
        return self._snapshot[target]

    # --- writing ------------------------------------------------------------------------------

    def add(self, target: Target, content: str) -> WriteResult:
        """Append `content` as a new entry of `target`."""
        content = content.strip()
        if not content:
            raise EmptyContentError("Content cannot be empty.")
        _refuse_threat(content)
        _refuse_delimiter(content)
        path = self.path_for(target)
        with self._lock(path):
            entries = self._load_for_write(target, check_external_edit=False)
            if content in entries:
                return self._result(target, entries, "Entry already exists (no duplicate added).", False)
            limit = self.limit_for(target)
            if joined_length([*entries, content]) > limit:
                current = joined_length(entries)
                raise OverBudgetError(
                    f"Memory at {current:,}/{limit:,} chars. Adding this entry ({len(content)} chars) "
                    f"would exceed the limit. Consolidate: replace overlapping entries with shorter ones "
                    f"or remove stale ones (see current_entries), then retry the add.",
                    current_entries=entries,
                    usage=Usage(current, limit),
                )
            entries.append(content)
            self._write(target, entries)
        return self._result(target, entries, "Entry added.", True)

    def replace(self, target: Target, old_text: str, new_content: str, *, exact: bool = False) -> WriteResult:
        """Replace the one entry of `target` identified by `old_text` with `new_content`."""
        old_text = old_text.strip()
        new_content = new_content.strip()
        if not old_text:
            raise EmptyContentError("old_text cannot be empty.")
        if not new_content:
            raise EmptyContentError("new_content cannot be empty. Use 'remove' to delete entries.")
        _refuse_threat(new_content)
        _refuse_delimiter(new_content)
        path = self.path_for(target)
        with self._lock(path):
            entries = self._load_for_write(target, check_external_edit=True)
            index = self._unique_match(entries, old_text, exact=exact)
            limit = self.limit_for(target)
            candidate = builtins.list(entries)
            candidate[index] = new_content
            new_total = joined_length(candidate)
            if new_total > limit:
                raise OverBudgetError(
                    f"Replacement would put memory at {new_total:,}/{limit:,} chars. Shorten the new "
                    f"content, or remove other stale entries to make room (see current_entries), then retry.",
                    current_entries=entries,
                    usage=Usage(joined_length(entries), limit),
                )
            self._write(target, candidate)
        return self._result(target, candidate, "Entry replaced.", True)

    def remove(self, target: Target, old_text: str, *, exact: bool = False) -> WriteResult:
        """Remove the one entry of `target` identified by `old_text`."""
        old_text = old_text.strip()
        if not old_text:
            raise EmptyContentError("old_text cannot be empty.")
        path = self.path_for(target)
        with self._lock(path):
            entries = self._load_for_write(target, check_external_edit=True)
            index = self._unique_match(entries, old_text, exact=exact)
            entries.pop(index)
            self._write(target, entries)
        return self._result(target, entries, "Entry removed.", True)

    def batch(self, target: Target, operations: Sequence[Operation]) -> WriteResult:
        """Apply all `operations` to `target` against the final budget, or none of them."""
        if not operations:
            raise BatchError("operations list is empty.", index=None, current_entries=(), usage=None)
        for number, op in enumerate(operations, start=1):
            if op.action in ("add", "replace") and op.content:
                _refuse_threat(op.content, f"Operation {number}: ")
        for number, op in enumerate(operations, start=1):
            _refuse_delimiter(op.content.strip(), f"Operation {number} ({op.action}): ")
        path = self.path_for(target)
        limit = self.limit_for(target)
        with self._lock(path):
            entries = self._load_for_write(target, check_external_edit=True)
            usage = Usage(joined_length(entries), limit)
            working = builtins.list(entries)

            def fail(position: str, reason: str, index: int) -> BatchError:
                return BatchError(
                    f"{position}: {reason} No operations were applied (batch is all-or-nothing).",
                    index=index,
                    current_entries=entries,
                    usage=usage,
                )

            for number, op in enumerate(operations, start=1):
                position = f"Operation {number} ({op.action})"
                content = op.content.strip()
                old_text = op.old_text.strip()
                if op.action == "add":
                    if not content:
                        raise fail(position, "content is required.", number)
                    if content not in working:  # a repeated add is idempotent, not a failure
                        working.append(content)
                    continue
                if op.action not in ("replace", "remove"):
                    raise fail(position, "unknown action. Use add, replace, or remove.", number)
                if not old_text:
                    raise fail(position, "old_text is required.", number)
                if op.action == "replace" and not content:
                    raise fail(position, "content is required (use action='remove' to delete).", number)
                matches = self._matches(working, old_text, exact=op.exact)
                if not matches:
                    raise fail(position, f"no entry matched '{old_text}'.", number)
                if len({working[i] for i in matches}) > 1:
                    reason = f"'{old_text}' matched multiple distinct entries -- be more specific."
                    raise fail(position, reason, number)
                if op.action == "replace":
                    working[matches[0]] = content
                else:
                    working.pop(matches[0])

            new_total = joined_length(working)
            if new_total > limit:
                raise OverBudgetError(
                    f"After applying all {len(operations)} operations, memory would be at "
                    f"{new_total:,}/{limit:,} chars -- over the limit. Remove or shorten more entries in "
                    f"the same batch (see current_entries), then retry.",
                    current_entries=entries,
                    usage=usage,
                )
            self._write(target, working)
        return self._result(target, working, f"Applied {len(operations)} operation(s).", True)

    # --- internals ----------------------------------------------------------------------------

    def _lock(self, path: Path) -> AbstractContextManager[object]:
        """The held sidecar lock of `path`, creating the memories directory first as Hermes does."""
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreWriteError(f"cannot create the memories directory {path.parent}: {exc}") from exc
        held = ExitStack()
        try:
            held.enter_context(exclusive_lock(path))
        except OSError as exc:  # a symbolic link in place of the lock file, a missing permission
            raise StoreWriteError(f"Cannot lock {path.name}: {exc}") from exc
        return held

    def _read_raw(self, target: Target) -> str:
        path = self.path_for(target)
        try:
            text = read_memory_text(path)
        except ForeignFileError as exc:
            raise StoreReadError(str(exc)) from exc
        except (OSError, UnicodeDecodeError) as exc:
            raise StoreReadError(
                f"Cannot read {path}: {exc}. Fix the file's permissions or encoding (UTF-8) and retry."
            ) from exc
        return "" if text is None else text

    def _load_for_write(self, target: Target, *, check_external_edit: bool) -> builtins.list[str]:
        """Re-read `target` under its lock; refuse (after a backup) if it was edited outside the store."""
        raw = self._read_raw(target)
        if check_external_edit and find_external_edit(raw, self.limit_for(target)):
            path = self.path_for(target)
            raise ExternalEditError(path, self._backup(path, raw))
        return dedupe(parse_entries(raw))

    def _backup(self, path: Path, raw: str) -> Path | None:
        stamp = int(self._clock())
        candidate = path.with_suffix(path.suffix + f".bak.{stamp}")
        suffix = 0
        while True:
            try:
                with open(candidate, "x", encoding="utf-8", newline="") as handle:
                    handle.write(raw)
                return candidate
            except FileExistsError:
                try:
                    if candidate.read_text(encoding="utf-8") == raw:
                        return candidate  # the same drift was already saved this second
                except (OSError, UnicodeDecodeError):
                    pass
                suffix += 1
                candidate = path.with_suffix(path.suffix + f".bak.{stamp}.{suffix}")
            except OSError:
                return None

    def _write(self, target: Target, entries: Sequence[str]) -> None:
        path = self.path_for(target)
        try:
            write_memory_file(path, serialize_entries(entries))
        except ForeignFileError as exc:
            raise StoreWriteError(str(exc)) from exc
        except OSError as exc:
            raise StoreWriteError(f"Failed to write memory file {path}: {exc}") from exc

    @staticmethod
    def _matches(entries: Sequence[str], old_text: str, *, exact: bool) -> builtins.list[int]:
        if exact:
            return [i for i, entry in enumerate(entries) if entry == old_text]
        return [i for i, entry in enumerate(entries) if old_text in entry]

    def _unique_match(self, entries: Sequence[str], old_text: str, *, exact: bool) -> int:
        matches = self._matches(entries, old_text, exact=exact)
        if not matches:
            raise NoMatchError(
                f"No entry matched '{old_text}'. Check current_entries and retry with the exact text of "
                f"the entry you mean.",
                old_text=old_text,
                current_entries=entries,
            )
        distinct = {entries[i] for i in matches}
        if len(distinct) > 1:
            raise AmbiguousMatchError(
                f"Multiple entries matched '{old_text}'. Be more specific.",
                old_text=old_text,
                matches=_previews([entries[i] for i in matches]),
            )
        return matches[0]

    def _result(self, target: Target, entries: Sequence[str], message: str, changed: bool) -> WriteResult:
        usage = Usage(joined_length(entries), self.limit_for(target))
        return WriteResult(target, message, usage, len(entries), changed)
