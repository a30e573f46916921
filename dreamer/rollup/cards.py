"""Summary cards: the reflect request that asks for them and the parsing of what comes back.

Pure. A card keeps the ids of the units it came from; an answer that is empty or content-free
("I don't have information ...") means "no cards", not an error.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

CARD_KINDS = ("identity", "attribute", "preference", "relationship", "instruction", "event", "fact")
MAX_CARD_CHARS = 400

CARDS_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "properties": {
        "cards": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "text": {"type": "string", "description": "One durable fact, self-contained."},
                    "kind": {"type": "string", "enum": list(CARD_KINDS)},
                    "source_ids": {
                        "type": "array",
                        "items": {"type": "string"},
                        "description": "Ids of the memories this card summarises.",
                    },
                },
                "required": ["text", "kind", "source_ids"],
            },
        }
    },
    "required": ["cards"],
}

_CONTENT_FREE = re.compile(
    r"^\s*(i\s+(do\s*n[o']t|don’t|cannot|can't|can not)\s+(have|find|see)|"
    r"(there\s+is|there's)\s+no\s+(relevant\s+)?(information|memor)|no\s+(relevant\s+)?"
    r"(information|memories)|none\b|n/?a\b|nothing\b)",
    re.IGNORECASE,
)


@dataclass(frozen=True, slots=True)
class CardDraft:
    """A card before dedup: its text, a kind, and the source unit ids it came from."""

    text: str
    kind: str
    source_ids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class SourceUnit:
    """What the summariser needs of a unit."""

    id: str
    text: str


def is_content_free(text: str) -> bool:
    """True for empty answers and the "I don't have information" family."""
    return not text.strip() or bool(_CONTENT_FREE.match(text))


def reflect_query(units: Sequence[SourceUnit], directive: str, max_cards: int) -> str:
    """The one reflect question of a run: summarise exactly these new memories into cards."""
    lines = [
        "Summarise the new memories listed below into at most "
        f"{max_cards} durable summary cards for a long-term global memory.",
        "Each card states one stable fact in one self-contained sentence, merges memories that say "
        "the same thing, keeps every number, date, version, name and negation exactly, and lists "
        "the ids of the memories it came from in source_ids.",
        "Skip small talk and anything transient.",
    ]
    if directive.strip():
        lines.append(f"Profile directive: {directive.strip()}")
    lines.append("New memories:")
    lines.extend(f"- [{u.id}] {trim_card_text(u.text, 600)}" for u in units)
    return "\n".join(lines)


def trim_card_text(text: str, limit: int = MAX_CARD_CHARS) -> str:
    """Collapse whitespace and cut to at most ``limit`` characters at a word boundary."""
    collapsed = " ".join(text.split())
    if len(collapsed) <= limit:
        return collapsed
    cut = collapsed[: limit - 1]
    boundary = cut.rfind(" ")
    if boundary > 0:
        cut = cut[:boundary]
    return cut.rstrip(" ,;:-") + "…"


def parse_reflect_cards(
    structured: Mapping[str, Any] | None,
    text: str,
    units: Sequence[SourceUnit],
    max_cards: int,
) -> list[CardDraft]:
    """Cards from a reflect answer, every one tied to known source units.

    Source ids the model invented are dropped; a card left with none is tied to the unit whose
    words it shares most (so provenance is never empty). Content-free answers give no cards.
    """
    raw_cards: list[Any] = []
    if isinstance(structured, Mapping):
        value = structured.get("cards")
        if isinstance(value, list):
            raw_cards = value
    if not raw_cards:
        return []
    known = {u.id for u in units}
    drafts: list[CardDraft] = []
    for raw in raw_cards:
        if not isinstance(raw, Mapping):
            continue
        card_text = raw.get("text")
        if not isinstance(card_text, str) or is_content_free(card_text):
            continue
        card_text = trim_card_text(card_text)
        kind = raw.get("kind")
        kind = kind.lower() if isinstance(kind, str) and kind.lower() in CARD_KINDS else "fact"
        ids_raw = raw.get("source_ids")
        ids = (
            tuple(dict.fromkeys(i for i in ids_raw if isinstance(i, str) and i in known))
            if isinstance(ids_raw, list)
            else ()
        )
        if not ids:
            best = _best_source(card_text, units)
            if best is None:
                continue
            ids = (best,)
        drafts.append(CardDraft(card_text, kind, ids))
        if len(drafts) >= max_cards:
            break
    return drafts


_WORD = re.compile(r"\w+", re.UNICODE)


def _best_source(text: str, units: Sequence[SourceUnit]) -> str | None:
    words = {w.casefold() for w in _WORD.findall(text)}
    best_id, best = None, 0.0
    for u in units:
        other = {w.casefold() for w in _WORD.findall(u.text)}
        if not other:
            continue
        overlap = len(words & other) / len(words | other)
        if overlap > best:
            best_id, best = u.id, overlap
    return best_id
