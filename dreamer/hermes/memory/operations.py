"""The operations of a store call: which entries an `old_text` addresses, and a batch of
add/replace/remove operations applied in order to a working copy, all or nothing."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from dreamer.hermes.memory.refusals import BatchError, refuse_delimiter, refuse_threat
from dreamer.hermes.memory.results import Usage

__all__ = ["Operation", "apply_operations", "check_batch", "matching"]


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


def matching(entries: Sequence[str], old_text: str, *, exact: bool) -> list[int]:
    """The positions of the entries `old_text` addresses: those containing it (or, with `exact`,
    equal to it)."""
    if exact:
        return [i for i, entry in enumerate(entries) if entry == old_text]
    return [i for i, entry in enumerate(entries) if old_text in entry]


def check_batch(operations: Sequence[Operation]) -> None:
    """Refuse, before the file is locked, an empty batch (`BatchError`) and one whose new content
    Hermes' threat scan blocks or that holds a delimiter line; the message names the operation.
    The threat scan runs over every operation first, as Hermes' does."""
    if not operations:
        raise BatchError("operations list is empty.", index=None, current_entries=(), usage=None)
    for number, op in enumerate(operations, start=1):
        if op.action in ("add", "replace") and op.content:
            refuse_threat(op.content, f"Operation {number}: ")
    for number, op in enumerate(operations, start=1):
        refuse_delimiter(op.content.strip(), f"Operation {number} ({op.action}): ")


def apply_operations(entries: Sequence[str], operations: Sequence[Operation], usage: Usage) -> list[str]:
    """`entries` with every operation applied in order, on a copy. The first operation that cannot
    be applied raises `BatchError` naming it, carrying `entries` and their `usage`: then none is."""
    working = list(entries)
    for number, op in enumerate(operations, start=1):
        reason = _apply(working, op)
        if reason:
            raise BatchError(
                f"Operation {number} ({op.action}): {reason} No operations were applied "
                f"(batch is all-or-nothing).",
                index=number,
                current_entries=entries,
                usage=usage,
            )
    return working


def _apply(working: list[str], op: Operation) -> str:
    """Apply `op` to `working` in place; why it cannot be applied, or "" once it was."""
    content = op.content.strip()
    old_text = op.old_text.strip()
    if op.action == "add":
        if not content:
            return "content is required."
        if content not in working:  # a repeated add is idempotent, not a failure
            working.append(content)
        return ""
    if op.action not in ("replace", "remove"):
        return "unknown action. Use add, replace, or remove."
    if not old_text:
        return "old_text is required."
    if op.action == "replace" and not content:
        return "content is required (use action='remove' to delete)."
    found = matching(working, old_text, exact=op.exact)
    if not found:
        return f"no entry matched '{old_text}'."
    if len({working[i] for i in found}) > 1:
        return f"'{old_text}' matched multiple distinct entries -- be more specific."
    if op.action == "replace":
        working[found[0]] = content
    else:
        working.pop(found[0])
    return ""
