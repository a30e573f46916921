"""What a new card can repeat (`dreamer.rollup.existing.Existing`): a card of several sentences
has its sentences as parts, each naming the card; a card of one sentence, and a part, have none.
A ledger card's stored sketch keeps its sentences' (`stored_sketch`), read back only for the very
sentences they were made of."""

from __future__ import annotations

import dataclasses

import pytest

from dreamer.rollup import existing
from dreamer.rollup.analysis import kept_profile
from dreamer.rollup.cards import sentences
from dreamer.rollup.existing import Existing, sentence_sketches, stored_sketch
from dreamer.rollup.similarity import Sketch, profile_text, sketch_of, sketch_text


def test_a_card_of_two_sentences_has_two_parts_naming_it() -> None:
    """Each sentence is a part with the card's id, origin and repeat, and its place in the card."""
    card = Existing(
        "doc-1",
        "promoted",
        "Sam adopted a beagle named Max.  Sam volunteers at the shelter on weekends.",
        repeats="doc-0",
    )
    parts = card.parts
    assert [p.text for p in parts] == [
        "Sam adopted a beagle named Max.",
        "Sam volunteers at the shelter on weekends.",
    ]
    assert [(p.card_id, p.origin, p.repeats, p.part) for p in parts] == [
        ("doc-1", "promoted", "doc-0", 0),
        ("doc-1", "promoted", "doc-0", 1),
    ]
    assert card.part is None
    assert parts[0].sketch.content == frozenset({"sam", "adopt", "beagl", "nam", "max"})


def test_one_sentence_and_a_part_have_no_parts() -> None:
    """A card without a sentence break, and a sentence of a card, are compared only whole."""
    assert Existing("d", "upstream", "Sam adopted a beagle named Max.").parts == ()
    assert Existing("d", "promoted", "v2.0 runs on 3.5 GB. It is fine.").parts[0].parts == ()
    assert Existing("d", "promoted", "Version 2.0 of e.g. this runs on 3.5 GB of memory").parts == ()


TWO = "Sam adopted a beagle named Max on 3 May.  Sam volunteers at the shelter on weekends."


def _refusing(monkeypatch: pytest.MonkeyPatch, function: str) -> None:
    """Make `existing`'s ``function`` (``sketch_text``, ``profile_text``) fail the test if called."""

    def refused(text: str) -> object:
        raise AssertionError(f"{function} called again: {text!r}")

    monkeypatch.setattr(existing, function, refused)


def test_a_ledger_card_keeps_its_sentences_sketches_and_its_parts_read_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The stored sketch of a card of two sentences keeps theirs, through its text form; a card
    read with it has its parts without sketching them again, each the sketch of its sentence."""
    stored = Sketch.loads(stored_sketch(TWO).dumps())
    assert stored is not None and stored.parts is not None
    assert stored == sketch_of(profile_text(TWO)), "the card's own sketch is unchanged"
    expected = [sketch_text(s) for s in sentences(TWO)]
    _refusing(monkeypatch, "sketch_text")
    parts = Existing("d", "promoted", TWO, sketch=stored).parts
    assert [p.sketch for p in parts] == expected and all(p._profile is None for p in parts)


def test_a_card_of_one_sentence_keeps_its_sketch_as_before_and_its_analysis() -> None:
    """The first four fields are the plain sketch's; no sentences' sketches (an empty field), then
    the analysis, which reads back as the text's profile."""
    one = "Sam adopted a beagle named Max."
    plain = sketch_of(profile_text(one)).dumps()
    line = stored_sketch(one).dumps()
    assert line.split("\t")[:4] == plain.split("\t") and line.split("\t")[4] == ""
    read = Sketch.loads(line)
    assert read is not None and read.parts is None and read == sketch_of(profile_text(one))
    assert kept_profile(one, read) == profile_text(one)
    assert stored_sketch(one).parts is None and sentence_sketches("") is None


def test_a_ledger_card_and_its_sentences_are_compared_on_their_kept_analyses(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Read with its stored sketch, a card of two sentences gives its profile, its shingles and its
    parts' profiles without analysing any text, each the profile the analysis gives."""
    stored = Sketch.loads(stored_sketch(TWO).dumps())
    assert stored is not None
    expected = [profile_text(TWO), *(profile_text(s) for s in sentences(TWO))]
    _refusing(monkeypatch, "profile_text")
    card = Existing("d", "promoted", TWO, sketch=stored)
    assert card.shingles == expected[0].shingles
    assert [card.profile, *(p.profile for p in card.parts)] == expected


@pytest.mark.parametrize(
    "analysis",
    [
        None,
        "",
        "garbage",
        "[]",
        '["a0",[],[],[],[],[],[],[]]',  # another version
        '["a1",["other"],[],[],[],[],[],[]]',  # not this sketch's words
        '["a1",[1],[],[],[],[],[],[]]',
        '["a1",[],[["no such kind",[]]],[],[],[],[],[]]',
        '["a1",[],[],[],[],[],[["sam",["no such role"]]],[]]',
        "[" * 100_000,  # nested past the JSON parser's depth
        '{"a1": 1}',
    ],
    ids=repr,
)
def test_an_analysis_missing_damaged_or_anothers_is_made_again(analysis: str | None) -> None:
    """The text is analysed as before and the card has the same profile and shingles."""
    sketch = dataclasses.replace(stored_sketch(TWO), analysis=analysis)
    card = Existing("d", "promoted", TWO, sketch=sketch)
    assert card.shingles == profile_text(TWO).shingles
    assert card.profile == profile_text(TWO)


def test_a_row_written_before_analyses_were_kept_still_reads() -> None:
    """Five fields (the sentences' sketches, no analysis) and four: read as before."""
    older = dataclasses.replace(stored_sketch(TWO), analysis=None).dumps()
    assert len(older.split("\t")) == 5
    read = Sketch.loads(older)
    assert read is not None and read.parts is not None and read.analysis is None
    assert Existing("d", "promoted", TWO, sketch=read).profile == profile_text(TWO)


@pytest.mark.parametrize(
    "kept",
    [
        None,
        "",
        "garbage",
        "\x1e",
        "0\x1fa\x1fb\x1fc\x1e0\x1fa\x1fb\x1fc",  # two parts, checksums not the sentences'
        "x\x1fy",
    ],
    ids=repr,
)
def test_sentences_sketches_that_are_not_these_sentences_are_sketched_again(kept: str | None) -> None:
    """Missing, damaged, or another text's: the parts are sketched from the sentences, as if none
    were kept, and the card is judged the same."""
    sketch = dataclasses.replace(sketch_of(profile_text(TWO)), parts=kept)
    parts = Existing("d", "promoted", TWO, sketch=sketch).parts
    assert [p.sketch for p in parts] == [sketch_text(s) for s in sentences(TWO)]


def test_another_texts_sentences_sketches_are_not_taken() -> None:
    """Sentences split another way (or another card's sketches) never name these sentences."""
    other = stored_sketch("Sam adopted a beagle named Max on 4 May.  Sam volunteers at the shelter.")
    sketch = dataclasses.replace(sketch_of(profile_text(TWO)), parts=other.parts)
    parts = Existing("d", "promoted", TWO, sketch=sketch).parts
    assert [p.sketch for p in parts] == [sketch_text(s) for s in sentences(TWO)]
    three = stored_sketch(TWO + " Max likes long walks.")
    sketch = dataclasses.replace(sketch_of(profile_text(TWO)), parts=three.parts)
    assert [p.sketch for p in Existing("d", "promoted", TWO, sketch=sketch).parts] == [
        sketch_text(s) for s in sentences(TWO)
    ]


@pytest.mark.parametrize(
    "text",
    [
        "Tabs\tin one.\x1e Separators \x1f here. And\x00 nulls.",
        "Ünïcödé 日本語 𝒮am first.  Second 2023-05-08 at 10:00, -$5.50!",
        "One. " * 300,
    ],
    ids=range(3),
)
def test_hostile_texts_keep_sketches_that_read_back(text: str) -> None:
    """Control characters (the stored form's own separators among them), any script, many
    sentences: the stored sketch reads back, and its parts are the sentences' sketches."""
    stored = Sketch.loads(stored_sketch(text).dumps())
    assert stored is not None and stored == sketch_of(profile_text(text))
    parts = Existing("d", "promoted", text, sketch=stored).parts
    assert [p.sketch for p in parts] == [sketch_text(s) for s in sentences(text)]
    assert stored.parts is not None
    assert kept_profile(text, stored) == profile_text(text)
    assert [kept_profile(p.text, p.sketch) for p in parts] == [profile_text(s) for s in sentences(text)]
