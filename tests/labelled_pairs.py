"""Sentence pairs of the LoCoMo conversations, labelled for dedup: one fact restated, or two different facts.

The pairs are real memory facts, events and session-summary sentences of the benchmark conversations
(snap-research/locomo), restated by different writers or related but different. They are loaded from the
dataset by position (`tests.locomo`), never copied here; tests that load them are skipped when the dataset
is absent. The dedup thresholds were measured on them (docs/design/dedup.md).
"""

from __future__ import annotations

from tests.locomo import Ref, sentence

#: Two sentences of the dataset, by position.
Pair = tuple[Ref, Ref]

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
