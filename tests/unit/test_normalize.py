"""Canonical card text, leading date clauses, tokens and content-derived document ids.

Where a test needs a real memory sentence, it loads one from the LoCoMo benchmark conversations
(snap-research/locomo) by position (`tests.locomo`) and is skipped when the dataset is absent; the other
sentences are written for these tests.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dreamer.text import (
    EmptyCardTextError,
    InvalidProfileError,
    card_document_id,
    content_tokens,
    normalize_text,
    shingles,
    strip_leading_date_clause,
    tokens,
    without_leading_date_clause,
)
from tests.locomo import Ref, ref_id, sentence

# Words that build sentences with and without leading date clauses, for property tests.
_DATE_WORDS = st.sampled_from(
    ["On", "in", "8", "May", "2023,", "Yesterday,", "last", "week", "Tuesday", "Evan", "moved", "at", "7:37",
     "pm", "the", "2023-05-08:", "and", "ago", "two", "days", "June", "5th", "of", "Sam's", "don't", "—"]
)  # fmt: skip


class TestNormalizeText:
    def test_nfkc_folds_compatibility_characters(self) -> None:
        """Full-width letters and ligatures compare equal to their plain forms."""
        assert normalize_text("Ｎａｔｅ ｗｏｎ the ﬁnal") == normalize_text("Nate won the final")

    def test_casefold_is_stronger_than_lower(self) -> None:
        """Case folding maps "ß" to "ss", so "STRASSE" and "Straße" are the same word."""
        assert normalize_text("Evan lives on Hauptstraße") == normalize_text("EVAN LIVES ON HAUPTSTRASSE")

    def test_punctuation_and_whitespace_disappear(self) -> None:
        """Punctuation separates words and runs of whitespace collapse to one space (a dataset fact)."""
        fact = sentence(("30", "session_6_observation", "Gina", 0))
        mangled = (
            "  " + fact.replace("Door Dash", "Door-Dash").replace(" ", "   ").replace(".", "!!\t") + "  "
        )
        assert "-" in mangled and "!!" in mangled
        assert normalize_text(mangled) == fact.lower().removesuffix(".")

    def test_possessives_and_contractions_join(self) -> None:
        """A possessive "'s" is dropped and other apostrophes join the word ("don't" is "dont")."""
        assert normalize_text("Nate’s turtles don't bite") == "nate turtles dont bite"

    @pytest.mark.parametrize(
        ("text", "expected"),
        [
            ("On 8 May 2023, Evan moved to Boston.", "evan moved to boston"),
            ("On 8 May, 2023, Evan moved to Boston.", "evan moved to boston"),
            ("On May 8, 2023, Evan moved to Boston.", "evan moved to boston"),
            ("In June 2023 Evan moved to Boston.", "evan moved to boston"),
            ("In June, Evan moved to Boston.", "evan moved to boston"),
            ("Yesterday, Evan moved to Boston.", "evan moved to boston"),
            ("On Tuesday Evan moved to Boston.", "evan moved to boston"),
            ("Last week, Evan moved to Boston.", "evan moved to boston"),
            ("Two weeks ago Evan moved to Boston.", "evan moved to boston"),
            ("2023-05-08: Evan moved to Boston.", "evan moved to boston"),
            ("2023-05-08T10:00:00Z Evan moved to Boston.", "evan moved to boston"),
            ("[2023-05-08] Evan moved to Boston.", "evan moved to boston"),
        ],
    )
    def test_leading_date_clause_is_stripped(self, text: str, expected: str) -> None:
        """A leading date or time clause, in any of its usual spellings, is not part of the fact."""
        assert normalize_text(text) == expected

    @pytest.mark.parametrize(
        ("ref", "subject"),
        [(("42", "session_7_summary", 0), "Nate"), (("42", "session_15_summary", 0), "Joanna")],
        ids=ref_id,
    )
    def test_leading_date_clause_of_a_summary_is_stripped(self, ref: Ref, subject: str) -> None:
        """A dataset summary sentence opening with a time and date normalises like its body alone."""
        summary = sentence(ref)
        body = summary[summary.index(subject) :]
        assert body != summary
        assert normalize_text(summary) == normalize_text(body)
        assert normalize_text(body).startswith(subject.lower() + " ")

    def test_same_fact_on_different_days_is_equal(self) -> None:
        """Two dataset summaries of one fact written on different days normalise to the same text."""
        first = sentence(("43", "session_12_summary", 0))
        second = sentence(("43", "session_24_summary", 0))
        assert first != second
        assert normalize_text(first) == normalize_text(second) == normalize_text(first[first.index("Tim") :])

    @pytest.mark.parametrize(
        ("text", "expected"),
        [
            ("In Boston, Evan met Sam.", "in boston evan met sam"),
            ("May I bring the dog?", "may i bring the dog"),
            ("Nate won his second tournament on 8 May 2023.", "nate won his second tournament on 8 may 2023"),
            (
                "2023 was the year Joanna finished her screenplay.",
                "2023 was the year joanna finished her screenplay",
            ),
        ],
    )
    def test_words_that_are_not_a_leading_date_clause_stay(self, text: str, expected: str) -> None:
        """Places, the verb "may", dates inside the sentence and a bare year as subject are kept."""
        assert normalize_text(text) == expected

    def test_text_that_is_only_a_date_is_kept(self) -> None:
        """A text made only of a date clause keeps it rather than becoming empty."""
        assert normalize_text("On 8 May 2023") == "on 8 may 2023"

    @given(st.text())
    def test_idempotent_on_any_text(self, text: str) -> None:
        """Normalising normalised text changes nothing, whatever the characters."""
        once = normalize_text(text)
        assert normalize_text(once) == once

    @given(st.lists(_DATE_WORDS, max_size=12))
    def test_idempotent_on_date_heavy_text(self, words: list[str]) -> None:
        """Idempotence holds for texts built from date words, where clause stripping does the most work."""
        once = normalize_text(" ".join(words))
        assert normalize_text(once) == once


class TestStripLeadingDateClause:
    def test_strips_chained_units(self) -> None:
        """Several date units in a row ("on 8 may 2023 and at 5 pm") go together."""
        assert strip_leading_date_clause("on 8 may 2023 and at 5 pm evan ran") == "evan ran"

    def test_possessive_relative_date_is_a_date(self) -> None:
        """ "This week's meeting" loses its leading "this week" like "this week, the meeting" would."""
        assert normalize_text("This week's meeting was moved.") == "meeting was moved"


class TestWithoutLeadingDateClause:
    def test_keeps_case_and_punctuation_of_the_body(self) -> None:
        """The raw body after the clause keeps its case and punctuation (names and URLs need them)."""
        assert (
            without_leading_date_clause("On 8 May 2023, Evan's host is https://Nas.example.com/x.")
            == "Evan's host is https://Nas.example.com/x."
        )

    def test_text_without_clause_is_unchanged(self) -> None:
        """Text that does not start with a date comes back as it was, trimmed."""
        assert without_leading_date_clause("  Evan met Sam on 8 May. ") == "Evan met Sam on 8 May."


class TestTokensAndShingles:
    def test_tokens_are_the_normalised_words_in_order(self) -> None:
        """`tokens` splits the normalised text, keeping order and repeats."""
        assert tokens("Yesterday, Nate fed Nate's turtles.") == ["nate", "fed", "nate", "turtles"]

    def test_tokens_of_empty_text(self) -> None:
        """Text without words has no tokens."""
        assert tokens(" !? ") == []

    def test_shingles_are_character_trigrams(self) -> None:
        """Shingles are the distinct 3-character windows of the normalised text, spaces included."""
        assert shingles("Ab, c") == frozenset({"ab ", "b c"})

    def test_short_text_is_one_shingle(self) -> None:
        """Text no longer than the shingle size is a single shingle; empty text has none."""
        assert shingles("ok") == frozenset({"ok"})
        assert shingles("...") == frozenset()

    def test_shingle_size_must_be_positive(self) -> None:
        """A shingle size below 1 is refused."""
        with pytest.raises(ValueError, match="at least 1"):
            shingles("text", n=0)


class TestContentTokens:
    def test_drops_function_words_and_narration(self) -> None:
        """Stopwords and reporting verbs ("mentioned") are not content (a dataset summary sentence)."""
        assert content_tokens(sentence(("26", "session_13_summary", 2))) == [
            "carolin",
            "guinea",
            "pig",
            "nam",
            "oscar",
        ]

    def test_inflections_share_a_stem(self) -> None:
        """ "appreciates", "appreciated" and "appreciate" reduce to one stem."""
        stems = {content_tokens(word)[0] for word in ("appreciates", "appreciated", "appreciate")}
        assert len(stems) == 1

    def test_spelled_numbers_become_digits(self) -> None:
        """ "two turtles" and "2 turtles" have the same content words."""
        assert content_tokens("Nate has two turtles") == content_tokens("Nate has 2 turtles")


class TestCardDocumentId:
    def test_format(self) -> None:
        """The id is `rollup:<profile>:<32 hex digits>`."""
        assert re.fullmatch(r"rollup:research:[0-9a-f]{32}", card_document_id("research", "Evan moved."))

    def test_stable_across_cosmetic_rewrites(self) -> None:
        """Case, punctuation, spacing and a leading date clause do not change the id (a retry is a no-op)."""
        ids = {
            card_document_id("research", text)
            for text in (
                "Joanna is allergic to dairy.",
                "joanna is ALLERGIC to dairy",
                "On 8 May 2023, Joanna is allergic to dairy!",
            )
        }
        assert len(ids) == 1

    def test_any_word_change_changes_the_id(self) -> None:
        """Different words give a different id, so one card can never replace another."""
        assert card_document_id("research", "Nate has two turtles.") != card_document_id(
            "research", "Nate has three turtles."
        )

    def test_profile_is_part_of_the_id(self) -> None:
        """The same text rolled up from two profiles gets two ids."""
        assert card_document_id("research", "Evan moved.") != card_document_id("homelab", "Evan moved.")

    def test_known_value(self) -> None:
        """The id is a fixed function of profile and normalised text (it must not drift between releases)."""
        assert (
            card_document_id("research", "Evan moved") == "rollup:research:161e532906baf6bbe6e1a63e4e9efa36"
        )

    def test_empty_text_is_refused(self) -> None:
        """A card with no words has no id; the error says to drop the card."""
        with pytest.raises(EmptyCardTextError, match="drop the card"):
            card_document_id("research", " -- ")

    @pytest.mark.parametrize("profile", ["", "two words", "a:b"])
    def test_unusable_profile_is_refused(self, profile: str) -> None:
        """An empty profile, or one with whitespace or ':', cannot name a document."""
        with pytest.raises(InvalidProfileError, match="without spaces"):
            card_document_id(profile, "Evan moved.")

    @given(st.text(min_size=1), st.text(min_size=1))
    def test_ids_equal_exactly_when_normalised_texts_are(self, first: str, second: str) -> None:
        """Two texts share an id if and only if they normalise to the same text."""
        if not normalize_text(first) or not normalize_text(second):
            return
        same_id = card_document_id("p", first) == card_document_id("p", second)
        assert same_id == (normalize_text(first) == normalize_text(second))
