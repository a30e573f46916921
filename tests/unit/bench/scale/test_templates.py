"""The realistic ledger's templates: LoCoMo memories with their names, values and noun phrases as slots.

On hand-written sentences and the benchmark tests' LoCoMo-shaped fixture (no dataset text).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench._common import BenchError
from bench.scale.templates import (
    DATE,
    NAME,
    NUMBER,
    PHRASE,
    TIME,
    WEEKDAY,
    YEAR,
    Slot,
    known_names,
    load_templates,
    parse_template,
    subject_verbs,
)
from tests.support.locomo_conversation import fixture_conversation


def slots(text: str, names: frozenset[str] = frozenset(), verbs: frozenset[str] = frozenset()) -> list[Slot]:
    return [s for s in parse_template(text, names, verbs).segments if isinstance(s, Slot)]


@pytest.fixture
def fixture_dir(tmp_path: Path) -> Path:
    (tmp_path / "7.json").write_text(json.dumps(fixture_conversation()), encoding="utf-8")
    return tmp_path


class TestParseTemplate:
    def test_values_are_slots_of_their_kind(self) -> None:
        """A date, a time, a year, a number and a weekday are found whole, each once."""
        found = slots("They met at 3:15 pm on 8 May, 2023, paid 40 dollars on Fridays in 2021.")
        assert [(s.kind, s.original) for s in found] == [
            (TIME, "3:15 pm"),
            (DATE, "8 May, 2023"),
            (NUMBER, "40"),
            (WEEKDAY, "Fridays"),
            (YEAR, "2021"),
        ]

    def test_a_run_of_capitals_is_one_name_and_a_first_function_word_is_none(self) -> None:
        """ "Door Dash" is one name; a sentence's first "The" is not a name, its first known name is."""
        assert [s.original for s in slots("The shop of Gina is on Door Dash.") if s.kind == NAME] == [
            "Gina",
            "Door Dash",
        ]
        assert slots("Gina sells hats.", frozenset({"Gina"}))[0] == Slot(NAME, "Gina")

    def test_a_noun_phrase_ends_before_a_verb_or_a_function_word(self) -> None:
        """The words after a determiner are a phrase up to a function word or a known verb; the
        phrase remembers the word and determiner before it."""
        found = slots("Sam drove his old blue car to the beach.", frozenset({"Sam"}))
        assert [(s.kind, s.original, s.context) for s in found if s.kind == PHRASE] == [
            (PHRASE, "old blue car", "drove his"),
            (PHRASE, "beach", "to the"),
        ]
        ended = slots("The conversation ended well.", verbs=frozenset({"ended"}))
        assert [s.original for s in ended] == ["conversation"]

    def test_the_text_is_kept_between_slots(self) -> None:
        """Joining literal text and slot originals gives the sentence back."""
        text = "Nate took his turtles to the beach in Tampa on 2 June, 2022."
        template = parse_template(text, frozenset({"Nate"}))
        assert "".join(s if isinstance(s, str) else s.original for s in template.segments) == text


class TestNamesAndVerbs:
    def test_known_names_are_capitals_past_the_first_word(self) -> None:
        """A capital past a sentence's first word is a name; a first word alone is not."""
        assert known_names(["They visited Paris with Mia's dog.", "Today was fine."]) == {"Paris", "Mia"}

    def test_subject_verbs_follow_a_name_or_a_pronoun(self) -> None:
        """Lower-case words right after a name or a pronoun are read as verbs."""
        assert subject_verbs(["Mia plans a trip and she booked it."], frozenset({"Mia"})) == {
            "plans",
            "booked",
        }


class TestLoadTemplates:
    def test_every_memory_becomes_a_template_with_its_session_and_kind(self, fixture_dir: Path) -> None:
        """Observations, summary sentences and events of each session with dialogue, in order."""
        templates = load_templates(fixture_dir)
        assert len(templates.items) == 11
        assert {t.kind for t in templates.items} == {"observation", "summary", "event"}
        assert [t.session for t in templates.items] == [0] * 7 + [1] * 4

    def test_speakers_are_names_even_where_they_only_open_sentences(self, fixture_dir: Path) -> None:
        """ "Ada" starts every sentence she is in, and is still a name slot."""
        first = load_templates(fixture_dir).items[0]
        assert first.segments[0] == Slot(NAME, "Ada")

    def test_a_paraphrase_is_a_memory_of_the_same_session_and_another_kind(self, fixture_dir: Path) -> None:
        """Ben's marathon observation pairs with an event or summary sentence of the same session
        about him; a memory with nothing close has none."""
        items = load_templates(fixture_dir).items
        finished = next(k for k, t in enumerate(items) if " finished the " in t.segments)
        partner = items[items[finished].paraphrase]
        assert partner.session == items[finished].session and partner.kind != items[finished].kind
        assert Slot(NAME, "Ben") in partner.segments
        assert items[0].paraphrase == -1

    def test_a_missing_directory_is_named(self, tmp_path: Path) -> None:
        """No folder, no templates: the error names the path."""
        with pytest.raises(BenchError, match=str(tmp_path / "absent")):
            load_templates(tmp_path / "absent")
