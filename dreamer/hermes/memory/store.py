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

The refusals are defined in `refusals.py`, a batch's operations in `operations.py`, the values
returned in `results.py`; all are exported from here as well.
"""

from __future__ import annotations

import builtins
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, ExitStack
from pathlib import Path

from dreamer.hermes.memory.disk import ForeignFileError, read_memory_text, write_memory_file
from dreamer.hermes.memory.entries import (
    DEFAULT_MEMORY_CHAR_LIMIT,
    DEFAULT_USER_CHAR_LIMIT,
    ENTRY_DELIMITER,
    Target,
    dedupe,
    joined_length,
    parse_entries,
    serialize_entries,
)
from dreamer.hermes.memory.limits import hermes_config_path, read_memory_limits
from dreamer.hermes.memory.locking import exclusive_lock
from dreamer.hermes.memory.operations import Operation, apply_operations, check_batch, matching
from dreamer.hermes.memory.refusals import (
    AmbiguousMatchError,
    BatchError,
    BlockedContentError,
    EmptyContentError,
    EntryDelimiterError,
    ExternalEditError,
    MemoryStoreError,
    NoMatchError,
    OverBudgetError,
    StoreReadError,
    StoreWriteError,
    refuse_delimiter,
    refuse_threat,
)
from dreamer.hermes.memory.render import render_block
from dreamer.hermes.memory.results import Usage, WriteResult
from dreamer.hermes.memory.threats import snapshot_entries

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
        refuse_threat(content)
        refuse_delimiter(content)
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
        refuse_threat(new_content)
        refuse_delimiter(new_content)
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
        check_batch(operations)
        path = self.path_for(target)
        limit = self.limit_for(target)
        with self._lock(path):
            entries = self._load_for_write(target, check_external_edit=True)
            usage = Usage(joined_length(entries), limit)
            working = apply_operations(entries, operations, usage)
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

    def _unique_match(self, entries: Sequence[str], old_text: str, *, exact: bool) -> int:
        matches = matching(entries, old_text, exact=exact)
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
