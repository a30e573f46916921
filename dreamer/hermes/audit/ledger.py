"""The agent's audit ledger `MEMORY_AUDIT_LEDGER.md`: one Markdown block per audit, append-only.

A block is a `## <ISO timestamp>` heading followed by `- key: value` lines:

    ## 2025-03-01T09:00:00+00:00
    - status: COMPLETE
    - mode: apply
    - memory_util_before: 91.2%
    - memory_util_after: 58.4%
    - user_util_before: 40.0%
    - user_util_after: 47.3%
    - memory_chars_after: 1285
    - user_chars_after: 650
    - deletions: 4
    - moves: 2
    - corrections: 1
    - compressions: 2
    - unverified: 1
    - reverified: 0
    - unverified_total: 2
    - unresolved: 1
    - drift_alerts: 1
    - canary_intact: true
    - writer_registered: true
    - canary_memory: 3f9a0c1d2e4b5a69
    - soul: fresh
    - canary_user: 0b7e2d4c9a1f3e58
    - warning: MEMORY.md is still over its limit: ...
    - alert: ALERT: ...
    - action: DELETE MEMORY.md (Session Note): "Session note: ..."
    - temp_file_removed: .mem_k2x9q1.tmp

A canary rotation adds two blocks of its own (`mode: rotation`, status ROTATING before it writes the
files, ROTATED after both): the new token and both files' canary fingerprints before and after.
`last_audit` skips them, so the trigger and drift alerts see only audits.

The file is only ever opened for appending (never truncated or rewritten, never through a symbolic
link), under its sidecar lock.
The audit's summary lives here rather than in the budgeted memory files.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from dreamer.errors import AuditError
from dreamer.hermes.memory.locking import exclusive_lock, open_no_follow

__all__ = [
    "LEDGER_HEADER",
    "LedgerEntry",
    "LedgerReadError",
    "LedgerRecord",
    "RotationRecord",
    "append_record",
    "append_rotation",
    "format_record",
    "last_audit",
    "one_line",
    "parse_ledger",
    "read_ledger",
]

LEDGER_HEADER = "# Memory audit ledger\n\nAppend-only: one block per audit, newest last.\n"
_PREVIEW_WIDTH = 100


class LedgerReadError(AuditError, OSError):
    """The ledger exists but cannot be read; fix its permissions or encoding. Catch it (or
    `OSError`) where the ledger is read: the audit reports ERROR, the due check calls it due."""


def one_line(text: str, width: int = _PREVIEW_WIDTH) -> str:
    """`text` on a single line (line breaks shown as ⏎), cut to `width` characters."""
    flat = " ⏎ ".join(part.strip() for part in text.splitlines() if part.strip())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


@dataclass(frozen=True)
class LedgerRecord:
    """Everything one audit writes into its ledger block."""

    timestamp: datetime
    status: str
    mode: str
    memory_util_before: float
    memory_util_after: float
    user_util_before: float
    user_util_after: float
    memory_chars_after: int
    user_chars_after: int
    deletions: int
    moves: int
    corrections: int
    unverified: int
    reverified: int
    unverified_total: int
    unresolved: int
    canary_intact: bool
    writer_registered: bool
    note: str = ""
    drift_alerts: tuple[str, ...] = ()
    actions: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    temp_files_removed: tuple[str, ...] = ()
    canary_memory: str = ""
    canary_user: str = ""
    compressions: int = 0
    soul: str = ""


@dataclass(frozen=True)
class RotationRecord:
    """One step of a canary rotation: its intent (ROTATING) or its end (ROTATED)."""

    timestamp: datetime
    status: str
    trigger: str
    token: str
    canary_memory: str
    canary_user: str
    canary_memory_before: str
    canary_user_before: str
    note: str = ""


def format_rotation(record: RotationRecord) -> str:
    """The Markdown block for one rotation step, starting with a blank line and ending with a newline."""
    lines = [
        f"## {record.timestamp.isoformat(timespec='seconds')}",
        f"- status: {record.status}",
        "- mode: rotation",
        f"- trigger: {record.trigger}",
        f"- canary_token: {record.token}",
        f"- canary_memory: {record.canary_memory}",
        f"- canary_user: {record.canary_user}",
        f"- canary_memory_before: {record.canary_memory_before}",
        f"- canary_user_before: {record.canary_user_before}",
    ]
    if record.note:
        lines.append(f"- note: {one_line(record.note, 400)}")
    return "\n" + "\n".join(lines) + "\n"


def format_record(record: LedgerRecord) -> str:
    """The Markdown block for `record`, starting with a blank line and ending with a newline."""
    lines = [
        f"## {record.timestamp.isoformat(timespec='seconds')}",
        f"- status: {record.status}",
        f"- mode: {record.mode}",
        f"- memory_util_before: {record.memory_util_before:.1f}%",
        f"- memory_util_after: {record.memory_util_after:.1f}%",
        f"- user_util_before: {record.user_util_before:.1f}%",
        f"- user_util_after: {record.user_util_after:.1f}%",
        f"- memory_chars_after: {record.memory_chars_after}",
        f"- user_chars_after: {record.user_chars_after}",
        f"- deletions: {record.deletions}",
        f"- moves: {record.moves}",
        f"- corrections: {record.corrections}",
        f"- compressions: {record.compressions}",
        f"- unverified: {record.unverified}",
        f"- reverified: {record.reverified}",
        f"- unverified_total: {record.unverified_total}",
        f"- unresolved: {record.unresolved}",
        f"- drift_alerts: {len(record.drift_alerts)}",
        f"- canary_intact: {'true' if record.canary_intact else 'false'}",
        f"- writer_registered: {'true' if record.writer_registered else 'false'}",
    ]
    if record.soul:
        lines.append(f"- soul: {record.soul}")
    if record.canary_memory and record.canary_user:
        lines += [f"- canary_memory: {record.canary_memory}", f"- canary_user: {record.canary_user}"]
    if record.note:
        lines.append(f"- note: {one_line(record.note, 400)}")
    lines.extend(f"- warning: {one_line(warning, 400)}" for warning in record.warnings)
    lines.extend(f"- alert: {one_line(alert, 400)}" for alert in record.drift_alerts)
    lines.extend(f"- action: {one_line(action, 400)}" for action in record.actions)
    lines.extend(f"- temp_file_removed: {one_line(name, 400)}" for name in record.temp_files_removed)
    return "\n" + "\n".join(lines) + "\n"


@dataclass(frozen=True)
class LedgerEntry:
    """One parsed ledger block: its timestamp and its first value for every key."""

    timestamp: datetime
    fields: Mapping[str, str] = field(default_factory=dict)

    @property
    def status(self) -> str:
        """The block's status (COMPLETE, DRY_RUN, ...), "" if absent."""
        return self.fields.get("status", "")

    def number(self, key: str) -> float | None:
        """The value of `key` as a number ("58.4%" → 58.4), None if absent or not numeric."""
        raw = self.fields.get(key, "").strip().rstrip("%").strip()
        try:
            return float(raw)
        except ValueError:
            return None

    def integer(self, key: str) -> int | None:
        """The value of `key` as an integer, None if absent or not an integer."""
        raw = self.fields.get(key, "").strip()
        try:
            return int(raw)
        except ValueError:
            return None


def _parse_timestamp(raw: str) -> datetime | None:
    try:
        stamp = datetime.fromisoformat(raw.strip())
    except ValueError:
        return None
    return stamp if stamp.tzinfo is not None else None


def parse_ledger(text: str) -> tuple[LedgerEntry, ...]:
    """All blocks of the ledger text, oldest first; blocks with an unreadable heading are skipped."""
    entries: list[LedgerEntry] = []
    stamp: datetime | None = None
    fields: dict[str, str] = {}

    def close() -> None:
        if stamp is not None:
            entries.append(LedgerEntry(stamp, dict(fields)))

    for line in text.splitlines():
        if line.startswith("## "):
            close()
            stamp = _parse_timestamp(line[3:])
            fields = {}
        elif stamp is not None and line.startswith("- ") and ":" in line:
            key, _, value = line[2:].partition(":")
            fields.setdefault(key.strip(), value.strip())
    close()
    return tuple(entries)


def last_audit(entries: Sequence[LedgerEntry]) -> LedgerEntry | None:
    """The newest block written by an audit (rotation blocks skipped), None if there is none."""
    for entry in reversed(entries):
        if entry.fields.get("mode") != "rotation":
            return entry
    return None


def read_ledger(path: Path) -> tuple[LedgerEntry, ...]:
    """The parsed ledger at `path`; an absent ledger has no entries."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return ()
    except (OSError, UnicodeDecodeError) as exc:
        raise LedgerReadError(f"cannot read the audit ledger {path}: {exc}") from exc
    return parse_ledger(text)


def _prefix(fd: int, *, new: bool) -> str:
    """What goes before a block: the header in a new ledger, a line break after an unfinished line."""
    if new:
        return LEDGER_HEADER
    size = os.fstat(fd).st_size
    return "" if size == 0 or os.pread(fd, 1, size - 1) == b"\n" else "\n"


def append_record(path: Path, record: LedgerRecord) -> None:
    """Append the block for `record` to the ledger at `path`, creating it with a header if absent.

    A symbolic link in place of the ledger (or its lock) is refused, never appended through.
    """
    _append_block(path, format_record(record))


def append_rotation(path: Path, record: RotationRecord) -> None:
    """Append one rotation step to the ledger at `path` (as `append_record` does)."""
    _append_block(path, format_rotation(record))


def _append_block(path: Path, block: str) -> None:
    with exclusive_lock(path):
        existed = path.exists()
        # O_APPEND: bytes already in the file cannot be touched by this write.
        fd = open_no_follow(path, os.O_RDWR | os.O_APPEND | os.O_CREAT)
        with os.fdopen(fd, "a", encoding="utf-8", newline="") as handle:
            handle.write(_prefix(fd, new=not existed) + block)
            handle.flush()
            os.fsync(fd)
