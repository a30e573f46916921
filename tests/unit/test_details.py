"""Protected details: the numbers, dates, versions, locations, negations and names a duplicate must repeat."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dreamer.details import Detail, NameRole, matches, protected_details

# Numbers a sign, currency, "%", trailing "+" or decimal point makes different values.
NUMBERS_APART = [
    ("The offset is -5 hours.", ("-5",), "The offset is 5 hours.", ("5",)),
    ("The offset is \u22125 hours.", ("-5",), "The offset is +5 hours.", ("+5",)),
    ("The office is on UTC+5.", ("+5",), "The office is on UTC-5.", ("5",)),
    ("The bike cost $100.", ("100$",), "The bike cost 100.", ("100",)),
    ("The bike cost €100.", ("100€",), "The bike cost $100.", ("100$",)),
    ("The bike cost -$5.", ("-5$",), "The bike cost $5.", ("5$",)),
    ("The run took 10.5 minutes.", ("10.5",), "The run took 105 minutes.", ("105",)),
    ("The battery is at 50%.", ("50%",), "The battery is at 50.", ("50",)),
    ("Sam has 5+ years of Rust.", ("5+",), "Sam has 5 years of Rust.", ("5",)),
]

# One number however its sign, currency or "%" is written; a hyphen is no sign.
NUMBERS_ALIKE = [
    ("The bike cost $100, 100$, $ 100 and 100 $.", ("100$", "100$", "100$", "100$")),
    ("It fell by -$5, $-5 and \u22125$.", ("-5$", "-5$", "-5$")),
    ("The battery is at 50 % or 50%.", ("50%", "50%")),
    ("COVID-19 closed it for 5-10 days from 2020.", ("10", "19", "5")),
    ("I paid 3 $5 bills.", ("3", "5$")),
]


class TestSignsCurrencyAndDecimals:
    @pytest.mark.parametrize(("first", "first_numbers", "second", "second_numbers"), NUMBERS_APART)
    def test_a_sign_currency_percent_or_decimal_point_is_part_of_the_number(
        self, first: str, first_numbers: tuple[str, ...], second: str, second_numbers: tuple[str, ...]
    ) -> None:
        """ "-5" is not "5", "$100" not "100", "10.5" not "105", "50%" not "50", "5+" not "5"."""
        assert protected_details(first).of_kind(Detail.NUMBER) == first_numbers
        assert protected_details(second).of_kind(Detail.NUMBER) == second_numbers

    @pytest.mark.parametrize(("text", "numbers"), NUMBERS_ALIKE)
    def test_one_canonical_spelling(self, text: str, numbers: tuple[str, ...]) -> None:
        """Sign, digits, currency, "%": "$100" and "100 $" are "100$", "-$5" and "$-5" are "-5$";
        a currency written after a number with a space is its own unless a number follows it."""
        assert protected_details(text).of_kind(Detail.NUMBER) == numbers

    def test_a_signed_number_keeps_its_sign_after_a_leading_date_clause(self) -> None:
        """The body after "On 8 May," starts at the sign, not at the digits."""
        assert protected_details("On 8 May, -5 degrees was the low.").of_kind(Detail.NUMBER) == ("-5",)

    def test_v2_and_v2_0_are_two_versions(self) -> None:
        """A version as written: "v2" is 2, "v2.0" is 2.0 (as the normalised texts differ too)."""
        assert protected_details("The API moved to v2.").of_kind(Detail.VERSION) == ("2",)
        assert protected_details("The API moved to v2.0.").of_kind(Detail.VERSION) == ("2.0",)

    def test_a_number_with_a_currency_is_no_version(self) -> None:
        """A decimal after a capitalised word is a version ("Python 3.11"), not with a sign or a
        currency ("Bike $10.50", "Low -5.5")."""
        assert protected_details("Bike $10.50 and Low -5.5").of_kind(Detail.NUMBER) == ("-5.5", "10.50$")
        assert protected_details("Bike $10.50 and Low -5.5").of_kind(Detail.VERSION) == ()

    def test_cpp_and_csharp_are_names_of_their_own(self) -> None:
        """A name keeps its trailing "+" or "#" and its "@": "C++" and "C#" are not "C"."""
        assert protected_details("Sam writes C++, C#, F# and C.").names == ("sam", "c++", "c#", "f#", "c")
        assert protected_details("Ping @Alice today.").names == ("ping", "@alice")


class TestProtectedDetails:
    def test_numbers_in_digits_and_words_are_canonical(self) -> None:
        """ "two" and "2", "fourth" and "4th", "1,000" and "1000" are the same number."""
        assert (
            protected_details("Nate has two turtles, 1,000 fish and his fourth win").of_kind(Detail.NUMBER)
            == protected_details("Nate has 2 turtles, 1000 fish and his 4th win").of_kind(Detail.NUMBER)
            == ("1000", "2", "4th")
        )

    def test_date_spellings_are_canonical(self) -> None:
        """ "8 May 2023", "May 8th, 2023" and "2023-05-08" are one date."""
        dates = {
            protected_details(f"The backup ran on {date}.").of_kind(Detail.DATE)
            for date in ("8 May 2023", "May 8th, 2023", "2023-05-08")
        }
        assert dates == {("2023-05-08",)}

    def test_leading_date_clause_is_not_a_detail(self) -> None:
        """The date a fact was recorded on is context, not part of the fact."""
        assert protected_details("On 8 May 2023, Evan moved to Boston.").of_kind(Detail.DATE) == ()

    def test_clock_times_are_dates(self) -> None:
        """ "3 pm" and "15:00" are the same time of day."""
        assert protected_details("Backups run at 3 pm").of_kind(Detail.DATE) == ("15:00",)
        assert protected_details("Backups run at 15:00").of_kind(Detail.DATE) == ("15:00",)

    @pytest.mark.parametrize(
        ("text", "version"),
        [
            ("Hermes runs Python 3.11", "3.11"),
            ("Pinned to v2.4.1", "2.4.1"),
            ("Upgraded to 1.2.3-rc1", "1.2.3-rc1"),
        ],
    )
    def test_versions(self, text: str, version: str) -> None:
        """Dotted versions, "v" versions and decimals after a product name are versions."""
        assert protected_details(text).of_kind(Detail.VERSION) == (version,)

    def test_locations(self) -> None:
        """URLs, hosts (IPs, domains, ports) and paths (absolute, home, relative, file names) are found."""
        details = protected_details(
            "See https://docs.example.com/a?b=1. Backups go to 10.0.0.5:22 and nas.lan from "
            "/etc/dreamer/config.toml, ~/notes and src/cli.py."
        )
        assert details.of_kind(Detail.URL) == ("https://docs.example.com/a?b=1",)
        assert details.of_kind(Detail.HOST) == ("10.0.0.5:22", "nas.lan")
        assert details.of_kind(Detail.PATH) == ("/etc/dreamer/config.toml", "src/cli.py", "~/notes")

    def test_word_slashes_are_not_paths(self) -> None:
        """ "and/or" and "24/7" are not paths."""
        assert protected_details("Support is and/or should be 24/7").of_kind(Detail.PATH) == ()

    @pytest.mark.parametrize(
        ("text", "count"),
        [
            ("Joanna is allergic to dairy.", 0),
            ("Joanna isn't allergic to dairy.", 1),
            ("Joanna is not allergic to dairy.", 1),
            ("Nate never lost and won't lose.", 2),
        ],
    )
    def test_negations_are_counted(self, text: str, count: int) -> None:
        """Negation words and "n't" contractions are counted."""
        assert protected_details(text).negations == count

    @pytest.mark.parametrize(
        ("text", "negated"),
        [
            ("Sam does not like tea.", ("tea",)),
            ("Sam likes tea, not coffee.", ("coffe",)),
            ("Sam doesn't really like tea", ("tea",)),
            ("Nate never lost and won't lose.", ("lose", "lost")),
            ("No.", ("",)),
            ("Nate no longer has a dog named Max.", ("dog",)),
            ("Sam has no more cats.", ("cat",)),
            ("Joanna is allergic to dairy.", ()),
        ],
    )
    def test_what_each_negation_negates(self, text: str, negated: tuple[str, ...]) -> None:
        """Each negation's next content word (stemmed, within three words), sorted; "longer" and
        "more" after it are part of the negation ("no longer has a dog" negates "dog")."""
        assert protected_details(text).negated == negated

    def test_subject_is_the_first_group_of_names(self) -> None:
        """ "Nate and Joanna" together are the subject; later names are not."""
        details = protected_details("Nate and Joanna caught up with Sam at Door Dash.")
        assert details.subject_names == frozenset({"nate", "joanna"})
        assert details.names == ("nate", "joanna", "sam", "door", "dash")

    @pytest.mark.parametrize(
        ("text", "doer"),
        [
            ("Sam is grateful for Evan's support.", True),
            ("John considered Tim’s suggestion of Edinburgh.", True),
            ("Jon finds Gina's encouragement motivating.", True),
            ("Maria thanked John for John's kind words.", True),
            ("Nate is supportive of Joanna's writing.", False),
            ("Joanna is keen to try Nate's dairy-free desserts.", False),
            ("Evan gave Ben's dog to Sam.", False),
        ],
    )
    def test_the_possessor_of_an_act_did_it(self, text: str, doer: bool) -> None:
        """ "Evan's support", "Tim's suggestion": the possessor of an act is its doer; the
        possessor of a thing ("Joanna's writing", "Nate's desserts") is not."""
        roles = dict(protected_details(text).name_roles)
        possessor = next(name for name, played in roles.items() if NameRole.POSSESSOR in played)
        assert (NameRole.DOER in roles[possessor]) is doer


class TestTextsWithoutAMark:
    """A pattern marked with what every match of it holds (`matches.needing`: a digit, "@", "/",
    "://") is not run on a text without it: the same details."""

    TEXTS = (
        "Caroline attended an LGBTQ support group on 7 May 2023 and found it powerful.",
        "Nate won his 4th tournament last Friday at 3 pm, earning $1,200.",
        "Melanie went camping with her family in June and loves the outdoors.",
        "Upgraded Nextcloud to version 28.0.4 on host atlas (10.0.0.5:8080), see /etc/nc/config.php.",
        "Sam will see the doctor on the ٣ of March, at ١٠:٣٠.",  # Arabic-Indic digits are digits too
        "Joanna's screenplay got two callbacks; she is thankful to Nate.",
        "Evan plans a trip to Paris on Monday, May the 5th, 2025.",
        "Nothing here but words and an email, jo@example.org, and www.example.com/path.",
        "The backup of C:\\Users\\sam\\notes.txt runs on SUNDAYS from LOCALHOST via src/cli.py.",
        "She read the twentieth chapter twice, then the first and second FIFTEEN pages, half of it.",
        "Config lives in settings.toml; the site is HTTPS://Example.COM and the tag is ~/bin/run.",
    )

    def test_skipping_a_scan_changes_no_detail(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Every text read with the marks as shipped and with none (every pattern scanned, as
        before the marks existed) gives the same details."""
        guarded = [protected_details(text) for text in self.TEXTS]
        monkeypatch.setattr(matches, "NEEDS", {})
        assert [protected_details(text) for text in self.TEXTS] == guarded
        for kind in (Detail.DATE, Detail.NUMBER, Detail.PATH, Detail.URL, Detail.HOST):
            assert any(d.of_kind(kind) for d in guarded), kind

    #: Words and marks the patterns are made of, digits left out.
    PIECES = (
        "May", "may", "March", "the", "of", "first", "Monday", "pm", "am", "p.m.", "v", "V", "version",
        "$", "€", "%", "+", "-", "−", ".", ",", ":", "/", "T", "Z", "st", "th", "2nd", "Ⅻ", "½", "²",
        "http", "HTTP", "://", "www", "WWW", "@", "~", "\\", "C:", "localhost", "LOCALHOST", "K",
        "\u212a", "\u017f", "src", "cli", "py", "toml", "com", "example", "day", "DAY", "sun", "_",
    )  # fmt: skip

    @given(
        st.one_of(
            st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=80),
            st.lists(st.sampled_from(PIECES), max_size=12).map(" ".join),
            st.lists(st.sampled_from(PIECES), max_size=12).map("".join),
        )
    )
    def test_no_marked_pattern_matches_without_its_mark(self, text: str) -> None:
        """A marked pattern (`matches.NEEDS`) finds nothing in a text where its mark finds nothing
        (a digit: not in Roman numerals, fractions or superscripts, which are no decimal digits;
        the Kelvin sign and the long s, which case-folding reads as "k" and "s")."""
        assert len(matches.NEEDS) >= 20  # dates, times, numbers, versions, IPv4, the locations
        for pattern, mark in matches.NEEDS.items():
            if mark.search(text) is None:
                assert pattern.search(text) is None, (pattern.pattern, mark.pattern)


class TestOneOfWords:
    """`matches.one_of_words`: the tree of words' common beginnings matches what the plain
    alternation does, between word boundaries, in any case."""

    WORDS = ("six", "sixty", "sixth", "seven", "a", "ab", "abc", "b", "Monday", "mon")

    @pytest.mark.parametrize("flags", ["", "(?i)"])
    @given(
        st.one_of(
            st.text(max_size=60),
            st.lists(
                st.sampled_from([*WORDS, "SIXTY", "Six", "\u017fix", "x", "-", " ", "_", "é", "1"]),
                max_size=10,
            ).map(lambda parts: "".join(parts) if len(parts) % 2 else " ".join(parts)),
        )
    )
    def test_the_same_matches_as_the_plain_alternation(self, flags: str, text: str) -> None:
        plain = re.compile(rf"{flags}\b({'|'.join(self.WORDS)})\b")
        tree = re.compile(rf"{flags}\b({matches.one_of_words(self.WORDS)})\b")
        assert [m.span(1) for m in tree.finditer(text)] == [m.span(1) for m in plain.finditer(text)]

    def test_the_shipped_lists_match_as_their_plain_alternations(self) -> None:
        """The number words, weekdays and month names, each word alone and inside a sentence."""
        from dreamer.details.dates import MONTHS, WEEKDAYS
        from dreamer.text import NUMBER_WORDS

        for words in (NUMBER_WORDS, WEEKDAYS, MONTHS):
            plain = re.compile(rf"(?i)\b({'|'.join(words)})\b")
            tree = re.compile(rf"(?i)\b({matches.one_of_words(words)})\b")
            for word in words:
                for text in (word, word.upper(), f"It was {word.title()}, then {word}s and {word}."):
                    assert tree.findall(text) == plain.findall(text), text

    @pytest.mark.parametrize("words", [[], ["a", ""]])
    def test_no_words_or_an_empty_one_is_refused(self, words: list[str]) -> None:
        with pytest.raises(ValueError, match="one_of_words"):
            matches.one_of_words(words)
