"""Summary cards: the reflect request that asks for them and the parsing of what comes back.

Pure. A card keeps the ids of the units it came from; an answer that is empty or content-free
("I don't have information ...") means "no cards", not an error.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal, get_args

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    ValidatorFunctionWrapHandler,
    field_validator,
)

from dreamer.backends.reflect_schema import reflect_response_schema

MAX_CARD_CHARS = 400

CardKind = Literal["identity", "attribute", "preference", "relationship", "instruction", "event", "fact"]
CARD_KINDS: tuple[str, ...] = get_args(CardKind)


def _known_kind(value: Any) -> Any:
    """A kind the model named in any case, else ``fact`` (an unknown kind does not lose the card)."""
    return value.lower() if isinstance(value, str) and value.lower() in CARD_KINDS else "fact"


def _string_ids(value: Any) -> Any:
    """The string entries of a list of ids; anything else is no ids (the card is tied by its words)."""
    return [i for i in value if isinstance(i, str)] if isinstance(value, list) else []


class CardAnswer(BaseModel):
    """One card as the reflect answer gives it."""

    model_config = ConfigDict(strict=True, extra="ignore", frozen=True)

    text: str = Field(description="One durable fact, self-contained.")
    kind: Annotated[CardKind, BeforeValidator(_known_kind)] = "fact"
    source_ids: Annotated[list[str], BeforeValidator(_string_ids)] = Field(
        default_factory=list, description="Ids of the memories this card summarises."
    )


class CardsAnswer(BaseModel):
    """The structured reflect answer: the cards. A card that does not validate is dropped alone."""

    model_config = ConfigDict(strict=True, extra="ignore", frozen=True)

    cards: list[CardAnswer]

    @field_validator("cards", mode="wrap")
    @classmethod
    def _drop_unreadable_cards(cls, value: Any, handler: ValidatorFunctionWrapHandler) -> list[CardAnswer]:
        if not isinstance(value, list):
            return handler(value)  # type: ignore[no-any-return]
        kept: list[CardAnswer] = []
        for raw in value:
            try:
                kept.extend(handler([raw]))
            except ValidationError:
                continue
        return kept


#: The response schema of the summarising reflect.
CARDS_SCHEMA: Mapping[str, Any] = reflect_response_schema(CardsAnswer)

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
    lines.extend(f"- [{u.id}] {' '.join(u.text.split())}" for u in units)
    return "\n".join(lines)


#: A sentence ends at ".", "!", "?" or "…" (closing quotes and brackets after it) followed by
#: space and a capital, a digit or an opening quote: "v2.0", "e.g. this" and "3.5 GB" go on.
_SENTENCE_BREAK = re.compile(r"(?<=[.!?…])([\"'”’)\]]*)\s+(?=[\"'“‘(\[]?[A-Z0-9À-ÖØ-Þ])")


def sentences(text: str) -> list[str]:
    """The sentences of a text, whitespace collapsed; a text without a break is one sentence."""
    collapsed = " ".join(text.split())
    if not collapsed:
        return []
    parts, start = [], 0
    for match in _SENTENCE_BREAK.finditer(collapsed):
        parts.append(collapsed[start : match.start() + len(match.group(1))].strip())
        start = match.end()
    parts.append(collapsed[start:].strip())
    return [p for p in parts if p]


def split_long(text: str, limit: int = MAX_CARD_CHARS) -> list[str]:
    """A text cut at sentence boundaries into pieces of at most ``limit`` characters, whitespace
    collapsed; never inside a sentence: a sentence longer than ``limit`` is a piece of its own,
    whole. A text within ``limit`` is one piece."""
    collapsed = " ".join(text.split())
    if len(collapsed) <= limit:
        return [collapsed] if collapsed else []
    pieces: list[str] = []
    for sentence in sentences(collapsed):
        if pieces and len(pieces[-1]) + 1 + len(sentence) <= limit:
            pieces[-1] = f"{pieces[-1]} {sentence}"
        else:
            pieces.append(sentence)
    return pieces


def source_pieces(units: Sequence[SourceUnit], limit: int = MAX_CARD_CHARS) -> list[SourceUnit]:
    """The summariser's input: each unit whole, or a unit longer than ``limit`` as its pieces
    (`split_long`), each under the unit's id, so that no card has to cut a fact off."""
    return [SourceUnit(u.id, piece) for u in units for piece in split_long(u.text, limit)]


def parse_reflect_cards(
    structured: Mapping[str, Any] | None,
    text: str,
    units: Sequence[SourceUnit],
    max_cards: int,
) -> list[CardDraft]:
    """Cards from a reflect answer, every one tied to known source units.

    Source ids the model invented are dropped; a card left with none keeps no ids, and grounding
    (`dreamer.rollup.grounding`) gives it the units it holds. Content-free answers give no cards.
    The text is never cut: grounding rejects a card longer than the cap, so no fact is cut off.
    """
    try:
        answer = CardsAnswer.model_validate(
            dict(structured) if isinstance(structured, Mapping) else structured
        )
    except ValidationError:
        return []
    known = {u.id for u in units}
    drafts: list[CardDraft] = []
    for card in answer.cards:
        if is_content_free(card.text):
            continue
        card_text = " ".join(card.text.split())
        ids = tuple(dict.fromkeys(i for i in card.source_ids if i in known))
        drafts.append(CardDraft(card_text, card.kind, ids))
        if len(drafts) >= max_cards:
            break
    return drafts
