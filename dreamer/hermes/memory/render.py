"""The frozen-snapshot block Hermes injects into an agent's system prompt, reproduced byte for byte.

Layout (46 "═" per rule):

    ══════════════════════════════════════════════
    MEMORY (your personal notes) [42% — 924/2,200 chars]
    ══════════════════════════════════════════════
    entry one
    §
    entry two

USER.md uses the header "USER PROFILE (who the user is)". A file over its limit renders the same
way, whole, at 100% (Hermes adds no flag and cuts nothing; `dreamer memory stats` says the file is
over its limit). An empty file renders as "" (Hermes injects nothing). Entries Hermes' snapshot
scan blocks are replaced before rendering (`threats.snapshot_entries`).
"""

from __future__ import annotations

from collections.abc import Sequence

from dreamer.hermes.memory.entries import Target, serialize_entries, usage_percent

__all__ = [
    "MEMORY_HEADER",
    "SEPARATOR",
    "USER_HEADER",
    "render_block",
    "render_titled_block",
]

SEPARATOR = "═" * 46
MEMORY_HEADER = "MEMORY (your personal notes)"
USER_HEADER = "USER PROFILE (who the user is)"


def render_block(target: Target, entries: Sequence[str], limit: int) -> str:
    """The snapshot block for `entries` of `target` under `limit`, exactly as Hermes renders it."""
    return render_titled_block(USER_HEADER if target is Target.USER else MEMORY_HEADER, entries, limit)


def render_titled_block(title: str, entries: Sequence[str], limit: int) -> str:
    """A block in Hermes' snapshot layout under any title (the peer card uses "PEER CARD (name)")."""
    if not entries:
        return ""
    content = serialize_entries(entries)
    current = len(content)
    header = f"{title} [{usage_percent(current, limit)}% — {current:,}/{limit:,} chars]"
    return f"{SEPARATOR}\n{header}\n{SEPARATOR}\n{content}"
