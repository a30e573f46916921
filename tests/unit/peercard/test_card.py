"""A peer card rendered as Hermes renders a memory block, and as JSON naming where each entry came from."""

from __future__ import annotations

from dreamer.peercard.card import render_peer_card
from tests.support.peer_cards import build, card


class TestRender:
    def test_byte_for_byte(self) -> None:
        """The card renders exactly like a Hermes memory block under 'PEER CARD (<profile>)'."""
        built = build(
            [
                card("Evan went hiking last weekend.", kind="event"),
                card("Evan owns a sailing boat.", kind="fact"),
                card("Evan prefers tea over coffee.", kind="preference"),
                card("Evan is a software engineer in Lyon.", kind="identity", reinforcements=2),
            ]
        )
        expected = (
            "══════════════════════════════════════════════\n"
            "PEER CARD (research) [12% — 169/1,375 chars]\n"
            "══════════════════════════════════════════════\n"
            "IDENTITY: Evan is a software engineer in Lyon. (seen 3×, 2025-03)\n"
            "§\n"
            "ATTRIBUTE: Evan prefers tea over coffee.\n"
            "§\n"
            "Evan owns a sailing boat.\n"
            "§\n"
            "Evan went hiking last weekend."
        )
        assert render_peer_card(built) == expected
        assert built.render() == expected

    def test_global_title_and_thousands_separator(self) -> None:
        """The global card is titled 'global'; counts use thousands separators like Hermes."""
        built = build([card("x" * 190 + " tail")], profile=None, budget_chars=2000)
        header = built.render().split("\n")[1]
        assert header == f"PEER CARD (global) [{int(built.chars / 2000 * 100)}% — {built.chars}/2,000 chars]"

    def test_to_json(self) -> None:
        """The JSON form lists entries with the ledger card each came from."""
        built = build([card("Evan likes tea.", doc="d1")])
        assert built.to_json() == {
            "profile": "research",
            "chars": 15,
            "budget_chars": 1375,
            "left_out": 0,
            "withheld": 0,
            "entries": [{"text": "Evan likes tea.", "document_id": "d1"}],
        }
