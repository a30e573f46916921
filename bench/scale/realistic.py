"""The realistic ledger (``--ledger realistic``): cards made of LoCoMo's memory sentences whose names,
numbers, dates and noun phrases are refilled card by card, with names from a pool that grows with
the ledger as a real vocabulary grows.

Card ``i`` is a pure function of ``i`` (seeded), so worker processes build any range of cards alone:
one to three consecutive memories of one LoCoMo session and kind (templates.py), each slot filled
once per card (the same original name is the same new name in all its sentences): a name from
the pool (:func:`name_pool`), a number of as many digits, a date, time, year, month or weekday
drawn anew, a noun phrase kept or drawn from the phrases LoCoMo has after a determiner (by their
frequency). Of the 20 new units of the measured run half restate a ledger card in other words
(the card's paraphrase in LoCoMo, filled with that card's values), half are other memories with
the ledger's names.
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from bench.scale.templates import (
    DATE,
    MONTH,
    MONTHS,
    NAME,
    NUMBER,
    PHRASE,
    TIME,
    WEEKDAY,
    WEEKDAYS,
    YEAR,
    Slot,
    Template,
    Templates,
    is_plural,
    load_templates,
)
from dreamer.rollup.cards import MAX_CARD_CHARS
from dreamer.text import content_tokens

# Heaps' law, distinct words ~ K * sentences ** BETA, fitted on LoCoMo itself: its 2,456 memories
# (five conversations) hold 2,203 distinct content words (stemmed, stopwords out), and from its
# first 300 memories to all of them the count grows with an exponent of 0.62. BETA = 0.6 is that
# rounded into the 0.4-0.6 usually measured on English text; K = 2,203 / 2,456 ** 0.6 = 20.4,
# rounded. The templates' own words (1,985 outside names and values) stop growing once every
# memory has been used, so the name pool supplies the rest: 4,922 names at 10k cards, 25,512 at
# 100k, 107,486 at 1M.
HEAPS_K = 20.0
HEAPS_BETA = 0.6
#: How many consecutive memories a card holds, with their weights (mean 1.7).
SENTENCE_WEIGHTS = ((1, 0.5), (2, 0.3), (3, 0.2))
SENTENCES_PER_CARD = sum(n * w for n, w in SENTENCE_WEIGHTS)
#: The chance a noun phrase keeps its LoCoMo words (else it is drawn from the phrases).
KEEP_PHRASE = 0.25
SEED = 20_231_202
#: Recorded with cached files: bump when a card's text for an index changes.
GENERATOR_VERSION = "r1"
#: Of the new units, every second one restates a ledger card, one of the first RESTATED_WITHIN.
RESTATE_EVERY = 2
RESTATED_WITHIN = 10_000
#: Index of the first unit outside the ledger (new and old units): beyond any card's.
UNIT_BASE = 10**9

# Minted names: three syllables and a closing consonant, a bijection of the id scrambled so that
# neighbouring ids do not look alike; no stemmer suffix ("s", "e", "ed", "ing") can end one.
_ONSETS = "b d f g k l m n p r t v z br dr gr kr tr"
_SYLLABLES = tuple(o + v for o in _ONSETS.split() for v in "aeiou")
_CODAS = ("n", "r", "l", "k", "th", "x", "m")
_NAME_CODES = len(_CODAS) * len(_SYLLABLES) ** 3
_SCRAMBLE = 1_000_003  # a prime, so coprime with the number of codes


def mint_name(name_id: int) -> str:
    """The name with this id: distinct ids give distinct names (for ids below about 5 million)."""
    code = (name_id * _SCRAMBLE + 12_345) % _NAME_CODES
    code, coda = divmod(code, len(_CODAS))
    n = len(_SYLLABLES)
    syllables = [_SYLLABLES[code % n], _SYLLABLES[(code // n) % n], _SYLLABLES[(code // n // n) % n]]
    return ("".join(syllables) + _CODAS[coda]).capitalize()


def law_vocabulary(cards: float) -> float:
    """Distinct content words Heaps' law expects of a ledger of ``cards`` cards."""
    return HEAPS_K * float((SENTENCES_PER_CARD * cards) ** HEAPS_BETA)


def name_pool(cards: int, templates: Templates) -> int:
    """How many names exist once ``cards`` cards are written: what the law expects beyond the
    templates' own words, and never fewer than LoCoMo's density of names at that size."""
    sentences = SENTENCES_PER_CARD * cards
    beyond = law_vocabulary(cards) - templates.fixed_vocabulary
    locomo_like = templates.names * float((sentences / len(templates.items)) ** HEAPS_BETA)
    return max(1, math.floor(max(beyond, locomo_like)))


_ARTICLE = re.compile(r"(^|\s)([Aa])n?(\s+)$")
_DIGITS = re.compile(r"\d+")
_SENTENCE_END = re.compile(r"[.!?][\"'”’)]*$")
_DAY = re.compile(r"\b\d{1,2}(st|nd|rd|th)?\b")


def _ordinal(day: int) -> str:
    if 10 <= day % 100 <= 20:
        return "th"
    return {1: "st", 2: "nd", 3: "rd"}.get(day % 10, "th")


@dataclass
class CardFill:
    """One card's values: every slot's replacement, drawn once (so repeated names stay one person)."""

    pool_before: int
    new_ids: list[int]
    templates: Templates
    rng: random.Random
    values: dict[Slot, str] = field(default_factory=dict)
    used_names: set[int] = field(default_factory=set)

    def value(self, slot: Slot) -> str:
        if slot not in self.values:
            self.values[slot] = self._draw(slot)
        return self.values[slot]

    def _name(self) -> str:
        if self.new_ids:
            name_id = self.new_ids.pop(0)
        else:
            name_id = 0
            # Log-uniform over the pool, so name k is used about 1/k as often as the first (Zipf):
            # a few people recur on many cards, as a user's close circle does; distinct in a card.
            for _ in range(8):
                name_id = int(self.pool_before ** self.rng.random()) - 1
                if name_id not in self.used_names:
                    break
        self.used_names.add(name_id)
        return mint_name(name_id)

    def _number(self, original: str) -> str:
        def digits(m: re.Match[str]) -> str:
            width = len(m.group())
            low = 10 ** (width - 1) if width > 1 else 1
            return str(low + int(self.rng.random() * (10**width - low)))

        return _DIGITS.sub(digits, original)

    def _date(self, original: str) -> str:
        day = 1 + int(self.rng.random() * 28)
        text = re.sub(r"\b\d{4}\b", str(1995 + int(self.rng.random() * 35)), original)
        text = _DAY.sub(lambda m: f"{day}{_ordinal(day) if m.group(1) else ''}", text)
        month = MONTHS[int(self.rng.random() * 12)]
        return re.sub("|".join(MONTHS), month, text)

    def _phrase(self, slot: Slot) -> str:
        if self.rng.random() < KEEP_PHRASE:
            return slot.original
        plural = is_plural(slot.original)
        pool = self.templates.phrases_by_context.get((slot.context, plural)) or (
            self.templates.plural_phrases if plural else self.templates.singular_phrases
        )
        return pool[int(self.rng.random() * len(pool))] if pool else slot.original

    def _draw(self, slot: Slot) -> str:
        pick = self.rng.random
        if slot.kind == NAME:
            return self._name()
        if slot.kind == PHRASE:
            return self._phrase(slot)
        if slot.kind == DATE:
            return self._date(slot.original)
        if slot.kind == TIME:
            hour, minute = 1 + int(pick() * 12), int(pick() * 60)
            return re.sub(r"^\d{1,2}:\d{2}", f"{hour}:{minute:02d}", slot.original)
        if slot.kind == YEAR:
            return str(1995 + int(pick() * 35))
        if slot.kind == MONTH:
            return MONTHS[int(pick() * 12)]
        if slot.kind == WEEKDAY:
            plural = "s" if slot.original.endswith("s") else ""
            return WEEKDAYS[int(pick() * 7)] + plural
        if slot.kind == NUMBER:
            return self._number(slot.original)
        return slot.original

    def render(self, template: Template) -> str:
        """The template's sentence with this card's values ("a"/"an" agreeing with a new value)."""
        out: list[str] = []
        for segment in template.segments:
            if isinstance(segment, str):
                out.append(segment)
                continue
            value = self.value(segment)
            if out and (m := _ARTICLE.search(out[-1])) and value:
                article = m.group(2) + ("n" if value[0].lower() in "aeiou" else "")
                out[-1] = out[-1][: m.start(2)] + article + m.group(3)
            out.append(value)
        sentence = "".join(out).strip()
        # Some LoCoMo events end without a stop; a card's sentences each end as a sentence does.
        return sentence if _SENTENCE_END.search(sentence) else sentence + "."


class RealisticLedger:
    """Cards, new units and old units of the realistic ledger, from the LoCoMo files in ``data``."""

    kind = "realistic"

    def __init__(self, data: Path) -> None:
        self.data = data
        self.templates = load_templates(data)

    def _fill(self, i: int, pool: int | None = None) -> tuple[CardFill, list[Template]]:
        """Card ``i``'s memories and values; with ``pool``, names only reused from a pool of that
        many (a unit outside the ledger's order)."""
        rng = random.Random(SEED * 1_000_003 + i)
        items = self.templates.items
        roll, wanted = rng.random(), SENTENCE_WEIGHTS[-1][0]
        for n, weight in SENTENCE_WEIGHTS:
            if roll < weight:
                wanted = n
                break
            roll -= weight
        first = int(rng.random() * len(items))
        chosen = [items[first]]
        for k in range(first + 1, min(len(items), first + wanted)):
            if items[k].session != chosen[0].session or items[k].kind != chosen[0].kind:
                break
            chosen.append(items[k])
        if pool is not None:
            return CardFill(max(1, pool), [], self.templates, rng), chosen
        before = name_pool(i, self.templates) if i > 0 else 0
        after = name_pool(i + 1, self.templates)
        return CardFill(max(1, before), list(range(before, after)), self.templates, rng), chosen

    @staticmethod
    def _text(fill: CardFill, chosen: Sequence[Template]) -> str:
        """One to three sentences, at most the card cap (later sentences dropped)."""
        text = ""
        for template in chosen:
            joined = f"{text} {fill.render(template)}".strip()
            if len(joined) > MAX_CARD_CHARS and text:
                break
            text = joined[:MAX_CARD_CHARS]
        return text

    def card_text(self, i: int) -> str:
        """Card ``i`` of the ledger."""
        return self._text(*self._fill(i))

    def restated(self, i: int) -> str | None:
        """Card ``i``'s first sentence in other words (its LoCoMo paraphrase, with the card's
        values), or None when that memory has no paraphrase."""
        fill, chosen = self._fill(i)
        other = chosen[0].paraphrase
        if other < 0:
            return None
        self._text(fill, chosen)  # the card's own values first, as the card drew them
        return fill.render(self.templates.items[other])[:MAX_CARD_CHARS]

    def new_unit_texts(self, size: int, count: int) -> list[str]:
        """The measured run's new units for a ledger of ``size`` cards: every second one restates
        one of the ledger's first cards, the others are memories outside the ledger with its names.
        From ``RESTATED_WITHIN`` cards on, the same sentences at every size, only the names differ."""
        pool = name_pool(size, self.templates)
        return [
            self._restatement(min(size, RESTATED_WITHIN), k)
            if k % RESTATE_EVERY == 0 and size > 0
            else self._text(*self._fill(UNIT_BASE + k, pool))
            for k in range(count)
        ]

    def _restatement(self, within: int, k: int) -> str:
        start = int((k * 0.6180339887498949) % 1.0 * within)
        for step in range(within):
            text = self.restated((start + step) % within)
            if text:
                return text
        return self.card_text(k)

    def old_unit_texts(self, size: int, count: int, offset: int) -> list[str]:
        """Units of the profile bank already rolled up: memories outside the ledger, past the new ones."""
        pool = name_pool(size, self.templates)
        return [self._text(*self._fill(UNIT_BASE + offset + k, pool)) for k in range(count)]


def distinct_content_words(texts: Sequence[str]) -> int:
    """Distinct content words (stemmed, stopwords out) of the texts: the vocabulary Heaps' law counts."""
    return len({word for text in texts for word in content_tokens(text)})
