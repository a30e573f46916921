"""Cards without a language model: cluster paraphrased units and keep the most informative wording.

Used when the backend's reflect has no LLM (the embedded store) or ``rollup.use_reflect = "never"``.
Units that restate one fact (by the same lexical rule dedup uses, protected details included)
collapse into one card that lists all of their ids as sources. A unit that a fuller unit of the
batch covers (`similarity.covered_by`) then joins the fuller one's card, its sentence kept unless
the fuller one says it outright. Units come in salience order and cards keep that order, so the
result depends only on the input.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from dreamer.rollup.cards import MAX_CARD_CHARS, CardDraft, SourceUnit
from dreamer.rollup.dedup import DedupThresholds, lexical_duplicate
from dreamer.rollup.similarity import TextProfile, compare, covered_by, profile_text, says_outright
from dreamer.text import has_hidden_characters

__all__ = [
    "MAX_CARD_CHARS",
    "CardKind",
    "InvalidExtractionError",
    "SourceUnit",
    "classify",
    "extract_cards",
    "own_card",
]

#: Longest card text; longer text is cut at a word boundary and marked with "…".


class InvalidExtractionError(ValueError):
    """The extraction was asked for something impossible (a negative number of cards)."""


class CardKind(StrEnum):
    """What a card is about, for grouping and for the peer card."""

    IDENTITY = "identity"
    PREFERENCE = "preference"
    RELATIONSHIP = "relationship"
    INSTRUCTION = "instruction"
    FACT = "fact"
    EVENT = "event"


class TextUnit(Protocol):
    """Anything with an id and a text: a `SourceUnit`, a `salience.SalienceInput`, a backend unit."""

    @property
    def id(self) -> str: ...

    @property
    def text(self) -> str: ...


_WHITESPACE = re.compile(r"\s+")


# Cue words per kind, checked in this order: the first kind with a cue wins.
_INSTRUCTION = re.compile(
    r"^(?:always|never|please|do not|dont|avoid|use|remember to|make sure)\b"
    r"|\b(?:should|must|wants? (?:you|the assistant|me) to|asks? (?:you|the assistant) to|prefers? that)\b"
)
_PREFERENCE = re.compile(
    r"\b(?:likes?|liked|loves?|loved|enjoys?|enjoyed|prefers?|preferred|favou?rite|hates?|dislikes?"
    r"|fan of|interested in|passionate about|keen on|into)\b"
)
_RELATIONSHIP = re.compile(
    r"\b(?:friends?|friendship|wife|husband|partner|spouse|married|dating|girlfriend|boyfriend|mother|father"
    r"|mom|mum|dad|parents?|sister|brother|siblings?|daughter|son|kids?|children|child|family|grandmother"
    r"|grandfather|grandparents?|cousin|aunt|uncle|colleagues?|coworkers?|boss|manager|mentor|roommate"
    r"|neighbou?r|teammates?)\b"
)
_IDENTITY = re.compile(
    r"\b(?:is an?|am an?|works as|works at|lives in|is from|grew up|was born|born in|years old"
    r"|identifies as|name is|is named|pronouns|nationality|native)\b"
)
_EVENT = re.compile(
    r"\b(?:yesterday|today|tonight|ago|last (?:week|weekend|month|year|night|monday|tuesday|wednesday"
    r"|thursday|friday|saturday|sunday)|recently|this (?:week|weekend|morning|month)"
    r"|went|won|met|got|took|gave|bought|lost|began|wrote|came|left|found|sent|built|held|visited"
    r"|attended|started|finished|joined|moved|adopted|launched|released|deployed|upgraded|installed)\b"
)


def classify(text: str) -> CardKind:
    """A rule-based kind: instruction, preference, relationship, identity, event, else fact.

    >>> classify("Sam enjoys sailing on weekends.")
    <CardKind.PREFERENCE: 'preference'>
    """
    lowered = _WHITESPACE.sub(" ", text.casefold().replace("’", "'")).strip()
    lowered = lowered.replace("n't", " not")
    for kind, pattern in (
        (CardKind.INSTRUCTION, _INSTRUCTION),
        (CardKind.PREFERENCE, _PREFERENCE),
        (CardKind.RELATIONSHIP, _RELATIONSHIP),
        (CardKind.IDENTITY, _IDENTITY),
        (CardKind.EVENT, _EVENT),
    ):
        if pattern.search(lowered):
            return kind
    return CardKind.FACT


def _restate(a: TextProfile, b: TextProfile, thresholds: DedupThresholds) -> bool:
    forward = compare(a, b)
    if forward.changed:
        return False
    return lexical_duplicate(forward, thresholds) or lexical_duplicate(compare(b, a), thresholds)


#: Share of a unit's content words that a fuller unit of the same batch must say, its protected
#: details included, for the two to share one card (`covered_by`). Measured: docs/benchmarks.md.
COVER_SHARE = 0.6


@dataclass
class _Card:
    """A card being built: its clusters of restatements, its texts and the content words they say."""

    head: TextProfile
    clusters: list[int]
    texts: list[str]
    words: set[str]
    length: int


def _sentence(text: str) -> str:
    """The text as a sentence to join with others (ending in a stop)."""
    text = " ".join(text.split())
    return text if text.endswith((".", "!", "?", "…")) else f"{text}."


def _fold_covered(reps: Sequence[TextProfile], cover: float) -> list[_Card]:
    """Cards from clusters' richest texts: a text whose content words a fuller one says (share
    ``cover`` or more, its protected details repeated: `covered_by`) joins its card, and its
    sentence is added to the card unless the card's first text says it outright (`says_outright`),
    within `MAX_CARD_CHARS`; a sentence that does not fit keeps a card of its own."""
    cards: list[_Card] = []
    for index in sorted(range(len(reps)), key=lambda i: (-len(reps[i].content_set), i)):
        rep = reps[index]
        for card in cards:
            share = covered_by(rep, card.head)
            if share is None or share < cover:
                continue
            if not (rep.content_set <= card.words and says_outright(rep, card.head)):
                sentence = _sentence(rep.text)
                if card.length + 1 + len(sentence) > MAX_CARD_CHARS:
                    continue
                card.texts.append(rep.text)
                card.words |= rep.content_set
                card.length += 1 + len(sentence)
            card.clusters.append(index)
            break
        else:
            cards.append(_Card(rep, [index], [rep.text], set(rep.content_set), len(_sentence(rep.text))))
    return sorted(cards, key=lambda card: min(card.clusters))


def extract_cards(
    units: Sequence[TextUnit],
    max_cards: int,
    thresholds: DedupThresholds | None = None,
    *,
    cover: float | None = None,
) -> list[CardDraft]:
    """Turn units (most salient first) into at most `max_cards` cards, one per fact.

    First, units that restate each other cluster: a unit joins the first cluster all of whose
    members it restates, so chains of loose similarity cannot pull unrelated facts together; the
    cluster's text is the member with the most distinct content words (the earliest on a tie).
    Then a cluster whose text a fuller one covers (see `COVER_SHARE`) shares that one's card; its
    sentence follows the fuller one's unless that one says it outright, so no fact of a unit is
    lost. Cards keep the salience order of their first unit; each lists the ids of all of its
    units. ``cover`` is that share (default `COVER_SHARE`; above 1.0 nothing is folded).
    """
    if max_cards < 0:
        raise InvalidExtractionError(f"cannot extract {max_cards} cards: pass 0 or more")
    if cover is None:
        cover = COVER_SHARE
    limits = thresholds if thresholds is not None else DedupThresholds()
    clusters: list[list[tuple[TextUnit, TextProfile]]] = []
    for unit in units:
        if not unit.text.strip():
            continue
        profile = profile_text(unit.text)
        for cluster in clusters:
            if all(_restate(profile, member, limits) for _, member in cluster):
                cluster.append((unit, profile))
                break
        else:
            clusters.append([(unit, profile)])

    # The fullest member; of equals, one without invisible characters, then the earliest.
    reps = [
        max(
            enumerate(cluster),
            key=lambda item: (
                len(item[1][1].content_set),
                not has_hidden_characters(item[1][0].text),
                -item[0],
            ),
        )[1][1]
        for cluster in clusters
    ]
    cards: list[CardDraft] = []
    for card in _fold_covered(reps, cover)[:max_cards]:
        # Never cut: the fold keeps a card within the cap, and a longer unit comes in pieces
        # (`cards.source_pieces`); a single sentence over the cap is kept whole.
        texts = card.texts
        text = " ".join(texts[0].split()) if len(texts) == 1 else " ".join(map(_sentence, texts))
        sources = tuple(unit.id for index in sorted(card.clusters) for unit, _ in clusters[index])
        cards.append(CardDraft(text=text, kind=classify(card.head.text), source_ids=sources))
    return cards


def own_card(unit: TextUnit) -> CardDraft:
    """A card of a unit's own text (whitespace collapsed), citing it alone: what a unit no other
    card holds becomes."""
    return CardDraft(text=" ".join(unit.text.split()), kind=classify(unit.text), source_ids=(unit.id,))
