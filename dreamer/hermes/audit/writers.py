"""The writer registry `MEMORY_WRITERS.md`: who may change an agent's memory files.

The file is free-form Markdown. A writer counts as registered when its name is the first word of a
list item, heading, table row or plain line, ignoring Markdown emphasis and code marks:
"- dreamer", "* **dreamer**: weekly audit", "| `dreamer` | audit |", "dreamer". A struck-through name
("- ~~dreamer~~") or a name that is not the first word ("- not dreamer") does not count.
"""

from __future__ import annotations

import re
from pathlib import Path

from dreamer.config.files import read_text_file
from dreamer.errors import AuditError

__all__ = ["WriterRegistryError", "is_registered_writer", "registered_writers"]

_LEAD = re.compile(r"^\s*(?:[-*+]\s+|\d+[.)]\s+|#{1,6}\s+|\|\s*|>\s*)*")
_FIRST_WORD = re.compile(r"^(?:\*\*|__|`)?([A-Za-z0-9][A-Za-z0-9_.-]*)(?:\*\*|__|`)?(?=$|[\s:|,(\-—–])")


class WriterRegistryError(AuditError, OSError):
    """MEMORY_WRITERS.md exists but cannot be read; fix its permissions or encoding. Catch it (or
    `OSError`) around an audit: the audit reports ERROR and changes nothing."""


def registered_writers(text: str) -> frozenset[str]:
    """Lower-cased names registered in the registry text."""
    names: set[str] = set()
    for line in text.splitlines():
        rest = _LEAD.sub("", line, count=1)
        match = _FIRST_WORD.match(rest)
        if match:
            names.add(match.group(1).lower())
    return frozenset(names)


def is_registered_writer(path: Path, writer_name: str) -> tuple[bool, str]:
    """Whether `writer_name` is registered in the registry at `path`, and why (for the report)."""
    try:
        text = read_text_file(path)  # a regular file only: a FIFO would hang the audit
    except FileNotFoundError:
        return False, f"{path.name} does not exist, so no writer is registered; add a line '- {writer_name}'"
    except (OSError, UnicodeDecodeError) as exc:
        raise WriterRegistryError(f"cannot read {path}: {exc}") from exc
    if writer_name.lower() in registered_writers(text):
        return True, f"{writer_name} is registered in {path.name}"
    return False, (
        f"{writer_name} is not registered in {path.name}; add a line '- {writer_name}' to allow changes"
    )
