"""Which new units carry no durable fact (filler, contact records), and how to rank the rest of a
batch: the ranking orders a batch's units, it never drops one (:mod:`.batches`).

A unit's salience is a weighted sum of four parts, each in 0..1:

- **recency**, relative within the batch (the newest unit scores 1, the oldest 0), so a batch that
  arrives late is not penalised as a whole;
- **proof**: how many times the backend saw the fact again (`proof_count`), on a log scale and capped;
- **information**: distinct content words, capped, so a long rambling unit cannot outrank a dense one;
- **directive**: overlap with the profile's directive keywords (what the profile says it cares about).

Ties are broken by `(created_at, id)`, oldest first, so the order never depends on input order.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from dreamer.details import Detail, protected_details
from dreamer.text import content_tokens

__all__ = [
    "InvalidSalienceInputError",
    "SalienceInput",
    "SalienceWeights",
    "ScoredUnit",
    "chatter_reason",
    "directive_keywords",
    "score_units",
]


class InvalidSalienceInputError(ValueError):
    """A unit or setting cannot be scored; the message says which and how to fix it."""


@dataclass(frozen=True, slots=True)
class SalienceInput:
    """A new memory unit of a profile bank, as salience sees it."""

    id: str
    text: str
    created_at: datetime
    proof_count: int = 1

    def __post_init__(self) -> None:
        if self.proof_count < 0:
            raise InvalidSalienceInputError(
                f"unit {self.id!r} has proof_count {self.proof_count}: pass 0 or more (1 if unknown)"
            )


@dataclass(frozen=True, slots=True)
class SalienceWeights:
    """How much each part of the score counts, and where the capped parts saturate.

    >>> SalienceWeights(directive=0.4).directive
    0.4
    """

    recency: float = 0.3
    proof: float = 0.25
    information: float = 0.25
    directive: float = 0.2
    #: Proof counts at or above this score the full proof part.
    proof_cap: int = 8
    #: Distinct content words at or above this score the full information part.
    information_cap: int = 12
    #: Directive keywords a unit must mention to score the full directive part.
    directive_cap: int = 2

    def __post_init__(self) -> None:
        for name in ("recency", "proof", "information", "directive"):
            if getattr(self, name) < 0:
                raise InvalidSalienceInputError(f"salience weight {name} is negative: use 0 to ignore a part")
        for name in ("proof_cap", "information_cap", "directive_cap"):
            if getattr(self, name) < 1:
                raise InvalidSalienceInputError(f"salience {name} must be at least 1")


@dataclass(frozen=True, slots=True)
class ScoredUnit:
    """A unit with its salience and the parts it is made of (for the run log)."""

    unit: SalienceInput
    score: float
    parts: dict[str, float] = field(default_factory=dict, hash=False)

    @property
    def id(self) -> str:
        """The unit's id."""
        return self.unit.id


def directive_keywords(directive: str | Sequence[str] | None) -> frozenset[str]:
    """The content words of a profile directive (a sentence or a list of terms), stemmed like unit text."""
    if directive is None:
        return frozenset()
    text = directive if isinstance(directive, str) else " ".join(directive)
    return frozenset(content_tokens(text))


def _check_clocks(units: Sequence[SalienceInput], now: datetime | None) -> None:
    stamps = [unit.created_at for unit in units] + ([now] if now is not None else [])
    aware = {stamp.utcoffset() is not None for stamp in stamps}
    if len(aware) > 1:
        raise InvalidSalienceInputError(
            "created_at/now mix timezone-aware and naive datetimes: give every timestamp a timezone"
        )


def score_units(
    units: Sequence[SalienceInput],
    directive: str | Sequence[str] | None,
    now: datetime | None = None,
    weights: SalienceWeights | None = None,
) -> list[ScoredUnit]:
    """Score every unit and return them best first.

    Recency runs from the oldest unit (0) to `now` (1); without `now`, to the newest unit.
    """
    if not units:
        return []
    _check_clocks(units, now)
    limits = weights if weights is not None else SalienceWeights()
    keywords = directive_keywords(directive)
    oldest = min(unit.created_at for unit in units)
    newest = now if now is not None else max(unit.created_at for unit in units)
    span = (newest - oldest).total_seconds()

    scored: list[ScoredUnit] = []
    for unit in units:
        age = (newest - unit.created_at).total_seconds()
        recency = 1.0 if span <= 0 else min(1.0, max(0.0, 1.0 - age / span))
        proof = math.log1p(min(unit.proof_count, limits.proof_cap)) / math.log1p(limits.proof_cap)
        words = set(content_tokens(unit.text))
        information = min(len(words), limits.information_cap) / limits.information_cap
        directive_part = min(len(words & keywords), limits.directive_cap) / limits.directive_cap
        parts = {
            "recency": round(recency, 6),
            "proof": round(proof, 6),
            "information": round(information, 6),
            "directive": round(directive_part, 6),
        }
        score = (
            limits.recency * recency
            + limits.proof * proof
            + limits.information * information
            + limits.directive * directive_part
        )
        # Rounded so that equal parts give equal scores whatever the float summation order.
        scored.append(ScoredUnit(unit=unit, score=round(score, 9), parts=parts))
    scored.sort(key=lambda item: (-item.score, item.unit.created_at, item.unit.id))
    return scored


#: Words of conversational filler: a unit made only of these carries no durable fact.
CHATTER_WORDS = frozenset(
    [
        "ok",
        "okay",
        "k",
        "thank",
        "thanks",
        "thx",
        "sound",
        "good",
        "great",
        "bye",
        "goodbye",
        "see",
        "tomorrow",
        "later",
        "soon",
        "sure",
        "yes",
        "yeah",
        "yep",
        "no",
        "nope",
        "cool",
        "nice",
        "hi",
        "hello",
        "hey",
        "lol",
        "haha",
        "awesome",
        "welcome",
        "night",
        "morning",
        "talk",
        "cheer",
        "cheers",
        "np",
        "right",
        "alright",
        "fine",
        "perfect",
        "wow",
        "agreed",
        "done",
        "gotcha",
        "hmm",
        "oh",
        "well",
    ]
)


#: Words of a contact record: who talked with whom, and when ("Nate and Joanna caught up at 7:31 pm
#: on 21 January, 2022"). Stemmed like content words.
CONTACT_WORDS = frozenset(
    content_tokens(
        "conversation conversations converse conversed talk talked talking chat chatted chatting "
        "speak spoke spoken catch catching caught call called session sessions touch reconnect reconnected "
        "long time while recent activities activity update updates event events news day days"
    )
)
#: Words of a closing line: how a conversation ended, when nothing else is said ("The conversation
#: ended with mutual goodbyes."). A goodbye beside any other content word stays a fact.
CLOSING_WORDS = frozenset(
    content_tokens(
        "conversation chat end ended ends ending close closed conclude concluded goodbye goodbyes bye "
        "farewell farewells bid say said saying share shared wish wishes wishing well-wishes take care "
        "mutual warm friendly positive note plan plans promise soon again both each other day "
        "appreciation gratitude"
    )
)
#: "Met" is a contact record only beside a clock time ("Gina and Jon met at 4:04 pm"); without one it
#: can be a fact worth keeping ("Alice met Bob at a conference in 2019" keeps its other words anyway).
_MEETING_WORDS = frozenset(content_tokens("meet met meeting"))
#: A cheap first look: a contact record holds one of these words (case-insensitive).
_CONTACT_HINT = re.compile(
    r"(?i)\b(?:convers|talk|chat|spok|speak|catch|caught|call|session|touch|reconnect|meet|met)"
)
_CLOSING_HINT = re.compile(r"(?i)\b(?:convers|chat|goodbye|bye|farewell)")


def is_contact_record(text: str) -> bool:
    """True when a unit only records that people talked, and when: a session log line, not a fact.

    Two or more names, and nothing else but dates, times and contact words. Such lines are what
    the memory audit discards as session notes; promoted upstream, every session adds one more
    ("X and Y caught up on <date>"), near-identical to the last.
    """
    if not _CONTACT_HINT.search(text):
        return False  # the common case, decided without the costlier analysis below
    details = protected_details(text)
    if len(details.names) < 2:
        return False
    names = {word for name in details.names for word in content_tokens(name)}
    rest = [word for word in details.residual_tokens if word not in names]
    has_clock = any(":" in value for value in details.of_kind(Detail.DATE))
    allowed = CONTACT_WORDS | CHATTER_WORDS | (_MEETING_WORDS if has_clock else frozenset())
    # Nothing left at all is a contact record too: "talked" is a narration verb, not a content word.
    return all(word in allowed for word in rest) and not (rest and set(rest) <= CHATTER_WORDS)


def is_closing_line(text: str) -> bool:
    """True when a unit only says how a conversation ended ("The conversation ended with mutual
    goodbyes."): closing words, greetings and the speakers' names, nothing else."""
    if not _CLOSING_HINT.search(text):
        return False
    details = protected_details(text)
    names = {word for name in details.names for word in content_tokens(name)}
    allowed = CLOSING_WORDS | CONTACT_WORDS | CHATTER_WORDS | names
    return all(word in allowed for word in content_tokens(text))


def chatter_reason(text: str) -> str | None:
    """Why a unit carries no durable fact (``"filler"`` or ``"contact record"``), or None when it
    may carry one."""
    if all(word in CHATTER_WORDS for word in content_tokens(text)):
        return "filler"
    if is_contact_record(text) or is_closing_line(text):
        return "contact record"
    return None


def is_chatter(text: str) -> bool:
    """True when a unit carries no durable fact: only conversational filler ("ok thanks, bye"), only
    a contact record ("Tim and John spoke at 10:29 am on 9 August, 2023") or only how a conversation
    ended ("The conversation ended with mutual goodbyes.")."""
    return chatter_reason(text) is not None
