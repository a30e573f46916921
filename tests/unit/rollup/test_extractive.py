"""Extractive cards: paraphrased units collapse into one card with all their sources.

The paraphrased units are real memory facts, events and summary sentences of the LoCoMo benchmark
conversations (snap-research/locomo), loaded from the dataset by position (`tests.locomo`); tests using them
are skipped when the dataset is absent. The other sentences are written for these tests.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dreamer.rollup.extractive import (
    MAX_CARD_CHARS,
    CardKind,
    InvalidExtractionError,
    SourceUnit,
    classify,
    extract_cards,
)
from dreamer.rollup.salience import SalienceInput
from tests.locomo import Ref, ref_id, require_data, sentence

#: Three wordings of one mentoring fact (an event, an observation, a summary sentence).
MENTORING: tuple[Ref, Ref, Ref] = (
    ("26", "events_session_9", "Caroline", 0),
    ("26", "session_9_observation", "Caroline", 0),
    ("26", "session_9_summary", 0),
)
#: Two wordings of one pet walk, the first naming the pets' count with one word more.
TURTLE_WALK: tuple[Ref, Ref] = (("42", "events_session_5", "Nate", 0), ("42", "events_session_25", "Nate", 0))


def units() -> list[SourceUnit]:
    """Paraphrased dataset units, and a variant of one with another count (a protected detail)."""
    walk = sentence(TURTLE_WALK[1])
    other_count = walk.replace("two", "three")
    assert other_count != walk
    return [
        SourceUnit("u1", sentence(MENTORING[0])),
        SourceUnit("u2", sentence(TURTLE_WALK[0])),
        SourceUnit("u3", sentence(MENTORING[1])),
        SourceUnit("u4", walk),
        SourceUnit("u5", other_count),
        SourceUnit("u6", sentence(MENTORING[2])),
    ]


class TestExtractCards:
    def test_paraphrases_collapse_into_one_card_with_all_sources(self) -> None:
        """Units restating one fact become one card listing every unit id, in input order."""
        cards = extract_cards(units(), max_cards=10)
        assert [card.source_ids for card in cards] == [("u1", "u3", "u6"), ("u2", "u4"), ("u5",)]

    def test_card_text_is_the_most_informative_member(self) -> None:
        """The card keeps the wording with the most distinct content words."""
        cards = extract_cards(units(), max_cards=10)
        assert cards[0].text == sentence(MENTORING[2])
        assert cards[1].text == sentence(TURTLE_WALK[0])

    @pytest.mark.parametrize("hidden_first", [True, False])
    def test_the_clean_form_is_chosen_over_an_invisible_character_variant(self, hidden_first: bool) -> None:
        """"a\u200btlas" (a zero-width space) and "atlas" are one fact, whichever comes first, and
        the card shows the form without the invisible character."""
        clean = SourceUnit("c", "Nextcloud runs on host atlas behind nginx.")
        hidden = SourceUnit("h", "Nextcloud runs on host a\u200btlas behind ngi\u00adnx.")
        cards = extract_cards([hidden, clean] if hidden_first else [clean, hidden], max_cards=10)
        assert [card.text for card in cards] == [clean.text]
        assert sorted(cards[0].source_ids) == ["c", "h"]

    def test_a_joint_event_told_from_each_side_is_one_card(self) -> None:
        """Two tellings of one joint plan, each from one side, merge into one card."""
        units = [
            SourceUnit("a", "Evan plans a painting session with Sam"),
            SourceUnit("b", "Sam plans a painting session with Evan"),
        ]
        assert [card.source_ids for card in extract_cards(units, max_cards=10)] == [("a", "b")]

    def test_protected_detail_keeps_units_apart(self) -> None:
        """Units differing in a number or in who did what stay separate cards."""
        units = [
            SourceUnit("a", "Evan invited Sam to a painting session"),
            SourceUnit("b", "Sam invited Evan to a painting session"),
            SourceUnit("c", "Nate has two turtles."),
            SourceUnit("d", "Nate has three turtles."),
        ]
        assert [card.source_ids for card in extract_cards(units, max_cards=10)] == [
            ("a",),
            ("b",),
            ("c",),
            ("d",),
        ]

    def test_no_chaining_through_an_intermediate_unit(self) -> None:
        """A unit close to one member but covered by no card starts its own card."""
        units = [
            SourceUnit("a", "Nate feeds his turtles lettuce, carrots and apples."),
            SourceUnit("b", "Nate feeds his turtles lettuce, carrots, apples, pears and grapes."),
            SourceUnit("c", "Nate feeds his turtles melons, plums, figs and grapes."),
        ]
        assert [card.source_ids for card in extract_cards(units, max_cards=10)] == [("a", "b"), ("c",)]

    def test_a_unit_a_fuller_unit_covers_shares_its_card_and_keeps_its_new_words(self) -> None:
        """A unit whose words a fuller unit of the batch mostly says joins that unit's card; the
        word the fuller one lacks ("melons") stays in the card as the unit's own sentence."""
        units = [
            SourceUnit("a", "Nate feeds his turtles lettuce, carrots and apples."),
            SourceUnit("b", "Nate feeds his turtles lettuce, carrots, apples, pears and grapes."),
            SourceUnit("c", "Nate feeds his turtles carrots, apples, pears, grapes and melons."),
        ]
        [card] = extract_cards(units, max_cards=10)
        assert card.source_ids == ("a", "b", "c")
        assert card.text == (
            "Nate feeds his turtles lettuce, carrots, apples, pears and grapes. "
            "Nate feeds his turtles carrots, apples, pears, grapes and melons."
        )

    def test_a_unit_the_fuller_one_says_outright_adds_only_its_id(self) -> None:
        """A shorter telling whose content words are a run of the fuller one's adds only its id."""
        units = [
            SourceUnit("short", "Melanie finds pottery relaxing"),
            SourceUnit(
                "full", "Melanie finds pottery relaxing and creative since she made a plate in class."
            ),
        ]
        [card] = extract_cards(units, max_cards=10)
        assert card.source_ids == ("short", "full")
        assert card.text == units[1].text

    @pytest.mark.parametrize(
        ("short", "full"),
        [
            ("Sam likes tea.", "Evan likes tea and Sam likes coffee."),
            ("Joanna likes romance movies.", "Nate likes romance novels and Joanna likes action movies."),
        ],
    )
    def test_sharing_every_word_is_not_saying_it(self, short: str, full: str) -> None:
        """A unit whose words are all in the fuller text, but not as one run, keeps its sentence:
        "Sam likes tea" is not what "Evan likes tea and Sam likes coffee" says."""
        cards = extract_cards([SourceUnit("short", short), SourceUnit("full", full)], max_cards=10)
        assert [card.source_ids for card in cards] == [("short", "full")]
        assert cards[0].text == f"{full} {short.rstrip('.')}."

    @pytest.mark.parametrize(
        ("short", "full"),
        [
            ("Nate has 2 turtles.", "Nate has 3 turtles and 2 dogs."),
            ("Sam moved to Berlin in 2020.", "Sam moved to Paris in 2020 and to Berlin in 2022."),
            ("Grafana listens on port 3000.", "Grafana listens on port 9090 and Prometheus on port 3000."),
        ],
    )
    def test_a_value_the_fuller_text_binds_to_something_else_keeps_its_own_card(
        self, short: str, full: str
    ) -> None:
        """The fuller text repeats the unit's value among others: which one the unit's fact is about
        is unclear, so the unit keeps its own card, word for word."""
        cards = extract_cards([SourceUnit("short", short), SourceUnit("full", full)], max_cards=10)
        assert sorted(card.text for card in cards) == sorted([short, full])

    @pytest.mark.parametrize(
        ("short", "why"),
        [
            ("Caroline joined a mentorship program in 2022.", "a date the fuller text lacks"),
            ("Caroline did not join a mentorship program for LGBTQ youth.", "a negation"),
            ("Melanie joined a mentorship program for LGBTQ youth.", "another person"),
            ("Caroline joined 3 mentorship programs for LGBTQ youth.", "a number the fuller text lacks"),
        ],
    )
    def test_a_detail_the_fuller_unit_lacks_keeps_the_card_apart(self, short: str, why: str) -> None:
        """Coverage never hides a protected detail: the shorter unit keeps its own card."""
        units = [
            SourceUnit(
                "full", "Caroline joined a mentorship program for LGBTQ youth, which she finds rewarding."
            ),
            SourceUnit("short", short),
        ]
        cards = extract_cards(units, max_cards=10)
        assert [card.source_ids for card in cards] == [("full",), ("short",)], why
        assert cards[1].text == short

    def test_a_negation_on_another_word_keeps_the_card_apart(self) -> None:
        """ "Sam does not like tea" is no restatement of "Sam likes tea, not coffee", nor covered."""
        units = [SourceUnit("a", "Sam likes tea, not coffee."), SourceUnit("b", "Sam does not like tea.")]
        cards = extract_cards(units, max_cards=10)
        assert [card.text for card in cards] == [units[0].text, units[1].text]

    def test_a_swapped_role_keeps_the_card_apart(self) -> None:
        """A swapped role is another fact: "Sam is grateful for Evan's support" is not covered by
        "Evan is grateful for Sam's support and his help"."""
        units = [
            SourceUnit("a", "Evan is grateful for Sam's support and his help with the move."),
            SourceUnit("b", "Sam is grateful for Evan's support."),
        ]
        assert [card.source_ids for card in extract_cards(units, max_cards=10)] == [("a",), ("b",)]

    def test_a_card_never_grows_past_the_limit(self) -> None:
        """A covered unit whose sentence would push the card past MAX_CARD_CHARS keeps its own card
        instead of being cut."""
        head = "Nate feeds his turtles lettuce, carrots, apples, pears and grapes " + "every single day " * 18
        units = [
            SourceUnit("head", head.strip() + "."),
            SourceUnit("more", "Nate feeds his turtles lettuce, carrots, apples, pears and melons."),
        ]
        assert len(units[0].text) < MAX_CARD_CHARS < len(units[0].text) + len(units[1].text)
        cards = extract_cards(units, max_cards=10)
        assert [card.source_ids for card in cards] == [("head",), ("more",)]
        assert [card.text for card in cards] == [units[0].text, units[1].text]

    def test_a_covered_unit_keeps_every_content_word(self) -> None:
        """Units folded in by coverage (none restates another) lose no content word."""
        from dreamer.text import content_tokens

        batch = [
            SourceUnit("f1", "Nate feeds his turtles lettuce, carrots, apples, pears and grapes."),
            SourceUnit("f2", "Nate feeds his turtles pears, grapes and melons."),
            SourceUnit("f3", "Melanie says that pottery is relaxing"),
            SourceUnit(
                "f4", "Melanie made a plate in pottery class and finds pottery relaxing and creative."
            ),
            SourceUnit("f5", "Melanie finds pottery relaxing, and her kids love the pottery class too."),
        ]
        cards = extract_cards(batch, max_cards=len(batch))
        assert [card.source_ids for card in cards] == [("f1", "f2"), ("f3", "f4", "f5")]
        card_of = {i: card for card in cards for i in card.source_ids}
        for unit in batch:
            assert set(content_tokens(unit.text)) <= set(content_tokens(card_of[unit.id].text)), unit.text

    def test_every_unit_of_real_sessions_is_listed_once(self) -> None:
        """On whole LoCoMo sessions, every unit's id is in exactly one card."""
        from bench.locomo.data import load_conversations

        [conversation] = load_conversations(require_data(), 1)
        for session in conversation.sessions[:5]:
            batch = [SourceUnit(f"u{i}", unit.text) for i, unit in enumerate(session.units)]
            cards = extract_cards(batch, max_cards=len(batch))
            listed = [i for card in cards for i in card.source_ids]
            assert sorted(listed) == sorted(u.id for u in batch)
            assert len(cards) < len(batch)
            assert all(len(card.text) <= MAX_CARD_CHARS for card in cards)

    def test_max_cards_keeps_the_first_clusters(self) -> None:
        """With more clusters than allowed, the clusters of the most salient units are kept."""
        cards = extract_cards(units(), max_cards=2)
        assert [card.source_ids[0] for card in cards] == ["u1", "u2"]

    def test_deterministic(self) -> None:
        """The same units give the same cards."""
        assert extract_cards(units(), max_cards=10) == extract_cards(list(units()), max_cards=10)

    def test_blank_units_are_skipped(self) -> None:
        """A unit without text makes no card."""
        cards = extract_cards([SourceUnit("blank", "  "), SourceUnit("x", "Joanna writes screenplays.")], 5)
        assert [card.source_ids for card in cards] == [("x",)]

    def test_accepts_salience_inputs(self) -> None:
        """Units straight from salience (anything with an id and a text) can be extracted."""
        unit = SalienceInput("s1", "Joanna writes screenplays.", datetime(2022, 1, 21, tzinfo=UTC), 2)
        assert extract_cards([unit], 1)[0].source_ids == ("s1",)

    def test_a_long_sentence_is_kept_whole(self) -> None:
        """A card is never cut: a single sentence longer than the cap stays whole."""
        text = "Joanna wrote " + "a long and winding screenplay " * 30 + "set in 1999."
        card = extract_cards([SourceUnit("long", text)], 1)[0]
        assert card.text == " ".join(text.split()) and len(card.text) > MAX_CARD_CHARS

    def test_negative_max_cards_is_refused(self) -> None:
        """A negative card count is a typed error."""
        with pytest.raises(InvalidExtractionError, match="0 or more"):
            extract_cards([SourceUnit("x", "Joanna writes screenplays.")], -1)


class TestClassify:
    @pytest.mark.parametrize(
        ("text", "kind"),
        [
            ("Always answer in British English.", CardKind.INSTRUCTION),
            ("Do not restart the NAS during backups.", CardKind.INSTRUCTION),
            ("The user wants the assistant to keep replies short.", CardKind.INSTRUCTION),
        ],
    )
    def test_rule_kinds(self, text: str, kind: CardKind) -> None:
        """Cue words decide: instruction, preference, relationship, identity, event in turn; else fact."""
        assert classify(text) is kind

    @pytest.mark.parametrize(
        ("ref", "kind"),
        [
            (("42", "session_11_observation", "Joanna", 0), CardKind.PREFERENCE),
            (("42", "session_15_observation", "Joanna", 2), CardKind.PREFERENCE),
            (("26", "session_4_observation", "Caroline", 0), CardKind.RELATIONSHIP),
            (("30", "session_5_observation", "Jon", 0), CardKind.IDENTITY),
            (("42", "session_14_observation", "Nate", 0), CardKind.EVENT),
            (("26", "session_13_observation", "Caroline", 2), CardKind.FACT),
        ],
        ids=ref_id,
    )
    def test_rule_kinds_of_dataset_facts(self, ref: Ref, kind: CardKind) -> None:
        """The same cues decide on real memory facts (the first clause of each, loaded from the dataset)."""
        assert classify(sentence(ref).partition(",")[0]) is kind


_WORDS = ["Nate", "Joanna", "turtles", "feeds", "pottery", "2022", "not", "v2.1", "park", "his", "and", "5"]


class TestExtractCardsOnAnyText:
    @settings(max_examples=200, deadline=None)
    @given(
        st.lists(
            st.one_of(
                st.lists(st.sampled_from(_WORDS), min_size=1, max_size=12).map(" ".join),
                st.text(max_size=600),
            ),
            max_size=25,
        )
    )
    def test_every_unit_is_listed_once_and_no_card_is_too_long(self, texts: list[str]) -> None:
        """Whatever the texts (hostile, empty, long, near-copies): each non-blank unit's id is in
        exactly one card, and no card is longer than MAX_CARD_CHARS."""
        batch = [SourceUnit(f"u{i}", text) for i, text in enumerate(texts)]
        cards = extract_cards(batch, max_cards=len(batch))
        listed = [i for card in cards for i in card.source_ids]
        assert sorted(listed) == sorted(u.id for u in batch if u.text.strip())
        assert all(0 < len(card.text) <= MAX_CARD_CHARS for card in cards)
