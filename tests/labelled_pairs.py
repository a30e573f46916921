"""Sentence pairs of the LoCoMo conversations, labelled for dedup: one fact restated, or two different facts.

The pairs are real memory facts, events and session-summary sentences of the benchmark conversations
(snap-research/locomo), restated by different writers or related but different. They are loaded from the
dataset by position (`tests.locomo`), never copied here; tests that load them are skipped when the dataset
is absent. The dedup thresholds were measured on them (docs/design/dedup.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from tests.locomo import LocomoRefError, Ref, sentence

#: Two sentences of the dataset, by position.
Pair = tuple[Ref, Ref]

#: A hand-made variant of a real sentence: the sentence at `Ref` with each (old, new) replaced.
Edit = tuple[Ref, tuple[tuple[str, str], ...]]

#: What a pair is, judged from the first text as the new card against the second as the promoted one.
Kind = Literal["duplicate", "conflict", "different"]
DUPLICATE: Kind = "duplicate"
CONFLICT: Kind = "conflict"
DIFFERENT: Kind = "different"


@dataclass(frozen=True, slots=True)
class LabelledPair:
    """Two texts and what they are; the same in both directions unless `one_way`.

    `subtype` says why: restatement, two_sided (one event told by each side), active_passive,
    joint (a joint event told from each side), says_less; changed_number, changed_date, negation
    (conflicts); related_fact, role_swap, other_person, recurring_event (different facts). A
    `one_way` pair (says_less) is a duplicate from the first text's side only: the second text,
    which says more, is new against the first.
    """

    first: Ref | Edit
    second: Ref | Edit
    kind: Kind
    subtype: str
    one_way: bool = False

    def texts(self) -> tuple[str, str]:
        """The two texts, loaded from the dataset (and edited)."""
        return text_of(self.first), text_of(self.second)

    def directions(self) -> list[tuple[str, str, Kind]]:
        """(new card, promoted card, truth) both ways: what the verdict should be in each."""
        first, second = self.texts()
        backwards: Kind = DIFFERENT if self.one_way else self.kind
        return [(first, second, self.kind), (second, first, backwards)]


def _is_edit(source: Ref | Edit) -> bool:
    return len(source) == 2 and isinstance(source[1], tuple)


def text_of(source: Ref | Edit) -> str:
    """The sentence a reference names, or its hand-made variant; an edit that changes nothing fails."""
    if not _is_edit(source):
        return sentence(source)  # type: ignore[arg-type]
    ref, replacements = source  # type: ignore[misc]
    text = sentence(ref)
    for old, new in replacements:
        if old not in text:
            raise LocomoRefError(f"{old!r} is not in the sentence at {ref}; the edit would change nothing")
        text = text.replace(old, new)
    return text


# Pairs used by name below; the comments say what they are about, not what they say.
TRILOGY_WATCHED: Pair = (
    ("42", "events_session_10", "Joanna", 0),
    ("42", "session_10_observation", "Joanna", 0),
)
GUINEA_PIG: Pair = (("26", "session_13_observation", "Caroline", 2), ("26", "session_13_summary", 2))
TURTLE_WALK: Pair = (("42", "events_session_5", "Nate", 0), ("42", "events_session_25", "Nate", 0))
GINA_JOB_LOSS: Pair = (("30", "events_session_1", "Gina", 0), ("30", "session_1_summary", 2))
GRATITUDE: Pair = (
    ("42", "session_13_observation", "Joanna", 5),
    ("42", "session_26_observation", "Joanna", 5),
)
POTTERY_WORKSHOP: Pair = (("26", "session_8_observation", "Melanie", 0), ("26", "session_8_summary", 1))
FRIENDSHIP_ROLE_SWAP: Pair = (
    ("26", "session_12_observation", "Caroline", 4),
    ("26", "session_12_observation", "Melanie", 3),
)
JON_SELF_BELIEF: Ref = ("30", "session_2_observation", "Jon", 4)

#: One fact in two wordings that the lexical rule merges, in both directions.
MERGED_PARAPHRASES: list[Pair] = [
    TRILOGY_WATCHED,
    GUINEA_PIG,
    (("41", "events_session_2", "Maria", 0), ("41", "session_2_observation", "Maria", 0)),  # car donated
    (("41", "events_session_2", "Maria", 1), ("41", "session_2_observation", "Maria", 3)),  # baking
    TURTLE_WALK,
    (("42", "events_session_27", "Nate", 1), ("42", "session_27_observation", "Nate", 3)),  # gaming gear
    (("26", "events_session_9", "Caroline", 0), ("26", "session_9_observation", "Caroline", 0)),  # mentoring
    GINA_JOB_LOSS,
    (("41", "events_session_3", "John", 2), ("41", "session_3_observation", "John", 3)),  # failed test
    (("41", "session_28_observation", "Maria", 2), ("41", "session_30_observation", "Maria", 5)),  # support
    (("30", "events_session_18", "Jon", 1), ("30", "session_18_observation", "Jon", 2)),  # studio website
    (("42", "session_1_observation", "Nate", 0), ("42", "session_1_summary", 1)),  # first tournament
    (("26", "session_4_observation", "Caroline", 1), ("26", "session_4_summary", 3)),  # birthday gift
    (("42", "session_23_observation", "Joanna", 1), ("42", "session_23_summary", 5)),  # games and people
    (("41", "session_8_observation", "Maria", 1), ("41", "session_7_observation", "Maria", 1)),  # shelter
    (("43", "events_session_26", "Tim", 1), ("43", "session_26_observation", "Tim", 0)),  # travel reading
    (("30", "session_4_observation", "Gina", 2), ("30", "session_4_observation", "Gina", 4)),  # encouragement
    (("26", "session_5_observation", "Caroline", 0), ("26", "session_5_summary", 0)),  # pride parade
]

#: True paraphrases the lexical rule leaves apart (a synonym, an added date, name or negation):
#: the cost of never merging on a changed detail. The semantic route catches the first kind.
MISSED_PARAPHRASES: list[Pair] = [
    GRATITUDE,
    (("43", "session_2_observation", "John", 4), ("43", "session_25_observation", "John", 5)),  # thanks
    (("41", "session_31_observation", "Maria", 0), ("41", "session_31_summary", 1)),  # new puppy
    POTTERY_WORKSHOP,
    (("30", "session_4_observation", "Gina", 1), ("30", "session_13_observation", "Gina", 3)),  # keep pushing
    (("42", "session_21_observation", "Nate", 3), ("42", "session_26_observation", "Joanna", 7)),  # a cake
    (("41", "session_12_observation", "Maria", 0), ("41", "session_22_observation", "Maria", 0)),  # education
]

#: Related but different facts: never duplicates.
DIFFERENT_FACTS: list[Pair] = [
    (("30", "session_6_observation", "Jon", 1), GINA_JOB_LOSS[1]),  # the same loss, another person
    FRIENDSHIP_ROLE_SWAP,
    (JON_SELF_BELIEF, ("30", "session_13_observation", "Gina", 4)),  # who believes in whom
    (("41", "session_6_observation", "Maria", 4), ("41", "session_21_observation", "John", 0)),  # who helps
    (("42", "events_session_17", "Nate", 0), ("42", "events_session_27", "Nate", 0)),  # two tournaments
    (("42", "events_session_9", "Nate", 0), ("42", "events_session_10", "Nate", 0)),  # before and after
    (("42", "events_session_28", "Nate", 3), ("42", "session_24_observation", "Nate", 1)),  # pets
    (("26", "events_session_6", "Melanie", 0), ("26", "events_session_15", "Melanie", 0)),  # outings
    (("42", "events_session_22", "Joanna", 0), ("42", "events_session_24", "Joanna", 0)),  # a recipe
    (("26", "session_19_observation", "Melanie", 0), ("26", "session_19_summary", 1)),  # figurines
    (("41", "events_session_11", "Maria", 1), ("41", "session_8_observation", "Maria", 1)),  # the shelter
    (("30", "session_5_observation", "Jon", 0), ("30", "session_13_observation", "Jon", 0)),  # the studio
    (("41", "events_session_1", "John", 1), ("41", "session_2_observation", "John", 5)),  # martial arts
    (("42", "session_14_observation", "Nate", 0), ("42", "session_22_observation", "Nate", 0)),  # two wins
    (("42", "events_session_17", "Joanna", 1), ("42", "events_session_22", "Joanna", 1)),  # a book
]

#: A recurring event in near-identical words: the one different-fact pair the lexical rule merges.
RECURRING_EVENT: Pair = (("42", "events_session_14", "Nate", 0), ("42", "events_session_22", "Nate", 0))

#: The first says less than the second: a duplicate as a new card, not the other way round.
SUBSUMED: Pair = (("41", "session_8_observation", "Maria", 1), ("41", "session_1_observation", "Maria", 0))

#: Real sentences made templates by turning one number into a slot: (sentence, the number it holds).
NUMBER_TEMPLATE_SOURCES: list[tuple[Ref, str]] = [
    (TURTLE_WALK[0], "two"),
    (("26", "session_4_observation", "Caroline", 1), "18"),
    (("41", "events_session_29", "John", 0), "5"),
]


def texts(pair: Pair) -> tuple[str, str]:
    """The two sentences of a pair, loaded from the dataset."""
    return sentence(pair[0]), sentence(pair[1])


# --- the calibration set: at least 300 pairs, each with its kind and subtype --------------------------


def _edit(ref: Ref, *replacements: tuple[str, str]) -> Edit:
    return (ref, tuple(replacements))


def _first_pairs() -> list[LabelledPair]:
    """The pairs above (the first 43), labelled."""
    pairs = [LabelledPair(*pair, DUPLICATE, "restatement") for pair in MERGED_PARAPHRASES]
    pairs += [LabelledPair(*pair, DUPLICATE, "restatement") for pair in MISSED_PARAPHRASES]
    pairs += [LabelledPair(*pair, DIFFERENT, "related_fact") for pair in DIFFERENT_FACTS]
    pairs += [
        LabelledPair(*RECURRING_EVENT, DIFFERENT, "recurring_event"),
        LabelledPair(*SUBSUMED, DUPLICATE, "says_less", one_way=True),
    ]
    return pairs


#: Mined pairs: sentences of one conversation whose MiniLM cosine is at least 0.72, drawn at random in
#: four bands of cosine, contact records, chatter and the pairs above left out, labelled by reading them.
MINED: list[LabelledPair] = [
    LabelledPair(
        ("26", "session_3_observation", "Caroline", 1),
        ("26", "session_3_summary", 1),
        DUPLICATE,
        "restatement",
    ),
    LabelledPair(
        ("30", "session_18_observation", "Jon", 5),
        ("30", "session_16_summary", 7),
        DUPLICATE,
        "says_less",
        one_way=True,
    ),
    LabelledPair(
        ("43", "session_10_observation", "Tim", 3), ("43", "session_10_summary", 5), DUPLICATE, "restatement"
    ),
    LabelledPair(
        ("30", "session_6_observation", "Gina", 0), ("30", "session_1_summary", 2), DUPLICATE, "restatement"
    ),
    LabelledPair(
        ("41", "events_session_9", "Maria", 0),
        ("41", "session_9_observation", "Maria", 0),
        DUPLICATE,
        "restatement",
    ),
    LabelledPair(
        ("26", "session_11_observation", "Caroline", 4),
        ("26", "session_11_summary", 7),
        DUPLICATE,
        "restatement",
    ),
    LabelledPair(
        ("26", "session_6_observation", "Caroline", 1),
        ("26", "session_6_summary", 5),
        DUPLICATE,
        "restatement",
    ),
    LabelledPair(
        ("41", "session_20_observation", "Maria", 0),
        ("41", "session_20_summary", 1),
        DUPLICATE,
        "restatement",
    ),
    LabelledPair(
        ("42", "session_7_observation", "Joanna", 2),
        ("42", "session_12_observation", "Nate", 2),
        DUPLICATE,
        "two_sided",
    ),
    LabelledPair(
        ("43", "session_2_observation", "John", 4),
        ("43", "session_20_observation", "Tim", 1),
        DIFFERENT,
        "role_swap",
    ),
    LabelledPair(
        ("41", "events_session_11", "Maria", 2),
        ("41", "session_11_observation", "Maria", 1),
        DUPLICATE,
        "restatement",
    ),
    LabelledPair(
        ("26", "session_1_observation", "Caroline", 2),
        ("26", "session_5_observation", "Caroline", 1),
        DUPLICATE,
        "restatement",
    ),
    LabelledPair(
        ("30", "session_1_observation", "Gina", 0),
        ("30", "session_6_observation", "Gina", 0),
        DUPLICATE,
        "restatement",
    ),
    LabelledPair(
        ("41", "session_6_observation", "Maria", 3),
        ("41", "session_6_observation", "John", 4),
        DUPLICATE,
        "two_sided",
    ),
    LabelledPair(
        ("41", "events_session_8", "Maria", 0),
        ("41", "session_8_observation", "Maria", 0),
        DUPLICATE,
        "restatement",
    ),
    LabelledPair(
        ("42", "events_session_14", "Nate", 2),
        ("42", "session_14_observation", "Nate", 2),
        DUPLICATE,
        "restatement",
    ),
    LabelledPair(
        ("43", "events_session_2", "Tim", 0),
        ("43", "session_2_observation", "Tim", 0),
        DUPLICATE,
        "restatement",
    ),
    LabelledPair(("42", "session_13_summary", 8), ("42", "session_16_summary", 5), DUPLICATE, "two_sided"),
    LabelledPair(
        ("26", "session_2_observation", "Caroline", 1),
        ("26", "session_2_summary", 6),
        DUPLICATE,
        "restatement",
    ),
    LabelledPair(
        ("30", "session_18_observation", "Gina", 4),
        ("30", "session_18_observation", "Jon", 4),
        DUPLICATE,
        "two_sided",
    ),
    LabelledPair(
        ("30", "events_session_1", "Gina", 0),
        ("30", "session_1_observation", "Gina", 0),
        DUPLICATE,
        "restatement",
    ),
    LabelledPair(
        ("41", "session_26_observation", "Maria", 2),
        ("41", "session_26_summary", 6),
        DUPLICATE,
        "restatement",
    ),
    LabelledPair(
        ("30", "session_1_observation", "Jon", 1),
        ("30", "session_9_observation", "Jon", 0),
        DUPLICATE,
        "restatement",
    ),
    LabelledPair(
        ("43", "events_session_3", "John", 2),
        ("43", "session_3_observation", "John", 2),
        DUPLICATE,
        "restatement",
    ),
    LabelledPair(
        ("43", "session_18_observation", "John", 0), ("43", "session_18_summary", 1), DUPLICATE, "restatement"
    ),
    LabelledPair(
        ("26", "events_session_10", "Caroline", 0),
        ("26", "session_10_observation", "Caroline", 0),
        DUPLICATE,
        "restatement",
    ),
    LabelledPair(
        ("26", "session_11_observation", "Caroline", 0),
        ("26", "session_5_summary", 0),
        DUPLICATE,
        "restatement",
    ),
    LabelledPair(
        ("26", "events_session_18", "Melanie", 1),
        ("26", "session_18_observation", "Melanie", 1),
        DUPLICATE,
        "restatement",
    ),
    LabelledPair(
        ("26", "session_8_observation", "Melanie", 1),
        ("26", "session_8_summary", 3),
        DUPLICATE,
        "restatement",
    ),
    LabelledPair(
        ("26", "session_5_observation", "Caroline", 1),
        ("26", "session_7_summary", 4),
        DUPLICATE,
        "restatement",
    ),
    LabelledPair(
        ("43", "events_session_29", "Tim", 0),
        ("43", "session_29_observation", "Tim", 0),
        DUPLICATE,
        "restatement",
    ),
    LabelledPair(
        ("30", "session_8_observation", "Gina", 3),
        ("30", "session_8_observation", "Gina", 4),
        DUPLICATE,
        "restatement",
    ),
    LabelledPair(
        ("42", "session_17_observation", "Nate", 0), ("42", "session_17_summary", 0), DUPLICATE, "restatement"
    ),
    LabelledPair(
        ("26", "session_7_observation", "Caroline", 1),
        ("26", "session_7_summary", 4),
        DUPLICATE,
        "restatement",
    ),
    LabelledPair(
        ("42", "session_18_observation", "Joanna", 5),
        ("42", "session_18_observation", "Nate", 1),
        DUPLICATE,
        "two_sided",
    ),
    LabelledPair(
        ("41", "session_23_observation", "Maria", 2),
        ("41", "session_23_observation", "Maria", 3),
        DUPLICATE,
        "restatement",
    ),
    LabelledPair(
        ("41", "session_25_observation", "Maria", 0),
        ("41", "session_25_summary", 2),
        DUPLICATE,
        "restatement",
    ),
    LabelledPair(
        ("30", "events_session_13", "Gina", 0),
        ("30", "session_13_observation", "Gina", 0),
        DUPLICATE,
        "restatement",
    ),
    LabelledPair(
        ("41", "events_session_29", "John", 0),
        ("41", "session_29_observation", "John", 0),
        DUPLICATE,
        "restatement",
    ),
    LabelledPair(
        ("30", "session_10_observation", "Gina", 4), ("30", "session_4_summary", 4), DUPLICATE, "restatement"
    ),
    LabelledPair(
        ("42", "session_21_observation", "Nate", 0), ("42", "session_21_summary", 1), DUPLICATE, "restatement"
    ),
    LabelledPair(
        ("26", "session_6_observation", "Caroline", 0),
        ("26", "session_7_observation", "Caroline", 1),
        DUPLICATE,
        "restatement",
    ),
    LabelledPair(
        ("43", "session_12_observation", "John", 0), ("43", "session_12_summary", 1), DUPLICATE, "restatement"
    ),
    LabelledPair(
        ("43", "events_session_1", "Tim", 0), ("43", "session_1_summary", 4), DUPLICATE, "restatement"
    ),
    LabelledPair(
        ("41", "session_29_observation", "Maria", 0),
        ("41", "session_29_summary", 1),
        DUPLICATE,
        "restatement",
    ),
    LabelledPair(
        ("43", "session_13_observation", "John", 3),
        ("43", "session_20_observation", "Tim", 1),
        DIFFERENT,
        "role_swap",
    ),
    LabelledPair(
        ("30", "session_4_observation", "Gina", 2),
        ("30", "session_4_observation", "Gina", 3),
        DUPLICATE,
        "restatement",
    ),
    LabelledPair(
        ("41", "session_25_observation", "Maria", 2),
        ("41", "session_25_summary", 4),
        DUPLICATE,
        "restatement",
    ),
    LabelledPair(
        ("42", "session_27_observation", "Joanna", 4),
        ("42", "session_27_summary", 6),
        DIFFERENT,
        "related_fact",
    ),
    LabelledPair(
        ("42", "session_10_observation", "Joanna", 0),
        ("42", "session_10_summary", 1),
        DUPLICATE,
        "restatement",
    ),
    LabelledPair(
        ("30", "session_2_observation", "Gina", 0), ("30", "session_2_summary", 1), DUPLICATE, "restatement"
    ),
    LabelledPair(
        ("26", "session_18_observation", "Melanie", 0),
        ("26", "session_18_observation", "Melanie", 1),
        DUPLICATE,
        "restatement",
    ),
    LabelledPair(
        ("30", "events_session_1", "Jon", 0),
        ("30", "session_1_observation", "Jon", 0),
        DUPLICATE,
        "restatement",
    ),
    LabelledPair(
        ("42", "session_1_observation", "Joanna", 1), ("42", "session_1_summary", 2), DUPLICATE, "restatement"
    ),
    LabelledPair(
        ("43", "events_session_14", "John", 0),
        ("43", "session_14_observation", "John", 1),
        DUPLICATE,
        "restatement",
    ),
    LabelledPair(
        ("26", "session_6_observation", "Caroline", 0),
        ("26", "session_6_summary", 1),
        DUPLICATE,
        "restatement",
    ),
    LabelledPair(
        ("30", "events_session_1", "Gina", 0),
        ("30", "session_6_observation", "Gina", 0),
        DUPLICATE,
        "restatement",
    ),
    LabelledPair(
        ("43", "session_14_observation", "John", 1), ("43", "session_14_summary", 1), DUPLICATE, "restatement"
    ),
    LabelledPair(
        ("42", "events_session_14", "Nate", 2), ("42", "session_14_summary", 7), DUPLICATE, "restatement"
    ),
    LabelledPair(
        ("42", "session_16_observation", "Joanna", 2),
        ("42", "session_16_observation", "Nate", 2),
        DUPLICATE,
        "two_sided",
    ),
    LabelledPair(
        ("30", "events_session_12", "Gina", 0),
        ("30", "session_12_observation", "Gina", 0),
        DUPLICATE,
        "restatement",
    ),
    LabelledPair(
        ("43", "events_session_4", "John", 0),
        ("43", "session_4_observation", "John", 1),
        DUPLICATE,
        "restatement",
    ),
    LabelledPair(
        ("30", "session_11_observation", "Jon", 0), ("30", "session_9_summary", 0), DUPLICATE, "restatement"
    ),
    LabelledPair(
        ("42", "session_18_observation", "Joanna", 1),
        ("42", "session_18_summary", 1),
        DUPLICATE,
        "restatement",
    ),
    LabelledPair(
        ("26", "events_session_17", "Caroline", 0),
        ("26", "session_17_observation", "Caroline", 0),
        DUPLICATE,
        "restatement",
    ),
    LabelledPair(
        ("42", "session_8_observation", "Joanna", 3),
        ("42", "session_11_observation", "Joanna", 4),
        DUPLICATE,
        "restatement",
    ),
    LabelledPair(
        ("43", "session_10_summary", 2),
        ("43", "session_10_observation", "John", 0),
        DUPLICATE,
        "says_less",
        one_way=True,
    ),
    LabelledPair(
        ("42", "session_16_observation", "Joanna", 2), ("42", "session_16_summary", 2), DUPLICATE, "two_sided"
    ),
    LabelledPair(("43", "session_8_summary", 5), ("43", "session_17_summary", 6), DUPLICATE, "restatement"),
    LabelledPair(
        ("41", "session_4_observation", "John", 1), ("41", "session_4_summary", 3), DUPLICATE, "restatement"
    ),
    LabelledPair(
        ("42", "events_session_16", "Nate", 0),
        ("42", "session_21_observation", "Nate", 0),
        DIFFERENT,
        "related_fact",
    ),
    LabelledPair(
        ("43", "events_session_3", "John", 0),
        ("43", "session_3_observation", "John", 0),
        DUPLICATE,
        "restatement",
    ),
    LabelledPair(
        ("42", "session_12_observation", "Nate", 5),
        ("42", "session_12_observation", "Joanna", 4),
        DUPLICATE,
        "two_sided",
    ),
    LabelledPair(
        ("43", "session_24_observation", "John", 3), ("43", "session_24_summary", 3), DUPLICATE, "restatement"
    ),
    LabelledPair(("41", "session_14_summary", 2), ("41", "session_14_summary", 3), DUPLICATE, "two_sided"),
    LabelledPair(
        ("43", "session_7_observation", "Tim", 2),
        ("43", "session_13_observation", "John", 3),
        DIFFERENT,
        "related_fact",
    ),
    LabelledPair(
        ("42", "events_session_3", "Joanna", 0), ("42", "session_2_summary", 1), DIFFERENT, "related_fact"
    ),
    LabelledPair(
        ("41", "session_4_observation", "John", 6), ("41", "session_4_summary", 8), DUPLICATE, "restatement"
    ),
    LabelledPair(
        ("30", "session_15_observation", "Gina", 0), ("30", "session_19_summary", 3), DUPLICATE, "two_sided"
    ),
    LabelledPair(
        ("26", "session_8_observation", "Caroline", 2),
        ("26", "session_8_summary", 9),
        DUPLICATE,
        "restatement",
    ),
    LabelledPair(
        ("43", "session_2_observation", "John", 4),
        ("43", "session_13_observation", "Tim", 2),
        DUPLICATE,
        "two_sided",
    ),
    LabelledPair(
        ("43", "events_session_21", "Tim", 0),
        ("43", "session_21_observation", "Tim", 0),
        DUPLICATE,
        "restatement",
    ),
    LabelledPair(
        ("41", "events_session_1", "Maria", 0),
        ("41", "session_12_observation", "Maria", 3),
        DUPLICATE,
        "says_less",
        one_way=True,
    ),
    LabelledPair(
        ("43", "session_13_observation", "Tim", 0), ("43", "session_13_summary", 1), DUPLICATE, "restatement"
    ),
    LabelledPair(
        ("42", "session_4_summary", 2), ("42", "session_18_summary", 4), DUPLICATE, "says_less", one_way=True
    ),
    LabelledPair(
        ("42", "session_7_observation", "Joanna", 2),
        ("42", "session_13_observation", "Joanna", 5),
        DUPLICATE,
        "restatement",
    ),
    LabelledPair(
        ("41", "session_1_observation", "Maria", 0), ("41", "session_1_summary", 1), DUPLICATE, "restatement"
    ),
    LabelledPair(("41", "session_11_summary", 7), ("41", "session_17_summary", 4), DUPLICATE, "restatement"),
    LabelledPair(
        ("43", "events_session_16", "Tim", 0),
        ("43", "session_16_observation", "Tim", 0),
        DUPLICATE,
        "restatement",
    ),
    LabelledPair(
        ("43", "session_2_observation", "John", 4),
        ("43", "session_13_observation", "John", 3),
        DUPLICATE,
        "restatement",
    ),
    LabelledPair(
        ("30", "session_11_observation", "Gina", 3),
        ("30", "session_18_observation", "Gina", 5),
        DIFFERENT,
        "related_fact",
    ),
    LabelledPair(
        ("42", "session_8_observation", "Nate", 3),
        ("42", "session_8_observation", "Joanna", 5),
        DIFFERENT,
        "related_fact",
    ),
    LabelledPair(
        ("30", "events_session_10", "Jon", 1),
        ("30", "session_10_observation", "Jon", 1),
        DUPLICATE,
        "restatement",
    ),
    LabelledPair(
        ("42", "session_18_observation", "Nate", 1),
        ("42", "session_18_summary", 4),
        DIFFERENT,
        "related_fact",
    ),
    LabelledPair(
        ("41", "session_23_observation", "Maria", 2),
        ("41", "session_14_summary", 3),
        DIFFERENT,
        "related_fact",
    ),
    LabelledPair(("26", "session_1_summary", 1), ("26", "session_3_summary", 1), DIFFERENT, "related_fact"),
    LabelledPair(
        ("41", "events_session_19", "John", 0),
        ("41", "session_19_observation", "John", 0),
        DUPLICATE,
        "restatement",
    ),
    LabelledPair(
        ("41", "session_8_observation", "Maria", 1),
        ("41", "session_26_observation", "Maria", 1),
        DUPLICATE,
        "says_less",
        one_way=True,
    ),
    LabelledPair(
        ("26", "session_19_observation", "Melanie", 3),
        ("26", "session_15_summary", 5),
        DUPLICATE,
        "restatement",
    ),
    LabelledPair(
        ("42", "session_8_observation", "Joanna", 2),
        ("42", "session_11_observation", "Joanna", 4),
        DUPLICATE,
        "restatement",
    ),
    LabelledPair(
        ("42", "session_3_observation", "Nate", 1),
        ("42", "session_29_observation", "Nate", 2),
        DUPLICATE,
        "restatement",
    ),
    LabelledPair(
        ("41", "session_20_observation", "Maria", 2),
        ("41", "session_32_observation", "Maria", 0),
        DUPLICATE,
        "restatement",
    ),
    LabelledPair(
        ("42", "events_session_17", "Joanna", 0),
        ("42", "session_17_observation", "Joanna", 0),
        DUPLICATE,
        "restatement",
    ),
    LabelledPair(
        ("43", "session_13_observation", "Tim", 2),
        ("43", "session_13_observation", "John", 3),
        DUPLICATE,
        "two_sided",
    ),
    LabelledPair(
        ("41", "events_session_12", "John", 2),
        ("41", "session_12_observation", "John", 5),
        DUPLICATE,
        "restatement",
    ),
    LabelledPair(("30", "session_14_summary", 4), ("30", "session_17_summary", 5), DUPLICATE, "restatement"),
    LabelledPair(
        ("26", "events_session_8", "Caroline", 0),
        ("26", "session_8_observation", "Caroline", 0),
        DUPLICATE,
        "says_less",
        one_way=True,
    ),
    LabelledPair(
        ("41", "events_session_31", "Maria", 0),
        ("41", "session_31_observation", "Maria", 0),
        DUPLICATE,
        "restatement",
    ),
    LabelledPair(
        ("43", "session_18_observation", "Tim", 0), ("43", "session_18_summary", 0), DUPLICATE, "restatement"
    ),
    LabelledPair(
        ("43", "session_13_observation", "Tim", 2),
        ("43", "session_20_observation", "Tim", 1),
        DIFFERENT,
        "role_swap",
    ),
    LabelledPair(
        ("30", "session_17_observation", "Jon", 4), ("30", "session_17_summary", 3), DIFFERENT, "related_fact"
    ),
    LabelledPair(
        ("42", "events_session_23", "Nate", 3),
        ("42", "session_23_observation", "Nate", 5),
        DUPLICATE,
        "says_less",
        one_way=True,
    ),
    LabelledPair(
        ("42", "session_16_observation", "Joanna", 2),
        ("42", "session_18_observation", "Joanna", 5),
        DUPLICATE,
        "restatement",
    ),
    LabelledPair(
        ("42", "session_18_observation", "Joanna", 5),
        ("42", "session_10_summary", 4),
        DIFFERENT,
        "related_fact",
    ),
    LabelledPair(
        ("26", "session_6_observation", "Melanie", 0),
        ("26", "session_6_summary", 3),
        DUPLICATE,
        "restatement",
    ),
    LabelledPair(
        ("30", "events_session_11", "Gina", 0),
        ("30", "session_11_observation", "Gina", 2),
        DUPLICATE,
        "restatement",
    ),
    LabelledPair(
        ("42", "session_12_observation", "Nate", 2),
        ("42", "session_12_observation", "Joanna", 4),
        DUPLICATE,
        "two_sided",
    ),
    LabelledPair(
        ("30", "session_18_observation", "Jon", 4), ("30", "session_18_summary", 4), DUPLICATE, "restatement"
    ),
    LabelledPair(("43", "session_11_summary", 6), ("43", "session_17_summary", 6), DUPLICATE, "restatement"),
    LabelledPair(
        ("42", "session_3_observation", "Nate", 2), ("42", "session_3_summary", 4), DIFFERENT, "related_fact"
    ),
    LabelledPair(
        ("42", "events_session_12", "Joanna", 0),
        ("42", "events_session_14", "Joanna", 2),
        DIFFERENT,
        "related_fact",
    ),
    LabelledPair(
        ("26", "session_4_observation", "Caroline", 0),
        ("26", "session_4_summary", 1),
        DUPLICATE,
        "restatement",
    ),
    LabelledPair(
        ("26", "session_3_observation", "Melanie", 2),
        ("26", "session_11_observation", "Melanie", 1),
        DUPLICATE,
        "restatement",
    ),
    LabelledPair(
        ("42", "session_5_observation", "Nate", 3),
        ("42", "session_18_observation", "Joanna", 4),
        DUPLICATE,
        "two_sided",
    ),
    LabelledPair(
        ("42", "session_5_observation", "Nate", 5),
        ("42", "session_13_observation", "Joanna", 5),
        DUPLICATE,
        "two_sided",
    ),
    LabelledPair(
        ("26", "events_session_18", "Melanie", 1),
        ("26", "session_18_observation", "Melanie", 0),
        DUPLICATE,
        "restatement",
    ),
    LabelledPair(
        ("41", "session_14_observation", "John", 1),
        ("41", "session_29_observation", "Maria", 5),
        DIFFERENT,
        "related_fact",
    ),
    LabelledPair(
        ("42", "session_5_observation", "Nate", 0),
        ("42", "session_8_observation", "Nate", 0),
        DIFFERENT,
        "related_fact",
    ),
    LabelledPair(
        ("43", "session_20_observation", "Tim", 0), ("43", "session_20_summary", 1), DUPLICATE, "restatement"
    ),
    LabelledPair(
        ("43", "session_11_observation", "John", 2), ("43", "session_11_summary", 2), DUPLICATE, "two_sided"
    ),
    LabelledPair(
        ("26", "session_14_observation", "Caroline", 2),
        ("26", "session_14_summary", 10),
        DIFFERENT,
        "related_fact",
    ),
    LabelledPair(
        ("26", "session_10_summary", 13), ("26", "session_16_summary", 9), DIFFERENT, "related_fact"
    ),
    LabelledPair(
        ("30", "session_4_observation", "Gina", 2),
        ("30", "session_13_observation", "Gina", 3),
        DUPLICATE,
        "restatement",
    ),
    LabelledPair(
        ("43", "events_session_1", "John", 0),
        ("43", "session_1_observation", "John", 0),
        DUPLICATE,
        "restatement",
    ),
    LabelledPair(
        ("26", "events_session_19", "Caroline", 0),
        ("26", "session_2_observation", "Caroline", 0),
        DIFFERENT,
        "related_fact",
    ),
    LabelledPair(
        ("41", "session_16_observation", "John", 3),
        ("41", "session_16_observation", "Maria", 2),
        DUPLICATE,
        "two_sided",
    ),
    LabelledPair(
        ("42", "events_session_27", "Nate", 0),
        ("42", "session_27_summary", 1),
        DUPLICATE,
        "says_less",
        one_way=True,
    ),
    LabelledPair(
        ("26", "session_10_observation", "Caroline", 0),
        ("26", "session_10_summary", 3),
        DIFFERENT,
        "related_fact",
    ),
    LabelledPair(
        ("41", "session_10_observation", "Maria", 4),
        ("41", "session_23_observation", "Maria", 3),
        DIFFERENT,
        "related_fact",
    ),
    LabelledPair(
        ("41", "session_6_observation", "Maria", 4),
        ("41", "session_23_observation", "Maria", 2),
        DIFFERENT,
        "related_fact",
    ),
    LabelledPair(
        ("41", "session_7_observation", "Maria", 1),
        ("41", "session_32_observation", "Maria", 0),
        DUPLICATE,
        "restatement",
    ),
    LabelledPair(
        ("43", "session_9_observation", "Tim", 5),
        ("43", "session_13_observation", "John", 3),
        DIFFERENT,
        "role_swap",
    ),
    LabelledPair(("43", "session_22_summary", 2), ("43", "session_25_summary", 3), DUPLICATE, "restatement"),
    LabelledPair(("43", "session_6_summary", 6), ("43", "session_9_summary", 5), DIFFERENT, "role_swap"),
    LabelledPair(
        ("30", "session_2_observation", "Gina", 5),
        ("30", "session_4_observation", "Gina", 5),
        DIFFERENT,
        "related_fact",
    ),
    LabelledPair(
        ("26", "session_10_summary", 2), ("26", "session_10_summary", 14), DIFFERENT, "related_fact"
    ),
    LabelledPair(
        ("26", "session_7_observation", "Caroline", 0),
        ("26", "session_13_summary", 10),
        DIFFERENT,
        "related_fact",
    ),
    LabelledPair(
        ("41", "session_26_observation", "John", 0),
        ("41", "session_32_observation", "John", 0),
        DUPLICATE,
        "restatement",
    ),
    LabelledPair(("41", "session_26_summary", 8), ("41", "session_32_summary", 6), DUPLICATE, "restatement"),
    LabelledPair(
        ("30", "session_9_observation", "Gina", 4), ("30", "session_12_summary", 6), DIFFERENT, "related_fact"
    ),
    LabelledPair(
        ("41", "session_9_observation", "John", 5),
        ("41", "session_22_observation", "Maria", 1),
        DUPLICATE,
        "two_sided",
    ),
    LabelledPair(
        ("42", "session_3_observation", "Joanna", 1),
        ("42", "session_13_observation", "Joanna", 5),
        DUPLICATE,
        "restatement",
    ),
    LabelledPair(
        ("26", "events_session_5", "Melanie", 0),
        ("26", "events_session_12", "Melanie", 0),
        DIFFERENT,
        "related_fact",
    ),
    LabelledPair(
        ("41", "session_14_observation", "Maria", 3),
        ("41", "session_14_observation", "Maria", 4),
        DUPLICATE,
        "restatement",
    ),
    LabelledPair(
        ("41", "events_session_21", "John", 0),
        ("41", "session_21_observation", "John", 1),
        DUPLICATE,
        "restatement",
    ),
    LabelledPair(
        ("30", "session_13_observation", "Gina", 4),
        ("30", "session_17_observation", "Gina", 5),
        DUPLICATE,
        "restatement",
    ),
    LabelledPair(
        ("41", "session_10_observation", "Maria", 4),
        ("41", "session_14_observation", "John", 1),
        DUPLICATE,
        "two_sided",
    ),
    LabelledPair(
        ("42", "events_session_28", "Nate", 2),
        ("42", "session_28_observation", "Nate", 3),
        DUPLICATE,
        "restatement",
    ),
    LabelledPair(
        ("41", "session_23_observation", "Maria", 2),
        ("41", "session_30_observation", "Maria", 5),
        DIFFERENT,
        "related_fact",
    ),
    LabelledPair(
        ("30", "session_2_observation", "Jon", 4), ("30", "session_16_summary", 7), DUPLICATE, "restatement"
    ),
    LabelledPair(
        ("42", "session_18_observation", "Joanna", 5),
        ("42", "session_26_observation", "Nate", 3),
        DIFFERENT,
        "related_fact",
    ),
    LabelledPair(
        ("30", "session_4_observation", "Gina", 1), ("30", "session_19_summary", 4), DUPLICATE, "restatement"
    ),
    LabelledPair(
        ("41", "session_14_observation", "John", 3), ("41", "session_14_summary", 5), DUPLICATE, "restatement"
    ),
    LabelledPair(
        ("26", "session_19_observation", "Melanie", 3),
        ("26", "session_3_summary", 8),
        DIFFERENT,
        "related_fact",
    ),
    LabelledPair(
        ("41", "session_1_observation", "John", 3),
        ("41", "session_9_observation", "John", 2),
        DUPLICATE,
        "restatement",
    ),
    LabelledPair(
        ("43", "session_5_observation", "Tim", 0), ("43", "session_5_summary", 1), DUPLICATE, "restatement"
    ),
    LabelledPair(
        ("30", "session_4_observation", "Gina", 4),
        ("30", "session_17_observation", "Gina", 2),
        DUPLICATE,
        "restatement",
    ),
    LabelledPair(
        ("26", "session_4_observation", "Melanie", 0),
        ("26", "session_4_summary", 4),
        DUPLICATE,
        "restatement",
    ),
    LabelledPair(
        ("30", "session_6_observation", "Jon", 4),
        ("30", "session_6_observation", "Gina", 4),
        DIFFERENT,
        "related_fact",
    ),
    LabelledPair(("41", "session_14_summary", 3), ("41", "session_19_summary", 3), DIFFERENT, "related_fact"),
    LabelledPair(
        ("41", "session_7_observation", "Maria", 1),
        ("41", "session_25_observation", "Maria", 2),
        DIFFERENT,
        "related_fact",
    ),
    LabelledPair(
        ("43", "session_20_observation", "John", 1),
        ("43", "events_session_20", "John", 0),
        DUPLICATE,
        "says_less",
        one_way=True,
    ),
    LabelledPair(
        ("30", "session_6_observation", "Gina", 4), ("30", "session_16_summary", 5), DIFFERENT, "related_fact"
    ),
    LabelledPair(
        ("42", "session_1_observation", "Joanna", 0),
        ("42", "session_26_observation", "Joanna", 4),
        DUPLICATE,
        "says_less",
        one_way=True,
    ),
    LabelledPair(
        ("30", "session_4_observation", "Jon", 1),
        ("30", "session_19_observation", "Jon", 0),
        DIFFERENT,
        "related_fact",
    ),
    LabelledPair(("26", "session_12_summary", 4), ("26", "session_14_summary", 6), DIFFERENT, "related_fact"),
    LabelledPair(
        ("26", "session_7_observation", "Caroline", 0),
        ("26", "session_10_observation", "Caroline", 0),
        DIFFERENT,
        "related_fact",
    ),
    LabelledPair(
        ("43", "events_session_26", "Tim", 1),
        ("43", "session_5_observation", "Tim", 1),
        DIFFERENT,
        "related_fact",
    ),
    LabelledPair(
        ("41", "session_23_observation", "Maria", 0),
        ("41", "session_28_observation", "Maria", 2),
        DIFFERENT,
        "related_fact",
    ),
    LabelledPair(("26", "session_2_summary", 9), ("26", "session_12_summary", 3), DIFFERENT, "related_fact"),
    LabelledPair(("42", "session_3_summary", 3), ("42", "session_4_summary", 2), DIFFERENT, "related_fact"),
    LabelledPair(
        ("30", "session_9_observation", "Gina", 4), ("30", "session_5_summary", 3), DIFFERENT, "related_fact"
    ),
    LabelledPair(
        ("42", "session_3_observation", "Joanna", 1),
        ("42", "session_22_summary", 2),
        DIFFERENT,
        "related_fact",
    ),
    LabelledPair(
        ("41", "session_30_observation", "Maria", 5),
        ("41", "session_26_summary", 4),
        DIFFERENT,
        "related_fact",
    ),
    LabelledPair(
        ("30", "session_4_observation", "Gina", 3), ("30", "session_15_summary", 2), DIFFERENT, "related_fact"
    ),
    LabelledPair(
        ("41", "session_28_observation", "Maria", 2),
        ("41", "session_26_summary", 4),
        DIFFERENT,
        "related_fact",
    ),
    LabelledPair(
        ("43", "events_session_13", "Tim", 0), ("43", "session_22_summary", 0), DIFFERENT, "related_fact"
    ),
    LabelledPair(
        ("26", "events_session_13", "Caroline", 1),
        ("26", "session_17_observation", "Caroline", 1),
        DIFFERENT,
        "related_fact",
    ),
    LabelledPair(("26", "session_2_summary", 1), ("26", "session_19_summary", 8), DIFFERENT, "related_fact"),
    LabelledPair(
        ("42", "events_session_21", "Nate", 0),
        ("42", "session_16_observation", "Nate", 2),
        DIFFERENT,
        "related_fact",
    ),
    LabelledPair(("41", "session_22_summary", 1), ("41", "session_26_summary", 7), DIFFERENT, "related_fact"),
    LabelledPair(
        ("42", "session_22_observation", "Nate", 2), ("42", "session_4_summary", 5), DIFFERENT, "related_fact"
    ),
    LabelledPair(("42", "session_17_summary", 3), ("42", "session_25_summary", 2), DIFFERENT, "related_fact"),
    LabelledPair(
        ("30", "session_4_observation", "Gina", 5),
        ("30", "session_18_observation", "Gina", 4),
        DIFFERENT,
        "related_fact",
    ),
    LabelledPair(
        ("26", "session_19_observation", "Caroline", 4),
        ("26", "session_4_summary", 9),
        DIFFERENT,
        "related_fact",
    ),
    LabelledPair(("30", "session_4_summary", 3), ("30", "session_12_summary", 6), DIFFERENT, "related_fact"),
    LabelledPair(
        ("42", "events_session_22", "Joanna", 0), ("42", "session_20_summary", 5), DIFFERENT, "related_fact"
    ),
    LabelledPair(
        ("41", "session_9_observation", "John", 5), ("41", "session_19_summary", 3), DIFFERENT, "related_fact"
    ),
    LabelledPair(
        ("41", "events_session_2", "Maria", 0),
        ("41", "session_29_observation", "Maria", 0),
        DIFFERENT,
        "related_fact",
    ),
    LabelledPair(("26", "session_3_summary", 11), ("26", "session_4_summary", 5), DUPLICATE, "restatement"),
    LabelledPair(
        ("30", "session_2_observation", "Jon", 4), ("30", "session_15_summary", 2), DIFFERENT, "related_fact"
    ),
    LabelledPair(
        ("43", "session_9_observation", "Tim", 2), ("43", "session_9_summary", 2), DUPLICATE, "restatement"
    ),
    LabelledPair(
        ("42", "session_20_observation", "Nate", 2),
        ("42", "session_24_observation", "Nate", 1),
        DUPLICATE,
        "restatement",
    ),
    LabelledPair(
        ("41", "events_session_22", "Maria", 0),
        ("41", "session_22_observation", "Maria", 3),
        DUPLICATE,
        "restatement",
    ),
    LabelledPair(
        ("30", "session_4_observation", "Gina", 2),
        ("30", "session_17_observation", "Gina", 2),
        DUPLICATE,
        "restatement",
    ),
    LabelledPair(
        ("42", "session_5_observation", "Nate", 3),
        ("42", "session_13_observation", "Joanna", 5),
        DUPLICATE,
        "two_sided",
    ),
    LabelledPair(("30", "session_4_summary", 2), ("30", "session_9_summary", 2), DIFFERENT, "related_fact"),
    LabelledPair(
        ("26", "session_3_observation", "Caroline", 4),
        ("26", "session_19_observation", "Caroline", 5),
        DIFFERENT,
        "related_fact",
    ),
    LabelledPair(
        ("26", "session_9_observation", "Caroline", 0),
        ("26", "session_15_summary", 2),
        DIFFERENT,
        "related_fact",
    ),
    LabelledPair(
        ("30", "session_14_observation", "Jon", 4),
        ("30", "session_14_observation", "Gina", 5),
        DUPLICATE,
        "two_sided",
    ),
    LabelledPair(
        ("41", "events_session_13", "John", 1),
        ("41", "session_13_observation", "John", 5),
        DUPLICATE,
        "restatement",
    ),
    LabelledPair(
        ("26", "session_11_observation", "Caroline", 0),
        ("26", "session_10_summary", 5),
        DUPLICATE,
        "restatement",
    ),
    LabelledPair(
        ("41", "session_8_observation", "Maria", 1),
        ("41", "events_session_16", "Maria", 0),
        DUPLICATE,
        "says_less",
        one_way=True,
    ),
    LabelledPair(
        ("30", "session_13_observation", "Gina", 4), ("30", "session_5_summary", 6), DUPLICATE, "restatement"
    ),
    LabelledPair(
        ("42", "session_12_observation", "Nate", 0), ("42", "session_12_summary", 1), DUPLICATE, "restatement"
    ),
    LabelledPair(
        ("26", "session_12_observation", "Caroline", 4),
        ("26", "session_2_summary", 3),
        DIFFERENT,
        "related_fact",
    ),
    LabelledPair(
        ("26", "session_7_observation", "Caroline", 1),
        ("26", "session_1_summary", 3),
        DUPLICATE,
        "restatement",
    ),
    LabelledPair(
        ("26", "session_16_observation", "Caroline", 4),
        ("26", "session_16_summary", 8),
        DUPLICATE,
        "says_less",
        one_way=True,
    ),
    LabelledPair(("26", "session_3_summary", 2), ("26", "session_16_summary", 9), DIFFERENT, "related_fact"),
    LabelledPair(
        ("41", "session_9_observation", "John", 5),
        ("41", "session_14_observation", "John", 1),
        DUPLICATE,
        "restatement",
    ),
    LabelledPair(("26", "session_2_summary", 1), ("26", "session_12_summary", 7), DIFFERENT, "related_fact"),
    LabelledPair(
        ("26", "events_session_1", "Caroline", 0), ("26", "session_7_summary", 1), DIFFERENT, "related_fact"
    ),
    LabelledPair(
        ("41", "events_session_17", "John", 0),
        ("41", "session_17_observation", "John", 0),
        DUPLICATE,
        "restatement",
    ),
    LabelledPair(
        ("41", "session_6_observation", "John", 5),
        ("41", "session_29_observation", "Maria", 5),
        DIFFERENT,
        "related_fact",
    ),
    LabelledPair(
        ("41", "events_session_11", "Maria", 0),
        ("41", "session_11_observation", "Maria", 0),
        DUPLICATE,
        "restatement",
    ),
]

_MELANIE_MARRIED = ("26", "session_3_observation", "Melanie", 4)
_NATE_TURTLES = ("42", "events_session_25", "Nate", 0)
_TIM_STUDY = ("43", "session_18_observation", "Tim", 2)
_TIM_VIOLIN = ("43", "events_session_21", "Tim", 1)
_JOHN_ROAD_TRIP = ("41", "events_session_1", "John", 0)
_JOHN_TEAMMATES = ("43", "session_9_observation", "John", 1)
_NATE_NEXT_TOURNAMENT = ("42", "session_9_observation", "Nate", 0)
_JOHN_TRIVIA = ("43", "session_22_observation", "John", 0)
_CAROLINE_GROUP = ("26", "session_10_observation", "Caroline", 0)
_JOHN_ASSISTS = ("43", "session_23_observation", "John", 0)
_TIM_CONFERENCE = ("43", "events_session_7", "Tim", 0)
_NATE_HIGH_SCORES = ("42", "events_session_26", "Nate", 0)
_MELANIE_CLARINET = ("26", "session_15_observation", "Melanie", 1)
_JOHN_FUNDRAISER = ("41", "session_16_observation", "John", 2)
_TIM_GALWAY = ("43", "session_28_observation", "Tim", 2)
_NATE_DOG = ("42", "session_13_observation", "Nate", 0)
_JOHN_PRACTICE = ("43", "session_27_observation", "John", 2)
_JON_PROMOTING = ("30", "session_14_observation", "Jon", 1)

#: Hand-made hard cases: one real sentence against a variant of itself.
CONSTRUCTED: list[LabelledPair] = [
    # A changed number or date in the same statement: the new card supersedes the old one.
    LabelledPair(
        _MELANIE_MARRIED, _edit(_MELANIE_MARRIED, ("5 years", "7 years")), CONFLICT, "changed_number"
    ),
    LabelledPair(_NATE_TURTLES, _edit(_NATE_TURTLES, ("two", "three")), CONFLICT, "changed_number"),
    LabelledPair(_TIM_STUDY, _edit(_TIM_STUDY, ("25 minutes", "45 minutes")), CONFLICT, "changed_number"),
    LabelledPair(_TIM_VIOLIN, _edit(_TIM_VIOLIN, ("four months", "six months")), CONFLICT, "changed_number"),
    LabelledPair(
        _JOHN_ROAD_TRIP, _edit(_JOHN_ROAD_TRIP, ("four kids", "three kids")), CONFLICT, "changed_number"
    ),
    LabelledPair(
        _JOHN_TEAMMATES, _edit(_JOHN_TEAMMATES, ("four years", "three years")), CONFLICT, "changed_number"
    ),
    LabelledPair(
        _NATE_NEXT_TOURNAMENT,
        _edit(_NATE_NEXT_TOURNAMENT, ("4th one", "5th one")),
        CONFLICT,
        "changed_number",
    ),
    LabelledPair(_JOHN_TRIVIA, _edit(_JOHN_TRIVIA, ("in August", "in September")), CONFLICT, "changed_date"),
    LabelledPair(_CAROLINE_GROUP, _edit(_CAROLINE_GROUP, ("Tuesday", "Thursday")), CONFLICT, "changed_date"),
    LabelledPair(_JOHN_ASSISTS, _edit(_JOHN_ASSISTS, ("Friday", "Monday")), CONFLICT, "changed_date"),
    LabelledPair(_TIM_CONFERENCE, _edit(_TIM_CONFERENCE, ("September", "October")), CONFLICT, "changed_date"),
    LabelledPair(
        _NATE_HIGH_SCORES, _edit(_NATE_HIGH_SCORES, ("in August", "in July")), CONFLICT, "changed_date"
    ),
    # A negation of the same statement: a conflict too.
    LabelledPair(
        _MELANIE_CLARINET, _edit(_MELANIE_CLARINET, ("plays the", "does not play the")), CONFLICT, "negation"
    ),
    LabelledPair(
        _JOHN_FUNDRAISER,
        _edit(_JOHN_FUNDRAISER, ("is enthusiastic", "is not enthusiastic")),
        CONFLICT,
        "negation",
    ),
    LabelledPair(_TIM_GALWAY, _edit(_TIM_GALWAY, ("is excited", "is not excited")), CONFLICT, "negation"),
    LabelledPair(_NATE_DOG, _edit(_NATE_DOG, ("has a dog", "no longer has a dog")), CONFLICT, "negation"),
    LabelledPair(
        _JOHN_PRACTICE, _edit(_JOHN_PRACTICE, ("practices", "no longer practices")), CONFLICT, "negation"
    ),
    LabelledPair(
        _JON_PROMOTING, _edit(_JON_PROMOTING, ("is working", "is not working")), CONFLICT, "negation"
    ),
    # Two different people doing the same thing.
    LabelledPair(
        ("26", "events_session_9", "Caroline", 0),
        _edit(("26", "events_session_9", "Caroline", 0), ("Caroline", "Melanie")),
        DIFFERENT,
        "other_person",
    ),
    LabelledPair(
        ("41", "events_session_21", "John", 0),
        _edit(("41", "events_session_21", "John", 0), ("John", "Maria")),
        DIFFERENT,
        "other_person",
    ),
    LabelledPair(
        ("43", "session_4_observation", "Tim", 0),
        _edit(("43", "session_4_observation", "Tim", 0), ("Tim", "John")),
        DIFFERENT,
        "other_person",
    ),
    LabelledPair(
        _MELANIE_CLARINET, _edit(_MELANIE_CLARINET, ("Melanie", "Caroline")), DIFFERENT, "other_person"
    ),
    LabelledPair(
        _NATE_NEXT_TOURNAMENT, _edit(_NATE_NEXT_TOURNAMENT, ("Nate", "Joanna")), DIFFERENT, "other_person"
    ),
    LabelledPair(
        ("43", "session_27_observation", "John", 1),
        _edit(("43", "session_27_observation", "John", 1), ("John", "Tim")),
        DIFFERENT,
        "other_person",
    ),
    LabelledPair(
        ("41", "session_7_observation", "Maria", 3),
        _edit(("41", "session_7_observation", "Maria", 3), ("Maria", "John")),
        DIFFERENT,
        "other_person",
    ),
    LabelledPair(
        ("42", "events_session_17", "Nate", 0),
        _edit(("42", "events_session_17", "Nate", 0), ("Nate", "Joanna")),
        DIFFERENT,
        "other_person",
    ),
    LabelledPair(_JON_PROMOTING, _edit(_JON_PROMOTING, ("Jon", "Gina")), DIFFERENT, "other_person"),
    LabelledPair(
        ("41", "session_31_observation", "Maria", 4),
        _edit(("41", "session_31_observation", "Maria", 4), ("Maria", "John")),
        DIFFERENT,
        "other_person",
    ),
    # Who did what to whom, swapped: two facts.
    LabelledPair(
        ("30", "session_18_summary", 2),
        _edit(("30", "session_18_summary", 2), ("Gina encouraged Jon", "Jon encouraged Gina")),
        DIFFERENT,
        "role_swap",
    ),
    LabelledPair(
        ("30", "session_4_observation", "Gina", 3),
        _edit(
            ("30", "session_4_observation", "Gina", 3),
            ("Gina is supportive of Jon", "Jon is supportive of Gina"),
        ),
        DIFFERENT,
        "role_swap",
    ),
    LabelledPair(
        _JOHN_FUNDRAISER,
        _edit(_JOHN_FUNDRAISER, ("John is", "Maria is"), ("helping Maria with her", "helping John with his")),
        DIFFERENT,
        "role_swap",
    ),
    LabelledPair(
        ("26", "session_16_summary", 9),
        _edit(
            ("26", "session_16_summary", 9),
            ("Melanie was", "Caroline was"),
            ("of Caroline's", "of Melanie's"),
        ),
        DIFFERENT,
        "role_swap",
    ),
    LabelledPair(
        ("42", "session_18_observation", "Joanna", 4),
        _edit(
            ("42", "session_18_observation", "Joanna", 4),
            ("Joanna is appreciative of Nate's", "Nate is appreciative of Joanna's"),
        ),
        DIFFERENT,
        "role_swap",
    ),
    LabelledPair(
        ("42", "session_7_observation", "Joanna", 2),
        _edit(
            ("42", "session_7_observation", "Joanna", 2),
            ("Joanna appreciates Nate's", "Nate appreciates Joanna's"),
            ("her writing", "his writing"),
        ),
        DIFFERENT,
        "role_swap",
    ),
    LabelledPair(
        ("26", "session_11_observation", "Melanie", 4),
        _edit(
            ("26", "session_11_observation", "Melanie", 4),
            ("Melanie admires Caroline's", "Caroline admires Melanie's"),
        ),
        DIFFERENT,
        "role_swap",
    ),
    LabelledPair(
        ("30", "session_4_observation", "Gina", 1),
        _edit(
            ("30", "session_4_observation", "Gina", 1),
            ("Gina encourages Jon", "Jon encourages Gina"),
            ("him he'll", "her she'll"),
        ),
        DIFFERENT,
        "role_swap",
    ),
    LabelledPair(
        ("43", "session_6_summary", 6),
        _edit(
            ("43", "session_6_summary", 6),
            ("Tim expressed admiration for John's", "John expressed admiration for Tim's"),
        ),
        DIFFERENT,
        "role_swap",
    ),
    LabelledPair(
        ("26", "session_13_summary", 0),
        _edit(
            ("26", "session_13_summary", 0), ("Caroline shared with Melanie", "Melanie shared with Caroline")
        ),
        DIFFERENT,
        "role_swap",
    ),
    LabelledPair(
        ("41", "session_16_observation", "Maria", 1),
        _edit(
            ("41", "session_16_observation", "Maria", 1),
            ("Maria shared", "John shared"),
            ("with John", "with Maria"),
        ),
        DIFFERENT,
        "role_swap",
    ),
    # One event in the other voice, or a joint event told from each side: one fact.
    LabelledPair(
        ("42", "session_13_observation", "Joanna", 2),
        _edit(
            ("42", "session_13_observation", "Joanna", 2),
            ("the stuffed animal gifted to her by Nate", "the stuffed animal Nate gifted to her"),
        ),
        DUPLICATE,
        "active_passive",
    ),
    LabelledPair(
        ("26", "session_14_summary", 3),
        _edit(
            ("26", "session_14_summary", 3),
            (
                "Melanie shows Caroline a pottery plate she made",
                "Caroline is shown a pottery plate made by Melanie",
            ),
        ),
        DUPLICATE,
        "active_passive",
    ),
    LabelledPair(
        ("41", "session_27_summary", 2),
        _edit(
            ("41", "session_27_summary", 2),
            ("Maria praised John's efforts", "John's efforts were praised by Maria"),
        ),
        DUPLICATE,
        "active_passive",
    ),
    LabelledPair(
        ("30", "session_18_summary", 2),
        _edit(("30", "session_18_summary", 2), ("Gina encouraged Jon", "Jon was encouraged by Gina")),
        DUPLICATE,
        "active_passive",
    ),
    LabelledPair(
        ("42", "session_4_summary", 2),
        _edit(
            ("42", "session_4_summary", 2),
            (
                "Nate offered to share a dairy-free recipe with Joanna",
                "Joanna was offered a dairy-free recipe by Nate",
            ),
        ),
        DUPLICATE,
        "active_passive",
    ),
    LabelledPair(
        ("43", "session_9_summary", 5),
        _edit(
            ("43", "session_9_summary", 5),
            (
                "John offered assistance with Tim's travel plans",
                "Tim was offered assistance with his travel plans by John",
            ),
        ),
        DUPLICATE,
        "active_passive",
    ),
    LabelledPair(
        ("30", "session_18_observation", "Jon", 4),
        _edit(
            ("30", "session_18_observation", "Jon", 4),
            ("Jon plans to collaborate with Gina", "Gina plans to collaborate with Jon"),
        ),
        DUPLICATE,
        "joint",
    ),
    LabelledPair(
        ("41", "session_5_summary", 0),
        _edit(("41", "session_5_summary", 0), ("John and Maria discussed", "John discussed with Maria")),
        DUPLICATE,
        "joint",
    ),
    LabelledPair(
        ("41", "session_11_summary", 4),
        _edit(("41", "session_11_summary", 4), ("Maria and John discussed", "John discussed with Maria")),
        DUPLICATE,
        "joint",
    ),
    LabelledPair(
        ("41", "session_25_summary", 3),
        _edit(("41", "session_25_summary", 3), ("John and Maria discussed", "Maria discussed with John")),
        DUPLICATE,
        "joint",
    ),
    LabelledPair(
        ("41", "session_22_summary", 0),
        _edit(("41", "session_22_summary", 0), ("John and Maria discussed", "Maria and John discussed")),
        DUPLICATE,
        "joint",
    ),
]

#: Every labelled pair: what `python -m bench.pairs` measures and the thresholds were chosen on.
LABELLED: list[LabelledPair] = [*_first_pairs(), *MINED, *CONSTRUCTED]
