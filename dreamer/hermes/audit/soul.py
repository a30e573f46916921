"""SOUL.md as the audit sees it: its blocks, whether it is stale, and which of its blocks belong in
MEMORY.md. Pure: the file's text and times come in as values (`soul_file.py` reads them).

SOUL.md is Hermes' persona file: free Markdown read at every session start, one per profile. Its
blocks are its paragraphs and list items; headings, comments and front matter are structure, not
blocks. It is **stale** when it is identical to the default profile's SOUL.md (a profile that never
got its own persona) or when it is more than `stale_days` older than both the profile's config.yaml
and its newest memory file (the profile moved on, its persona did not). Persona entries in the
memory files move into SOUL.md (planner.py); a block of SOUL.md that is a confident technical
config (hosts, URLs, ports) moves to MEMORY.md, where the audit verifies it; persona, operating
rules and everything else stay. Why: docs/design/hermes-audit.md.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from dreamer.hermes.audit.classify import Category, Classification
from dreamer.hermes.memory.entries import joined_length

__all__ = [
    "SOUL_FILENAME",
    "SoulBlock",
    "SoulFacts",
    "SoulMove",
    "plan_soul_moves",
    "soul_blocks",
    "stale_reasons",
]

SOUL_FILENAME = "SOUL.md"
_LIST_ITEM = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")


@dataclass(frozen=True)
class SoulBlock:
    """One paragraph or list item of SOUL.md: its text as an entry, and its lines as written."""

    text: str
    raw: str


@dataclass(frozen=True)
class SoulFacts:
    """What staleness is judged from: SOUL.md's text and time, the default profile's, the others'."""

    text: str
    modified: datetime
    default_text: str | None = None
    default_is_same_file: bool = False
    config_modified: datetime | None = None
    memory_modified: datetime | None = None


@dataclass(frozen=True)
class SoulMove:
    """A block of SOUL.md that moves to MEMORY.md."""

    block: SoulBlock
    reason: str


def _is_structure(line: str) -> bool:
    stripped = line.strip()
    return stripped.startswith(("#", "<!--", "---")) or stripped.endswith("-->")


def soul_blocks(raw: str) -> list[SoulBlock]:
    """The paragraphs and list items of SOUL.md, in order (headings, comments, front matter left out)."""
    blocks: list[SoulBlock] = []
    current: list[str] = []

    def close() -> None:
        if current:
            raw_block = "\n".join(current)
            text = " ".join(_LIST_ITEM.sub("", line, count=1).strip() for line in current).strip()
            if text:
                blocks.append(SoulBlock(text, raw_block))
            current.clear()

    for line in raw.split("\n"):
        if not line.strip() or _is_structure(line):
            close()
        elif _LIST_ITEM.match(line):
            close()
            current.append(line)
        else:
            current.append(line)
    close()
    return blocks


def _same(a: str, b: str) -> bool:
    return " ".join(a.split()) == " ".join(b.split())


def stale_reasons(facts: SoulFacts, stale_days: int) -> tuple[str, ...]:
    """Why SOUL.md is stale ("" reasons: it is fresh)."""
    reasons: list[str] = []
    if (
        facts.default_text is not None
        and not facts.default_is_same_file
        and _same(facts.text, facts.default_text)
    ):
        reasons.append(
            "it is identical to the default profile's SOUL.md: this profile never got its own persona"
        )
    margin = timedelta(days=stale_days)
    others = [("config.yaml", facts.config_modified), ("the memory files", facts.memory_modified)]
    known = [(name, when) for name, when in others if when is not None]
    if known and all(when - facts.modified > margin for _, when in known):
        behind = ", ".join(f"{(when - facts.modified).days} days before {name}" for name, when in known)
        reasons.append(f"it was last changed {facts.modified.date().isoformat()}, {behind}")
    return tuple(reasons)


def plan_soul_moves(
    blocks: Sequence[SoulBlock],
    classifications: Mapping[int, Classification],
    final_memory: Sequence[str],
    memory_limit: int,
) -> tuple[list[SoulMove], list[tuple[SoulBlock, str]]]:
    """The blocks that move to MEMORY.md (confident technical configs that fit, in order), and the
    ones that would but do not fit, with the reason."""
    moves: list[SoulMove] = []
    left: list[tuple[SoulBlock, str]] = []
    memory = list(final_memory)
    for index, block in enumerate(blocks):
        classification = classifications[index]
        if not (classification.confident and classification.category is Category.TECHNICAL_CONFIG):
            continue
        if block.text in memory:
            continue
        size = joined_length([*memory, block.text])
        if size > memory_limit:
            left.append(
                (
                    block,
                    f"move to MEMORY.md not possible: it would put MEMORY.md at "
                    f"{size:,}/{memory_limit:,} chars",
                )
            )
            continue
        memory.append(block.text)
        moves.append(
            SoulMove(block, f"{Category.TECHNICAL_CONFIG} belongs in MEMORY.md, where it is verified")
        )
    return moves, left
