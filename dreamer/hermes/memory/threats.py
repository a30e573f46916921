"""Hermes' threat scan of memory entries: what its memory tool refuses and what its snapshot blocks.

Hermes refuses to *write* an entry that matches (`first_threat_message`, the reason it returns) and,
when it builds the system-prompt snapshot, replaces a matching entry *already on disk* with a
`[BLOCKED: ...]` placeholder (`snapshot_entries`). Both are reproduced here so that `dreamer memory`
refuses what Hermes refuses and renders what Hermes renders. The scan and its pattern table
(Hermes' own) are :mod:`dreamer.threats`, the one copy every other use shares.
"""

from __future__ import annotations

from collections.abc import Sequence

from dreamer.threats import INVISIBLE_CHARS, MAX_SCAN_CHARS, scan_for_threats

__all__ = [
    "INVISIBLE_CHARS",
    "MAX_SCAN_CHARS",
    "first_threat_message",
    "scan_for_threats",
    "snapshot_entries",
]

_BLOCKED_PREFIX = "[BLOCKED:"


def first_threat_message(content: str) -> str | None:
    """Hermes' reason for refusing to write `content`, or None when it would store it."""
    findings = scan_for_threats(content)
    if not findings:
        return None
    first = findings[0]
    if first.startswith("invisible_unicode_"):
        codepoint = first.removeprefix("invisible_unicode_")
        return f"Blocked: content contains invisible unicode character {codepoint} (possible injection)."
    return (
        f"Blocked: content matches threat pattern '{first}'. Content is injected into the system "
        f"prompt and must not contain injection or exfiltration payloads."
    )


def snapshot_entries(entries: Sequence[str], filename: str) -> list[str]:
    """`entries` as Hermes puts them in the snapshot: each matching entry replaced by a placeholder."""
    shown: list[str] = []
    for entry in entries:
        findings = [] if not entry or entry.startswith(_BLOCKED_PREFIX) else scan_for_threats(entry)
        if findings:
            shown.append(
                f"{_BLOCKED_PREFIX} {filename} entry contained threat pattern(s): {', '.join(findings)}. "
                f"Removed from system prompt; use memory(action=remove) to delete the original.]"
            )
        else:
            shown.append(entry)
    return shown
