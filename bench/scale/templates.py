"""The LoCoMo memories as sentence templates for the realistic ledger: each sentence with its names,
numbers, dates and noun phrases marked as slots that a card fills with values of its own.

Read with ``bench.locomo.data`` (observations, summary sentences, events). A slot is found by
patterns, not by a parser: a date, a time, a year, a number, a month or weekday; a run of
capitalised words that is not a sentence's first function word (a name: of a person, a place, a
pet, a title); the words after a determiner up to the next function word (a noun phrase). Each
sentence also knows its paraphrase: another memory of the same session, of another kind, telling
much the same (an observation and the event or summary sentence it restates), if there is one.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from bench.locomo.data import load_conversations
from dreamer.text import STOPWORDS, content_tokens

#: Slot kinds.
NAME = "name"
NUMBER = "number"
YEAR = "year"
TIME = "time"
DATE = "date"
MONTH = "month"
WEEKDAY = "weekday"
PHRASE = "phrase"

MONTHS = (
    "January", "February", "March", "April", "May", "June",
    "July", "August", "September", "October", "November", "December",
)  # fmt: skip
WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")

_M = "(?:" + "|".join(MONTHS) + ")"
_ORD = r"(?:st|nd|rd|th)?"
# The values a card redraws, most specific first: one alternation, so spans never overlap.
_VALUES = re.compile(
    rf"(?P<{DATE}>\b\d{{1,2}}{_ORD}\s+(?:of\s+)?{_M},?\s+\d{{4}}\b|\b{_M}\s+\d{{1,2}}{_ORD},?\s+\d{{4}}\b"
    rf"|\b{_M}\s+\d{{4}}\b|\b{_M}\s+\d{{1,2}}{_ORD}\b|\b\d{{1,2}}{_ORD}\s+{_M}\b)"
    rf"|(?P<{TIME}>\b\d{{1,2}}:\d{{2}}(?:\s?[ap]\.?m\.?)?(?![\w:]))"
    rf"|(?P<{MONTH}>\b{_M}\b)"
    rf"|(?P<{WEEKDAY}>\b(?:{'|'.join(WEEKDAYS)})s?\b)"
    rf"|(?P<{YEAR}>\b(?:19|20)\d{{2}}\b)"
    rf"|(?P<{NUMBER}>(?<![\w.])\d+(?:[.,]\d+)?(?![\w]))"
)
# A capitalised word ("Harry", "LeBron", "Spider-Man", "NYC") and runs of them ("Door Dash").
_CAPITAL = r"[A-Z][A-Za-z]*(?:-[A-Z]?[a-z]+)*"
_NAME_RUN = re.compile(rf"\b{_CAPITAL}(?:\s+{_CAPITAL})*")
_DETERMINERS = frozenset("a an the his her their my our its some another".split())
# Words a noun phrase stops before, besides the stopwords: verbs and conjunctions often after one.
_PHRASE_STOPS = frozenset(
    """
    named called who which that where while when because since until after before during
    went goes go gave give takes take took came come comes got gets felt feels found finds
    said says told tells showed shows made makes being been had has have was were is are
    helped helps brought brings kept keeps left leaves thinks thought wants wanted
    last next along based every each together
    """.split()
)
_PRONOUNS = frozenset("he she they it we i".split())
_WORD = re.compile(r"[A-Za-z][A-Za-z'’-]*")
#: The longest noun phrase taken as one slot (words after the determiner).
_PHRASE_WORDS = 3
#: Distinct phrases a context needs before a phrase of it is drawn from its own (else from all).
CONTEXT_CHOICES = 3
#: Shared content words (Jaccard) from which another memory of the session is a paraphrase.
PARAPHRASE_JACCARD = 0.3


@dataclass(frozen=True, slots=True)
class Slot:
    """A value of a sentence a card replaces: its kind and the text it had in LoCoMo; a noun
    phrase also the word and determiner before it ("play the"), which phrases it may become."""

    kind: str
    original: str
    context: str = field(default="", compare=False)


Segment = str | Slot


@dataclass(frozen=True, slots=True)
class Template:
    """One LoCoMo memory as literal text and slots; ``paraphrase``: the index of the memory of the
    same session that restates it in other words, or -1."""

    segments: tuple[Segment, ...]
    kind: str
    session: int
    paraphrase: int = -1

    def names(self) -> list[str]:
        """The name slots' originals, in order, each once."""
        return list(
            dict.fromkeys(s.original for s in self.segments if isinstance(s, Slot) and s.kind == NAME)
        )


@dataclass(frozen=True, slots=True)
class Templates:
    """Every LoCoMo memory as a template, grouped by session, and what cards fill the slots with."""

    items: tuple[Template, ...]
    #: Noun phrases found after a determiner (one entry per occurrence: drawing one is drawing
    #: by frequency), singular and plural apart so that "a" never gets a plural ...
    singular_phrases: tuple[str, ...]
    plural_phrases: tuple[str, ...]
    #: ... and by context ("play the": "guitar", "piano", ...) where one has several.
    phrases_by_context: Mapping[tuple[str, bool], tuple[str, ...]]
    #: Distinct content words of the templates outside their name, number and date slots.
    fixed_vocabulary: int
    #: Distinct names in LoCoMo and name slots per memory.
    names: int
    names_per_sentence: float


def is_plural(phrase: str) -> bool:
    last = phrase.rsplit(" ", 1)[-1]
    return last.endswith("s") and not last.endswith(("ss", "us", "is"))


def known_names(texts: Sequence[str]) -> frozenset[str]:
    """Capitalised words seen past a sentence's first word: the words that are names wherever they
    stand (a sentence's first word alone may be "The" or "They")."""
    seen: set[str] = set()
    for text in texts:
        for match in list(_WORD.finditer(text))[1:]:
            word = re.sub(r"['’]s$", "", match.group())
            if word[0].isupper() and word.casefold() not in STOPWORDS and len(word) > 1:
                seen.add(word)
    return frozenset(seen)


def speakers(directory: Path) -> frozenset[str]:
    """The two speakers of every conversation: names even where they only open sentences."""
    found: set[str] = set()
    for path in sorted(directory.glob("*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        found.update(data[key] for key in ("speaker_a", "speaker_b") if isinstance(data.get(key), str))
    return frozenset(found)


def _value_spans(text: str) -> list[tuple[int, int, Slot]]:
    return [
        (m.start(), m.end(), Slot(str(m.lastgroup), m.group()))
        for m in _VALUES.finditer(text)
        if m.lastgroup is not None
    ]


def _name_spans(
    text: str, names: frozenset[str], taken: list[tuple[int, int]]
) -> list[tuple[int, int, Slot]]:
    spans = []
    for m in _NAME_RUN.finditer(text):
        words = list(re.finditer(_CAPITAL, m.group()))
        # A sentence's first word is a name only where it is one elsewhere ("The" and "They" are not).
        if m.start() == 0 and words[0].group() not in names:
            words = words[1:]
        if not words:
            continue
        start, end = m.start() + words[0].start(), m.end()
        run = text[start:end]
        if any(a < end and start < b for a, b in taken):
            continue
        if len(run) < 2 or run.casefold() in STOPWORDS or run in MONTHS or run in WEEKDAYS:
            continue
        spans.append((start, end, Slot(NAME, run)))
    return spans


def subject_verbs(texts: Sequence[str], names: frozenset[str]) -> frozenset[str]:
    """Lower-case words right after a name or a pronoun ("Nate plans", "they ended"): mostly
    verbs, which end a noun phrase ("the conversation ended" is not a phrase "conversation ended")."""
    verbs: set[str] = set()
    for text in texts:
        words = [m.group() for m in _WORD.finditer(text)]
        for before, word in itertools.pairwise(words):
            subject = re.sub(r"['’]s$", "", before)
            if word.islower() and (subject in names or before.casefold() in _PRONOUNS) and subject == before:
                verbs.add(word)
    return frozenset(verbs)


def _phrase_spans(
    text: str, taken: list[tuple[int, int]], stops: frozenset[str]
) -> list[tuple[int, int, Slot]]:
    words = list(_WORD.finditer(text))
    spans = []
    for k, det in enumerate(words[:-1]):
        if det.group().casefold() not in _DETERMINERS:
            continue
        run: list[re.Match[str]] = []
        for word in words[k + 1 : k + 1 + _PHRASE_WORDS]:
            w = word.group()
            gap = text[(run[-1].end() if run else det.end()) : word.start()]
            if gap != " " or not w.islower() or w in STOPWORDS or w in stops or "'" in w or "’" in w:
                break
            run.append(word)
        if not run:
            continue
        start, end = run[0].start(), run[-1].end()
        if not any(a < end and start < b for a, b in taken):
            before = words[k - 1].group().casefold() if k > 0 else ""
            context = f"{before} {'a' if det.group().casefold() == 'an' else det.group().casefold()}"
            spans.append((start, end, Slot(PHRASE, text[start:end], context.strip())))
    return spans


def parse_template(
    text: str, names: frozenset[str], verbs: frozenset[str] = frozenset(), kind: str = "", session: int = 0
) -> Template:
    """A sentence as literal text and slots (values, names, then noun phrases, none overlapping);
    ``names``: the words that are names even first in a sentence; ``verbs``: words that end a phrase."""
    spans = _value_spans(text)
    spans += _name_spans(text, names, [(a, b) for a, b, _ in spans])
    spans += _phrase_spans(text, [(a, b) for a, b, _ in spans], _PHRASE_STOPS | verbs)
    spans.sort(key=lambda span: span[0])
    segments: list[Segment] = []
    at = 0
    for start, end, slot in spans:
        if start > at:
            segments.append(text[at:start])
        segments.append(slot)
        at = end
    if at < len(text):
        segments.append(text[at:])
    return Template(tuple(segments), kind, session)


def _literal_words(template: Template) -> set[str]:
    literal = " ".join(
        s if isinstance(s, str) else (s.original if s.kind == PHRASE else "") for s in template.segments
    )
    return set(content_tokens(literal))


def _with_paraphrases(items: list[Template], words: list[frozenset[str]]) -> list[Template]:
    """Each template with the most similar memory of its session of another kind as its
    paraphrase, when they share its first name and enough content words."""
    by_session: dict[int, list[int]] = {}
    for k, t in enumerate(items):
        by_session.setdefault(t.session, []).append(k)
    out = []
    for k, t in enumerate(items):
        best, best_j = PARAPHRASE_JACCARD, -1
        subject = t.names()[:1]
        for j in by_session[t.session]:
            other = items[j]
            if other.kind == t.kind or not subject or subject[0] not in other.names():
                continue
            union = words[k] | words[j]
            score = len(words[k] & words[j]) / len(union) if union else 0.0
            if score > best and words[k] != words[j]:
                best, best_j = score, j
        out.append(Template(t.segments, t.kind, t.session, best_j))
    return out


@cache
def load_templates(directory: Path) -> Templates:
    """The templates of every conversation in ``directory`` (read once per process).

    Raises ``BenchError`` naming the directory when it is missing or holds no conversation."""
    units = [
        (unit.text, unit.kind, number)
        for number, session in enumerate(s for c in load_conversations(directory) for s in c.sessions)
        for unit in session.units
    ]
    texts = [text for text, _, _ in units]
    names = known_names(texts) | speakers(directory)
    verbs = subject_verbs(texts, names)
    items = [parse_template(text, names, verbs, kind, session) for text, kind, session in units]
    words = [frozenset(content_tokens(text)) for text, _, _ in units]
    items = _with_paraphrases(items, words)
    slots = [s for t in items for s in t.segments if isinstance(s, Slot) and s.kind == PHRASE]
    expanded = sorted(s.original for s in slots)
    by_context: dict[tuple[str, bool], list[str]] = {}
    for slot in sorted(slots, key=lambda s: (s.context, s.original)):
        by_context.setdefault((slot.context, is_plural(slot.original)), []).append(slot.original)
    name_slots = [t.names() for t in items]
    return Templates(
        items=tuple(items),
        singular_phrases=tuple(p for p in expanded if not is_plural(p)),
        plural_phrases=tuple(p for p in expanded if is_plural(p)),
        phrases_by_context={
            key: tuple(found) for key, found in by_context.items() if len(set(found)) >= CONTEXT_CHOICES
        },
        fixed_vocabulary=len(set().union(*(_literal_words(t) for t in items))),
        names=len({n for ns in name_slots for n in ns}),
        names_per_sentence=sum(len(ns) for ns in name_slots) / max(1, len(items)),
    )
