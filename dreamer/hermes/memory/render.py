"""The frozen-snapshot block Hermes injects into an agent's system prompt, reproduced byte for byte.

Layout (46 "═" per rule):

    ══════════════════════════════════════════════
    MEMORY (your personal notes) [42% — 924/2,200 chars]
    ══════════════════════════════════════════════
    entry one
    §
    entry two

USER.md uses the header "USER PROFILE (who the user is)". A file over its limit gets " ⚠ OVER BUDGET"
inside the brackets. A file larger than max(2 × limit, 4000) characters (writers that bypass the
store can grow it without bound) is cut to its first 70% and last 20% of that cap with a marker
naming how much was left out. An empty file renders as "" (Hermes injects nothing).
"""

from __future__ import annotations

from collections.abc import Sequence

from dreamer.hermes.memory.entries import Target, serialize_entries, usage_percent

__all__ = [
    "MEMORY_HEADER",
    "SEPARATOR",
    "USER_HEADER",
    "render_block",
    "render_cap",
    "render_titled_block",
]

SEPARATOR = "═" * 46
MEMORY_HEADER = "MEMORY (your personal notes)"
USER_HEADER = "USER PROFILE (who the user is)"


def render_cap(limit: int) -> int:
    """Characters of content shown before the head/tail truncation applies."""
    return max(limit * 2, 4000)


def render_block(target: Target, entries: Sequence[str], limit: int) -> str:
    """The snapshot block for `entries` of `target` under `limit`, exactly as Hermes renders it."""
    return render_titled_block(USER_HEADER if target is Target.USER else MEMORY_HEADER, entries, limit)


def render_titled_block(title: str, entries: Sequence[str], limit: int) -> str:
    """A block in Hermes' snapshot layout under any title (the peer card uses "PEER CARD (name)")."""
    if not entries:
        return ""
    content = serialize_entries(entries)
    current = len(content)
    pct = usage_percent(current, limit)

    cap = render_cap(limit)
    if current > cap:
        head = int(cap * 0.7)
        tail = int(cap * 0.2)
        omitted = current - head - tail
        marker = (
            f"\n\n[... {omitted:,} chars truncated — memory over budget "
            f"({current:,}/{limit:,}); consolidate via memory(action=remove/replace) ...]\n\n"
        )
        content = content[:head] + marker + content[-tail:]

    over = " ⚠ OVER BUDGET" if current > limit else ""
    header = f"{title} [{pct}% — {current:,}/{limit:,} chars{over}]"
    return f"{SEPARATOR}\n{header}\n{SEPARATOR}\n{content}"
