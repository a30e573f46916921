"""A text's analysis kept with its card (`dreamer.rollup.analysis`): read back, it is the very
profile the analysis gives, on awkward texts and every labelled sentence; anything else reads as
none; and its version moves with what the analysis finds."""

from __future__ import annotations

import dataclasses
import hashlib

import pytest

from dreamer.rollup.analysis import ANALYSIS_VERSION, analysis_record, kept_profile
from dreamer.rollup.cards import sentences
from dreamer.rollup.similarity import Sketch, profile_text, sketch_of
from tests.labelled_pairs import LABELLED, text_of
from tests.unit.rollup.test_similarity import AWKWARD_TEXTS

HOSTILE = [
    "Tabs\tin one.\x1e Separators \x1f here. And\x00 nulls.",
    'Quotes "like" these, \\ backslashes \\\\ and {"json": [1, 2]}.',
    "Sam's friend O'Brien met Ana-María García and 李小龍 in São Paulo.",
]


def _analysed(text: str) -> object:
    return profile_text.__wrapped__(text)  # type: ignore[attr-defined]


def _kept(text: str) -> object:
    profile = profile_text(text)
    stored = dataclasses.replace(sketch_of(profile), analysis=analysis_record(profile))
    read = Sketch.loads(stored.dumps())  # through the stored line, as a ledger row holds it
    assert read is not None
    return kept_profile(text, read)


@pytest.mark.parametrize("text", AWKWARD_TEXTS + HOSTILE, ids=range(len(AWKWARD_TEXTS) + len(HOSTILE)))
def test_the_kept_analysis_is_the_analysis(text: str) -> None:
    assert _kept(text) == _analysed(text)


def test_it_is_on_every_labelled_sentence() -> None:
    """The LoCoMo texts of the labelled pairs, and each of their sentences alone."""
    seen = {text_of(source) for pair in LABELLED for source in (pair.first, pair.second)}
    seen |= {part for text in list(seen) for part in sentences(text)}
    unequal = [t for t in sorted(seen) if _kept(t) != _analysed(t)]
    assert not unequal and len(seen) > 400


def test_the_record_holds_no_separator_of_the_stored_line() -> None:
    """No tab, newline or control character: it is one field of a tab-separated line, and a
    sentence's record sits between the sentences' own separators."""
    record = analysis_record(profile_text(HOSTILE[0] + " Line\nbreak and \x1f\x1e again."))
    assert not any(ord(c) < 0x20 for c in record)


def test_a_record_of_another_text_is_not_taken() -> None:
    """Kept with a sketch of other words (a row's text changed under it), it reads as none."""
    one, other = "Sam adopted a beagle named Max.", "Ana moved to Lisbon in May."
    sketch = dataclasses.replace(sketch_of(profile_text(one)), analysis=analysis_record(profile_text(other)))
    assert kept_profile(one, sketch) is None


#: The analyses of these texts, hashed: they change only when `profile_text` does, and then
#: ANALYSIS_VERSION must change with them (rows kept with the older analysis are then analysed
#: again instead of being trusted). Update both together.
PINNED = (ANALYSIS_VERSION, "3d4941e37228ddff2f88dd6378ae04f94358d2706969361d47737800f9eeb440")


def test_the_version_moves_with_what_the_analysis_finds() -> None:
    texts = sorted({text_of(s) for pair in LABELLED for s in (pair.first, pair.second)}) + AWKWARD_TEXTS
    digest = hashlib.sha256("\n".join(analysis_record(profile_text(t)) for t in texts).encode()).hexdigest()
    assert (ANALYSIS_VERSION, digest) == PINNED, (
        "profile_text finds something else now: bump ANALYSIS_VERSION and pin the new digest"
    )


def test_a_record_of_another_version_is_not_taken() -> None:
    """This very text's record, written by an analysis of another version: analysed again."""
    text = "Sam adopted a beagle named Max on 3 May."
    profile = profile_text(text)
    record = analysis_record(profile).replace(f'"{ANALYSIS_VERSION}"', '"a0"', 1)
    assert kept_profile(text, dataclasses.replace(sketch_of(profile), analysis=record)) is None
