"""The audit's own state file `MEMORY_AUDIT_STATE.json`: when each entry was first seen.

An entry without a date in its text still needs an age ("temporary state older than 14 days"), so
each audit records the first time it saw every entry, keyed by a hash of the entry's normalised
text (the text itself is not copied again). Entries that have disappeared are dropped, so the file
stays as small as the memory files. The file lives in the agent's own memories directory.
"""

from __future__ import annotations

import hashlib
import json
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from dreamer.errors import AuditError
from dreamer.hermes.memory.locking import atomic_write_text

__all__ = [
    "AuditState",
    "AuditStateError",
    "entry_key",
    "load_state",
    "normalize_entry",
    "save_state",
    "with_entries_seen",
]

_VERSION = 1


class AuditStateError(AuditError, ValueError):
    """The state file is unreadable or malformed; delete it to start counting ages afresh. Catch it
    where the state is loaded: the audit then counts ages from today, with a note."""


def normalize_entry(text: str) -> str:
    """The form two entries must share to count as the same entry: NFKC, case-folded, one space."""
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def entry_key(text: str) -> str:
    """A stable key for an entry's normalised text."""
    return hashlib.sha256(normalize_entry(text).encode("utf-8")).hexdigest()[:32]


@dataclass(frozen=True)
class AuditState:
    """First-seen times of the entries the audit has seen, by `entry_key`."""

    first_seen: Mapping[str, datetime] = field(default_factory=dict)

    def first_seen_of(self, text: str) -> datetime | None:
        """When the entry `text` was first seen, None if never."""
        return self.first_seen.get(entry_key(text))


def with_entries_seen(state: AuditState, entries: Iterable[str], now: datetime) -> AuditState:
    """`state` keeping exactly `entries`: known ones keep their time, new ones are seen `now`."""
    seen: dict[str, datetime] = {}
    for text in entries:
        key = entry_key(text)
        seen[key] = state.first_seen.get(key, seen.get(key, now))
    return AuditState(seen)


def load_state(path: Path) -> AuditState:
    """The state stored at `path`; an absent file is an empty state."""
    try:
        raw = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return AuditState()
    except (OSError, UnicodeDecodeError) as exc:
        raise AuditStateError(f"cannot read {path}: {exc}") from exc
    try:
        data = json.loads(raw)
        first_seen = {str(key): datetime.fromisoformat(value) for key, value in data["first_seen"].items()}
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        message = f"{path} is malformed ({exc}); delete it to start counting ages afresh"
        raise AuditStateError(message) from exc
    if any(stamp.tzinfo is None for stamp in first_seen.values()):
        raise AuditStateError(f"{path} holds timestamps without a time zone; delete it to start afresh")
    return AuditState(first_seen)


def save_state(path: Path, state: AuditState) -> None:
    """Write `state` to `path` atomically (the caller holds the audit's lock); a link there is refused."""
    data = {
        "version": _VERSION,
        "first_seen": {
            key: stamp.isoformat(timespec="seconds") for key, stamp in sorted(state.first_seen.items())
        },
    }
    atomic_write_text(path, json.dumps(data, indent=2, sort_keys=True) + "\n", refuse_link=True)
