"""What a new card can repeat (`dreamer.rollup.existing.Existing`): a card of several sentences
has its sentences as parts, each naming the card; a card of one sentence, and a part, have none."""

from __future__ import annotations

from dreamer.rollup.existing import Existing


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
