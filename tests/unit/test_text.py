"""Canonical card text, leading date clauses, tokens and content-derived document ids.

Where a test needs a real memory sentence, it loads one from the LoCoMo benchmark conversations
(snap-research/locomo) by position (`tests.locomo`) and is skipped when the dataset is absent; the other
sentences are written for these tests.
"""

from __future__ import annotations

import hashlib
import re
import sys
import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dreamer.rollup.dedup import CardText, VerdictKind, judge_batch
from dreamer.text import (
    CURRENCY_SYMBOLS,
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
# Pieces full of the symbols normalisation keeps or drops depending on their neighbours.
_SYMBOL_PIECES = st.sampled_from(
    [*"aZ5 0.,+-−$€#@%'’_:/()", "C++", "1,000", "10.5", " $ ", "＄", "⁻", "½", "ß", "İ", "\u0301",
     "on 8 may 2023 ", "at 7.37 pm ", "08.05.2023 ", "UTC+5"]
)  # fmt: skip

# Pairs that differ in a symbol that carries meaning: they normalise apart, so get two ids.
KEPT_APART = [
    ("The UTC offset of the office is -5 hours.", "The UTC offset of the office is 5 hours."),
    ("The UTC offset of the office is \u22125 hours.", "The UTC offset of the office is 5 hours."),
    ("The fund rose by +3 points.", "The fund rose by 3 points."),
    ("The fund rose by +3 points.", "The fund rose by -3 points."),
    ("The office is on UTC+5.", "The office is on UTC-5."),
    ("Sam writes the backend in C++.", "Sam writes the backend in C."),
    ("Sam builds it with g++.", "Sam builds it with g."),
    ("Sam writes the backend in C#.", "Sam writes the backend in C."),
    ("Sam writes the backend in C#.", "Sam writes the backend in C++."),
    ("Sam has 5+ years of Rust.", "Sam has 5 years of Rust."),
    ("Sam got an A+ in maths.", "Sam got an A in maths."),
    ("The bike cost $100.", "The bike cost 100."),
    ("The bike cost €100.", "The bike cost 100."),
    ("The bike cost £100.", "The bike cost $100."),
    ("The bike cost -$5.", "The bike cost $5."),
    ("The run took 10.5 minutes.", "The run took 105 minutes."),
    ("The run took 10.5 minutes.", "The run took 10 5 minutes."),
    ("The battery is at 50%.", "The battery is at 50."),
    ("Ping @alice about the deploy.", "Ping alice about the deploy."),
    ("Post it in #general.", "Post it in general."),
    # A version as written: "v2" is not "v2.0" (nor, as a protected detail, "2" "2.0").
    ("The API moved to v2.", "The API moved to v2.0."),
]

# Pairs that differ only in what carries no meaning: they normalise alike, so share an id.
KEPT_TOGETHER = [
    ("Joanna is ALLERGIC to dairy.", "joanna is allergic to dairy."),
    # Invisible format characters: a zero-width space, a soft hyphen, a bidi mark, a BOM.
    ("Nextcloud runs on a\u200btlas.", "Nextcloud runs on atlas."),
    ("Joanna is aller\u00adgic to dairy.", "Joanna is allergic to dairy."),
    ("\ufeffJoanna is allergic\u200e to dairy.", "Joanna is allergic to dairy."),
    ("Joanna  is\tallergic to\u00a0dairy.", "Joanna is allergic to dairy."),
    ('Joanna calls it "dairy".', "Joanna calls it 'dairy'."),
    ("Joanna is allergic to dairy!!", "Joanna is allergic to dairy"),
    ("It’s raining in Boston.", "It's raining in Boston."),
    ("On 8 May 2023, Joanna is allergic to dairy.", "Joanna is allergic to dairy."),
    ("08.05.2023: Joanna is allergic to dairy.", "Joanna is allergic to dairy."),
    ("At 10.30 am Joanna ran.", "Joanna ran."),
    # A dash between words is a space; an em dash too.
    ("Sam is a well-known chef.", "Sam is a well known chef."),
    ("Sam left—for good.", "Sam left for good."),
    # A hyphen or a dash between digits or after a letter is no sign.
    ("COVID-19 closed the office for 5-10 days.", "COVID 19 closed the office for 5 10 days."),
    ("The office is on UTC-5.", "The office is on UTC 5."),
    # A comma before three digits is a thousands separator.
    ("The budget is 1,000 euros.", "The budget is 1000 euros."),
    ("The budget is 1,000,000.50 euros.", "The budget is 1000000.50 euros."),
    # One sign, one currency, wherever and however they are written.
    ("The offset is \u22125 hours.", "The offset is -5 hours."),
    ("The offset is －5 hours.", "The offset is -5 hours."),
    ("The bike cost $100.", "The bike cost 100$."),
    ("The bike cost 100 €.", "The bike cost €100."),
    ("The bike cost ＄100.", "The bike cost $100."),
    ("The bike cost -$5.", "The bike cost $-5."),
    ("The battery is at 50 %.", "The battery is at 50%."),
    ("Sam knows C++.", "SAM KNOWS c++"),
    # One "+" after a longer word is a mark of the word, not another name.
    ("Caroline went to an LGBTQ+ support group.", "Caroline went to an LGBTQ support group."),
]


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
            ("2023-05-08T10:00:00.123+02:00 Evan moved to Boston.", "evan moved to boston"),
            ("08.05.2023: Evan moved to Boston.", "evan moved to boston"),
            ("At 10.30 am, Evan moved to Boston.", "evan moved to boston"),
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

    @given(st.lists(_SYMBOL_PIECES, max_size=16).map("".join))
    def test_idempotent_on_symbol_heavy_text(self, text: str) -> None:
        """Idempotence holds where signs, currency, "%", "+", "#", "@" and decimal points are kept or
        dropped by what stands next to them."""
        once = normalize_text(text)
        assert normalize_text(once) == once


class TestMeaningBearingSymbols:
    @pytest.mark.parametrize(("first", "second"), KEPT_APART)
    def test_a_symbol_that_carries_meaning_is_kept(self, first: str, second: str) -> None:
        """A sign, a currency, "%", a decimal point, "C++", "C#", "@name", "#channel": the two
        texts of each pair normalise apart and get two document ids."""
        assert normalize_text(first) != normalize_text(second)
        assert card_document_id("research", first) != card_document_id("research", second)

    @pytest.mark.parametrize(("first", "second"), KEPT_TOGETHER)
    def test_what_carries_no_meaning_is_still_folded(self, first: str, second: str) -> None:
        """Case, whitespace, quotes, apostrophes, trailing punctuation, a leading date clause, dashes
        between words, thousands separators and the spelling of a sign or currency: one text, one id."""
        assert normalize_text(first) == normalize_text(second)
        assert card_document_id("research", first) == card_document_id("research", second)

    @pytest.mark.parametrize(
        ("text", "expected"),
        [
            ("The UTC offset is -5 hours.", "the utc offset is -5 hours"),
            ("It costs -$5, $ 100, 100 € or ¥3.", "it costs -5$ 100$ 100€ or 3¥"),
            ("5+ years of C++, C#, F# and g++ at 50 %", "5+ years of c++ c# f# and g++ at 50%"),
            ("Ask @alice in #general, not bob@example.com.", "ask @alice in #general not bob example com"),
            ("Python 3.11.2 on UTC+5, v2.0, 1,000 and 3,5", "python 3.11.2 on utc +5 v2.0 1000 and 3 5"),
            ("I paid 3 $5 bills.", "i paid 3 5$ bills"),
        ],
    )
    def test_canonical_spelling(self, text: str, expected: str) -> None:
        """A number is sign, digits, currency, "%", "+" ("-$5" is "-5$"); a currency written
        after a number with a space belongs to it unless a number follows it directly."""
        assert normalize_text(text) == expected

    def test_a_lone_symbol_is_dropped(self) -> None:
        """A sign, currency or "%" next to no number, and "@" or "#" inside a word, separate words."""
        assert normalize_text("Costs - $ % # @ more; see a@b or x#y.") == "costs more see a b or x y"

    def test_the_currency_class_is_every_currency_symbol_nfkc_keeps(self) -> None:
        """`CURRENCY_SYMBOLS` holds each character of Unicode category Sc that NFKC leaves as it is."""
        in_class = re.compile(f"[{CURRENCY_SYMBOLS}]")
        expected = {
            ch
            for ch in map(chr, range(sys.maxunicode + 1))
            if unicodedata.category(ch) == "Sc" and unicodedata.normalize("NFKC", ch) == ch
        }
        assert {ch for ch in map(chr, range(sys.maxunicode + 1)) if in_class.fullmatch(ch)} == expected

    def test_a_changed_sign_is_a_conflict_not_a_duplicate(self) -> None:
        """End to end through the dedup: "-5 hours" then "5 hours" restates the fact with a changed
        number, and so does the other order; the same number spelt with U+2212 is a duplicate."""
        negative, positive = KEPT_APART[0]
        for old, new in ((negative, positive), (positive, negative)):
            verdict = judge_batch([CardText("new", new)], [CardText("old", old)], {})[0]
            assert verdict.kind is VerdictKind.CONFLICT, verdict.reason
            assert [str(kind) for kind in verdict.changed] == ["number"]
        minus = negative.replace("-", "\u2212")
        same = judge_batch([CardText("new", minus)], [CardText("old", negative)], {})
        assert same[0].kind is VerdictKind.DUPLICATE

    # "g++" / "g" is left out: a lower-case word is no name, and the typo rule (shingles) merges them.
    @pytest.mark.parametrize(("first", "second"), [pair for pair in KEPT_APART if "g++" not in pair[0]])
    def test_no_pair_kept_apart_is_a_duplicate(self, first: str, second: str) -> None:
        """No pair kept apart is judged a duplicate, in either direction: each differs in a protected
        detail (number, version), a name ("C++", "C#") or in words the lexical rules do not merge."""
        for new, old in ((first, second), (second, first)):
            verdict = judge_batch([CardText("new", new)], [CardText("old", old)], {})[0]
            assert verdict.kind is not VerdictKind.DUPLICATE, (new, old, verdict.reason)


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

    @pytest.mark.parametrize(
        ("text", "body"),
        [
            ("On 8 May, -5 degrees was the low.", "-5 degrees was the low."),
            ("On 8 May 2023, $100 was the price.", "$100 was the price."),
            ("08.05.2023: Evan paid 10.50 for C++ books.", "Evan paid 10.50 for C++ books."),
            ("2023-05-08T10:00:00.123Z @alice merged it.", "@alice merged it."),
        ],
    )
    def test_a_body_starting_with_a_kept_symbol_keeps_it(self, text: str, body: str) -> None:
        """The body starts where its first normalised word starts, a sign or currency included, even
        when the clause's words are not one raw word each ("08.05.2023")."""
        assert without_leading_date_clause(text) == body

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
        """The id is a fixed function of profile, normalised text and normalisation rule (it must not
        drift between releases that keep the rule)."""
        assert (
            card_document_id("research", "Evan moved") == "rollup:research:a7d59f36835997b1723c35122e5f5ae5"
        )

    def test_an_id_of_the_previous_rule_is_never_given_again(self) -> None:
        """Rule 1 dropped a sign, so "-5 hours" was promoted under the id of "5 hours"; that text
        now gets another id, or promoting it would replace the "-5 hours" card upstream. (The
        rule-1 id of "Evan moved" was the pinned value of releases before rule 2.)"""
        rule_1 = hashlib.sha256(b"research\nthe utc offset of the office is 5 hours").hexdigest()[:32]
        assert card_document_id("research", KEPT_APART[0][1]) != f"rollup:research:{rule_1}"
        rule_1_pinned = "rollup:research:161e532906baf6bbe6e1a63e4e9efa36"
        assert card_document_id("research", "Evan moved") != rule_1_pinned

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


def test_normalising_remembers_words_and_recent_texts_and_answers_the_same() -> None:
    """The caches of `normalize_text_keeping_dates` give what the normaliser computes, for words
    and for texts of any length, and a text analysed again is not normalised again."""
    from dreamer import text as module

    samples = ["Evan’s", "C++", "−5", "On 8 May 2023, Evan’s  NEW job—at ACME!", "x" * 41, "word " * 2000, ""]
    for sample in samples:
        assert module.normalize_text_keeping_dates(sample) == module._normalize(sample)
    long_text = "Caroline went to the LGBTQ support group on 7 May 2023 and felt accepted there."
    module.normalize_text_keeping_dates(long_text)
    hits = module._normalize_recent.cache_info().hits
    module.normalize_text_keeping_dates(long_text)
    assert module._normalize_recent.cache_info().hits == hits + 1
    assert module._normalize_word.cache_info().maxsize == 4096
    assert module._normalize_recent.cache_info().maxsize == 8
    held = module._normalize_recent.cache_info().currsize
    module.normalize_text_keeping_dates("word " * 2000)  # longer than a card: computed, not kept
    assert module._normalize_recent.cache_info().currsize == held
