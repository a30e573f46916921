"""Grounding: a card keeps a unit only if it says the unit's fact, and says nothing no unit says."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from dreamer.rollup import extractive
from dreamer.rollup.cards import CardDraft, SourceUnit, source_pieces
from dreamer.rollup.grounding import (
    RejectReason,
    ground_batch,
    ground_cards,
    held_why_not,
    units_not_held,
)
from dreamer.rollup.similarity import profile_text

H36 = SourceUnit("h36", "Server h1b36 has address 10.0.0.36 and 108 GB of disk.")
H99 = SourceUnit("h99", "Server h1b99 has address 10.0.0.99 and 297 GB of disk.")
TWO = SourceUnit("t2", "Nate has 2 turtles.")
THREE = SourceUnit("t3", "Nate has 3 turtles.")
PET = SourceUnit("pet", "Nate owns two pet turtles.")
TEA = SourceUnit("tea", "Sam does not like tea.")


def _held(card: str, unit: str) -> str:
    return held_why_not(profile_text(card), profile_text(unit))


class TestHeld:
    def test_a_paraphrase_with_every_detail_holds(self) -> None:
        """Another wording that keeps the number, the name and most words holds the unit."""
        assert _held("Nate owns two pet turtles.", "Nate has 2 turtles.") == ""

    def test_a_missing_value_name_or_negation_does_not_hold(self) -> None:
        """Each protected detail must be repeated: a number, a host, a name, a negation."""
        assert "number" in _held("Nate has turtles.", "Nate has 2 turtles.")
        assert "'297'" in _held(H36.text, H99.text)
        assert "host '10.0.0.99'" in _held(H36.text.replace("108", "297"), H99.text)
        assert "name" in _held("Someone has 2 turtles.", "Nate has 2 turtles.")
        assert "negation" in _held("Sam likes tea.", TEA.text)

    def test_too_few_words_do_not_hold(self) -> None:
        """A card on the same subject that says little of the unit's words does not hold it."""
        why = _held(
            "Andrew and his girlfriend go fishing in one of the lakes close to the city.",
            "Andrew caught a few trout and a pike at the reservoir.",
        )
        assert "content words" in why

    def test_who_did_what_must_stay(self) -> None:
        """A card that reverses who advised whom does not hold the unit."""
        assert "swaps" in _held(
            "James advised John to study opening moves.", "John advised James to study opening moves."
        )

    def test_a_card_holding_several_facts_holds_each(self) -> None:
        """A card of two sentences holds each unit whose fact it says."""
        card = "Nate has 2 turtles. Sam does not like tea."
        assert _held(card, TWO.text) == "" and _held(card, TEA.text) == ""


class TestGroundCards:
    def test_a_cited_unit_the_card_does_not_say_is_not_merged(self) -> None:
        """The repro: a card citing two servers but saying one keeps the one; the other is unheld."""
        drafts = [CardDraft(H36.text, "fact", ("h36", "h99"))]
        out = ground_cards(drafts, [H36, H99])
        assert [c.source_ids for c in out.cards] == [("h36",)]
        assert [u.id for u in out.unheld] == ["h99"] and out.claims_dropped == 1

    def test_an_invented_detail_rejects_the_card(self) -> None:
        """A card stating a value no cited unit states is rejected and its unit carded again."""
        out = ground_cards([CardDraft("Nate has 4 turtles.", "fact", ("t2",))], [TWO])
        assert out.cards == [] and [r.reason for r in out.rejected] == [RejectReason.INVENTED]
        assert "'4'" in out.rejected[0].detail and [u.id for u in out.unheld] == ["t2"]

    def test_an_invented_name_or_negation_rejects_the_card(self) -> None:
        """A person or a "not" no cited unit mentions is invented too."""
        named = ground_cards([CardDraft("Nate and Joanna have 2 turtles.", "fact", ("t2",))], [TWO])
        negated = ground_cards([CardDraft("Nate does not have 2 turtles.", "fact", ("t2",))], [TWO])
        assert [r.reason for r in named.rejected + negated.rejected] == [RejectReason.INVENTED] * 2

    def test_a_detail_from_a_cited_unit_the_card_does_not_hold_is_invented(self) -> None:
        """A card may state only what the units it keeps state: the year of a cited unit it does
        not hold cannot ride on it."""
        moved = SourceUnit("paris", "Joanna moved to Paris in 2021.")
        out = ground_cards(
            [CardDraft("Nate has 2 turtles since 2021.", "fact", ("t2", "paris"))], [TWO, moved]
        )
        assert [r.reason for r in out.rejected] == [RejectReason.INVENTED] and "2021" in out.rejected[
            0
        ].detail

    def test_a_card_fusing_two_values_is_rejected(self) -> None:
        """A card holding "2 turtles" and "3 turtles" at once hides a conflict: rejected."""
        out = ground_cards([CardDraft("Nate has 2 or 3 turtles.", "fact", ("t2", "t3"))], [TWO, THREE])
        assert [r.reason for r in out.rejected] == [RejectReason.FUSED]
        assert {u.id for u in out.unheld} == {"t2", "t3"}

    def test_a_card_over_the_cap_is_rejected_not_cut(self) -> None:
        """A model card longer than the cap is rejected; with no cap it stands."""
        long = CardDraft(TWO.text + " " + "Nate feeds them every day. " * 20, "fact", ("t2",))
        assert [r.reason for r in ground_cards([long], [TWO]).rejected] == [RejectReason.TOO_LONG]
        assert ground_cards([long], [TWO], max_chars=None).cards[0].source_ids == ("t2",)

    def test_unknown_ids_claim_what_the_card_holds(self) -> None:
        """A card citing no unit of the batch claims the units it holds, or is rejected."""
        out = ground_cards(
            [CardDraft("Nate owns 2 pet turtles.", "fact", ("zz",)), CardDraft("Ada sails.", "fact", ())],
            [TWO, TEA],
        )
        assert [c.source_ids for c in out.cards] == [("t2",)]
        assert [r.reason for r in out.rejected] == [RejectReason.HOLDS_NONE]

    def test_one_unit_on_two_cards_and_an_uncited_unit_held(self) -> None:
        """A unit two cards hold stays on both; a unit no card cites joins a card that holds it."""
        drafts = [CardDraft("Nate has 2 turtles.", "fact", ("t2",)), CardDraft(PET.text, "fact", ("t2",))]
        out = ground_cards(drafts, [TWO, PET])
        assert [c.source_ids[0] for c in out.cards] == ["t2", "t2"]
        assert sum("pet" in c.source_ids for c in out.cards) == 1
        assert out.claims_added == 1 and out.unheld == []

    def test_every_piece_of_a_long_unit_must_be_held(self) -> None:
        """A unit cut into pieces is held only where each piece is: the port piece is unheld."""
        text = "Operators restart the ingest service nightly. " * 12 + "Ingest listens on port 9431."
        pieces = source_pieces([SourceUnit("long", text)])
        assert len(pieces) == 2 and all(len(p.text) <= 400 for p in pieces)
        out = ground_cards([CardDraft(pieces[0].text, "fact", ("long",))], pieces)
        assert [u.text for u in out.unheld] == [pieces[1].text]


class TestGroundBatch:
    def test_the_fold_past_the_cap_keeps_the_port(self) -> None:
        """The repro: a long unit and a short one it says; after the extractive summariser and
        grounding, a card says 9431 and cites the short unit."""
        units = [
            SourceUnit(
                "long", "Operators restart the ingest service nightly. " * 12 + "Ingest listens on port 9431."
            ),
            SourceUnit("short", "Ingest listens on port 9431."),
        ]
        pieces = source_pieces(units)
        drafts = extractive.extract_cards(pieces, len(pieces))
        cards = ground_batch(drafts, pieces, model_written=False).cards
        assert any("9431" in c.text and "short" in c.source_ids for c in cards)
        assert units_not_held({u.id: u.text for u in units}, [(c.text, c.source_ids) for c in cards]) == {}

    def test_a_model_card_that_says_nothing_it_cites_leaves_no_unit_behind(self) -> None:
        """Rejected and unheld units get extractive cards: every unit is held after the batch."""
        units = [H36, H99, TWO, THREE, TEA]
        drafts = [
            CardDraft(H36.text, "fact", ("h36", "h99")),
            CardDraft("Nate has 2 or 3 turtles.", "fact", ("t2", "t3")),
            CardDraft("Sam loves green tea.", "fact", ("tea",)),
        ]
        out = ground_batch(drafts, units, model_written=True)
        assert out.recarded == {"h99", "t2", "t3", "tea"}
        assert (
            units_not_held({u.id: u.text for u in units}, [(c.text, c.source_ids) for c in out.cards]) == {}
        )


class TestUnitsNotHeld:
    def test_names_what_no_citing_card_says(self) -> None:
        """The invariant check reports a detail missing from the cards citing a unit, and a unit
        no card cites."""
        missing = units_not_held(
            {"h99": H99.text, "t2": TWO.text, "lost": "Ada sails on 4 July."},
            [(H36.text, ("h36", "h99")), ("Nate owns two turtles.", ("t2",))],
        )
        assert set(missing) == {"h99", "lost"} and "'297'" in missing["h99"]
        assert missing["lost"] == "cited by no card"


_WORDS = ["Nate", "Sam", "has", "turtles", "tea", "not", "likes", "2", "3", "port", "9431", "on", "4 July"]


@settings(max_examples=150, deadline=None)
@given(
    texts=st.lists(st.lists(st.sampled_from(_WORDS), min_size=1, max_size=8), min_size=1, max_size=6),
    claims=st.lists(
        st.tuples(st.lists(st.sampled_from(_WORDS), min_size=1, max_size=10), st.lists(st.integers(0, 7))),
        max_size=5,
    ),
    model_written=st.booleans(),
)
def test_any_drafts_leave_every_unit_held(
    texts: list[list[str]], claims: list[tuple[list[str], list[int]]], model_written: bool
) -> None:
    """Whatever a summariser drafts (invented values, wrong ids, fused values), every unit's
    details are in a card citing it after grounding."""
    units = [SourceUnit(f"u{i}", " ".join(words) + ".") for i, words in enumerate(texts)]
    drafts = [CardDraft(" ".join(words) + ".", "fact", tuple(f"u{i}" for i in ids)) for words, ids in claims]
    cards = ground_batch(drafts, units, model_written=model_written).cards
    assert units_not_held({u.id: u.text for u in units}, [(c.text, c.source_ids) for c in cards]) == {}
