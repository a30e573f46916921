"""Carrying out an audit plan through the memory store, one patch-level change at a time.

Every change is a single store call (remove, add, replace), so each takes the sidecar lock, works on
the file as it is at that moment, and replaces it atomically; an external edit makes the store back
the file up and refuse, after which the audit leaves that file alone. Entries are addressed by
their exact text: if another writer changed or removed one since the audit read it, that change is
skipped and reported, never forced. A move adds the entry to its destination before removing it
from its source, and takes the add back if the removal fails, so an entry is never lost.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from dreamer.hermes.audit.planner import (
    SKILL_DESTINATION,
    SOUL_DESTINATION,
    ActionKind,
    Entry,
    Plan,
    PlannedAction,
)
from dreamer.hermes.audit.skills import SkillWriteError, append_rule
from dreamer.hermes.audit.soul_file import SoulWriteError, append_to_soul, remove_from_soul
from dreamer.hermes.memory.entries import Target
from dreamer.hermes.memory.store import (
    ExternalEditError,
    MemoryStore,
    MemoryStoreError,
    NoMatchError,
    OverBudgetError,
)

__all__ = ["ActionOutcome", "apply_plan"]

_R = TypeVar("_R")


@dataclass(frozen=True)
class ActionOutcome:
    """What happened to one planned action."""

    action: PlannedAction
    applied: bool
    detail: str = ""


class _Skipped(Exception):
    """An action that was not carried out, with the reason."""


class _Executor:
    def __init__(
        self, entries: Sequence[Entry], store: MemoryStore, skill_path: Path | None, soul_path: Path | None
    ) -> None:
        self._store = store
        self._skill_path = skill_path
        self._soul_path = soul_path
        self._location: dict[int, Target | None] = {entry.id: entry.target for entry in entries}
        self._text = {entry.id: entry.text for entry in entries}
        self._blocked: dict[Target, str] = {}

    def run(self, action: PlannedAction) -> ActionOutcome:
        try:
            detail = self._run(action)
        except _Skipped as skipped:
            return ActionOutcome(action, False, str(skipped))
        return ActionOutcome(action, True, detail)

    def _run(self, action: PlannedAction) -> str:
        entry_id = action.entry_id
        if self._location.get(entry_id) is not action.source or self._text.get(entry_id) != action.entry:
            raise _Skipped("not applied: an earlier change to this entry did not go through")
        self._check_open(action.source)
        if action.kind is ActionKind.DELETE:
            self._call(action.source, lambda: self._store.remove(action.source, action.entry, exact=True))
            self._location[entry_id] = None
            return ""
        if action.kind is ActionKind.MOVE:
            return self._move(action)
        new_text = action.new_text or ""
        self._call(
            action.source, lambda: self._store.replace(action.source, action.entry, new_text, exact=True)
        )
        self._text[entry_id] = new_text
        return ""

    def _move(self, action: PlannedAction) -> str:
        source, text = action.source, action.entry
        if action.destination == SKILL_DESTINATION:
            if self._skill_path is None:
                raise _Skipped("no skills directory configured; the entry stays")
            try:
                written = append_rule(self._skill_path, text)
            except SkillWriteError as exc:
                raise _Skipped(f"{exc}; the entry stays in {source.filename}") from exc
            try:
                self._call(source, lambda: self._store.remove(source, text, exact=True))
            except _Skipped as skipped:
                raise _Skipped(
                    f"copied to {self._skill_path} but left in {source.filename}: {skipped}"
                ) from None
            self._location[action.entry_id] = None
            return f"added to {self._skill_path}" if written else f"already listed in {self._skill_path}"

        if action.destination == SOUL_DESTINATION:
            return self._move_to_soul(source, text, action.entry_id)
        destination = Target.from_filename(action.destination or "")
        self._check_open(destination)
        added = self._call(destination, lambda: self._store.add(destination, text)).changed
        try:
            self._call(source, lambda: self._store.remove(source, text, exact=True))
        except _Skipped as skipped:
            if added:
                try:
                    self._store.remove(destination, text, exact=True)
                except MemoryStoreError as exc:
                    raise _Skipped(
                        f"{skipped}; the copy added to {destination.filename} could not be taken back "
                        f"({exc}), so the entry is now in both files"
                    ) from None
            raise
        self._location[action.entry_id] = destination
        return ""

    def _move_to_soul(self, source: Target, text: str, entry_id: int) -> str:
        soul = self._soul_path
        if soul is None:
            raise _Skipped("no SOUL.md configured; the entry stays")
        try:
            added = append_to_soul(soul, text)
        except SoulWriteError as exc:
            raise _Skipped(f"{exc}; the entry stays in {source.filename}") from exc
        try:
            self._call(source, lambda: self._store.remove(source, text, exact=True))
        except _Skipped as skipped:
            if added:
                try:
                    remove_from_soul(soul, text.strip())
                except SoulWriteError as exc:
                    raise _Skipped(f"{skipped}; the copy added to {soul} stays there too ({exc})") from None
            raise
        self._location[entry_id] = None
        return f"added to {soul}" if added else f"already in {soul}"

    def _check_open(self, target: Target) -> None:
        if target in self._blocked:
            raise _Skipped(self._blocked[target])

    def _call(self, target: Target, call: Callable[[], _R]) -> _R:
        try:
            return call()
        except ExternalEditError as exc:
            self._blocked[target] = f"not applied: {exc}"
            raise _Skipped(self._blocked[target]) from exc
        except NoMatchError as exc:
            raise _Skipped(
                f"not applied: the entry changed or disappeared in {target.filename} since the audit read it"
            ) from exc
        except OverBudgetError as exc:
            raise _Skipped(f"not applied: {target.filename} has no room now ({exc.usage})") from exc
        except MemoryStoreError as exc:
            raise _Skipped(f"not applied: {exc}") from exc


def apply_plan(
    plan: Plan,
    entries: Sequence[Entry],
    store: MemoryStore,
    skill_path: Path | None,
    soul_path: Path | None = None,
) -> tuple[ActionOutcome, ...]:
    """Carry out `plan` (made from `entries`) in order; one outcome per planned action."""
    executor = _Executor(entries, store, skill_path, soul_path)
    return tuple(executor.run(action) for action in plan.actions)
