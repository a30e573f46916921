"""Parsing reflect answers into cards (provenance kept, invented ids dropped, content-free = none),
and long texts split between sentences only."""

from __future__ import annotations

from dreamer.rollup.cards import (
    CARD_KINDS,
    CARDS_SCHEMA,
    SourceUnit,
    is_content_free,
    parse_reflect_cards,
    reflect_query,
    sentences,
    split_long,
)
from dreamer.rollup.grounding import RejectReason, ground_cards

UNITS = [
    SourceUnit("u1", "Sam moved the home router to the attic on 7 May 2026."),
    SourceUnit("u2", "Ada upgraded the NAS disks in 2025."),
]


class TestParseReflectCards:
    def test_cards_keep_known_source_ids(self) -> None:
        """Valid cards come through with their source ids."""
        out = parse_reflect_cards(
            {
                "cards": [
                    {"text": "Ada upgraded the NAS disks in 2025.", "kind": "event", "source_ids": ["u2"]}
                ]
            },
            "",
            UNITS,
            10,
        )
        assert [(c.text, c.kind, c.source_ids) for c in out] == [
            ("Ada upgraded the NAS disks in 2025.", "event", ("u2",))
        ]

    def test_invented_ids_are_dropped_and_grounding_ties_the_card_by_what_it_holds(self) -> None:
        """A card citing unknown ids keeps none (an unknown kind reads as a fact); grounding then
        gives it the units of the batch it holds, and none when it holds none."""
        out = parse_reflect_cards(
            {
                "cards": [
                    {
                        "text": "Sam moved the router to the attic on 7 May 2026.",
                        "kind": "weird",
                        "source_ids": ["zz"],
                    },
                    {"text": "Sam moved the router to the attic.", "source_ids": ["zz"]},
                ]
            },
            "",
            UNITS,
            10,
        )
        assert [(c.source_ids, c.kind) for c in out] == [((), "fact"), ((), "fact")]
        grounded = ground_cards(out, UNITS)
        assert [c.source_ids for c in grounded.cards] == [("u1",)]
        # The second card drops u1's date: it holds no unit, so it cannot claim one.
        assert [r.reason for r in grounded.rejected] == [RejectReason.HOLDS_NONE]

    def test_a_card_text_is_never_cut(self) -> None:
        """A card over the cap comes through whole (grounding rejects it rather than cut a fact off)."""
        text = "Sam moved the router. " * 30 + "Port 9431 is open."
        out = parse_reflect_cards({"cards": [{"text": text, "source_ids": ["u1"]}]}, "", UNITS, 5)
        assert out[0].text == " ".join(text.split()) and out[0].text.endswith("9431 is open.")

    def test_content_free_answers_give_no_cards(self) -> None:
        """'I don't have information' and empty structures are no cards, not errors."""
        assert parse_reflect_cards(None, "I don't have information about that.", UNITS, 5) == []
        assert parse_reflect_cards({"cards": []}, "", UNITS, 5) == []
        assert (
            parse_reflect_cards(
                {"cards": [{"text": "I don't have any information.", "kind": "fact", "source_ids": ["u1"]}]},
                "",
                UNITS,
                5,
            )
            == []
        )
        assert is_content_free("  ") and is_content_free("No relevant memories found.")
        assert not is_content_free("Sam likes sailing.")

    def test_at_most_max_cards(self) -> None:
        """The model cannot exceed the per-run card cap."""
        many = {
            "cards": [{"text": f"Fact number {i}", "kind": "fact", "source_ids": ["u1"]} for i in range(9)]
        }
        assert len(parse_reflect_cards(many, "", UNITS, 3)) == 3

    def test_query_lists_every_unit_with_its_id_and_the_directive(self) -> None:
        """The single reflect query carries the units, their ids and the directive."""
        q = reflect_query(UNITS, "keep dates", 5)
        assert "[u1]" in q and "[u2]" in q and "keep dates" in q

    def test_one_malformed_card_is_dropped_alone(self) -> None:
        """A card that is not an object or has no string text is skipped; its neighbours stay."""
        good = {"text": "Ada upgraded the NAS disks in 2025.", "kind": "EVENT", "source_ids": ["u2", 7]}
        out = parse_reflect_cards({"cards": ["junk", {"text": 5, "kind": "fact"}, good]}, "", UNITS, 5)
        assert [(c.kind, c.source_ids) for c in out] == [("event", ("u2",))]

    def test_missing_kind_and_ids_are_tolerated(self) -> None:
        """A card without kind reads as a fact; without (or with non-list) source_ids it has none."""
        out = parse_reflect_cards(
            {"cards": [{"text": "Sam moved the router."}, {"text": "Ada's NAS disks", "source_ids": "u2"}]},
            "",
            UNITS,
            5,
        )
        assert [(c.kind, c.source_ids) for c in out] == [("fact", ()), ("fact", ())]

    def test_a_malformed_answer_is_no_cards(self) -> None:
        """An answer whose cards are not a list, or that has no cards at all, gives no cards."""
        assert parse_reflect_cards({"cards": {"text": "x"}}, "", UNITS, 5) == []
        assert parse_reflect_cards({"summary": "Sam moved the router."}, "", UNITS, 5) == []


class TestCardsSchema:
    def test_schema_sent_to_reflect_is_the_plain_card_schema(self) -> None:
        """The schema generated from the model is the plain one reflect has always been sent:
        inlined, untitled, every field required, kinds as an enum."""
        assert {
            "type": "object",
            "properties": {
                "cards": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "text": {"type": "string", "description": "One durable fact, self-contained."},
                            "kind": {"type": "string", "enum": list(CARD_KINDS)},
                            "source_ids": {
                                "type": "array",
                                "items": {"type": "string"},
                                "description": "Ids of the memories this card summarises.",
                            },
                        },
                        "required": ["text", "kind", "source_ids"],
                    },
                }
            },
            "required": ["cards"],
        } == CARDS_SCHEMA


class TestSplitLong:
    def test_a_text_within_the_cap_is_one_piece_with_whitespace_collapsed(self) -> None:
        """Runs of whitespace, newlines included, become one space; nothing is cut."""
        assert split_long("  Nate  has\n\ttwo turtles. ") == ["Nate has two turtles."]

    def test_a_longer_text_is_cut_between_sentences_only(self) -> None:
        """Pieces end at sentence ends and stay within the cap; joined, they are the text."""
        text = "Sam uses v2.0 of the tool, e.g. for backups. " * 6 + "It listens on port 9431."
        pieces = split_long(text, limit=120)
        assert len(pieces) > 1 and all(len(p) <= 120 and p.endswith(".") for p in pieces)
        assert " ".join(pieces) == " ".join(text.split())

    def test_a_sentence_over_the_cap_stays_whole(self) -> None:
        """A single sentence longer than the cap is a piece of its own, never cut."""
        long = "Joanna wrote " + "a long and winding screenplay " * 10 + "set in 1999."
        assert split_long(f"Short one. {long}", limit=50) == ["Short one.", " ".join(long.split())]

    def test_sentences_keep_their_closing_quotes(self) -> None:
        """A quote or bracket after a sentence's stop stays with that sentence."""
        assert sentences('He said "Hi." Then left.') == ['He said "Hi."', "Then left."]
