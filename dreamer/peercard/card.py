"""The peer card as a value: its entries, where each came from, its bounds, and its rendering.

A card renders as Hermes renders a memory block, under the title ``PEER CARD (<profile>)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dreamer.hermes.memory.entries import joined_length
from dreamer.hermes.memory.render import render_titled_block

__all__ = ["GLOBAL_CARD_NAME", "PeerCard", "peer_card_title", "render_peer_card"]

GLOBAL_CARD_NAME = "global"


@dataclass(frozen=True, slots=True)
class PeerCard:
    """A built peer card: its entries in order, the ledger card each came from, and its bounds.

    ``left_out`` counts eligible cards that did not fit (entry count or character budget);
    ``withheld`` the cards read that were not put in because they read like an instruction to the
    agent (``dreamer.threats``).
    """

    profile: str | None
    entries: tuple[str, ...]
    document_ids: tuple[str, ...]
    budget_chars: int
    left_out: int = 0
    withheld: int = 0

    @property
    def name(self) -> str:
        """The profile name, or ``global`` for the global card."""
        return self.profile if self.profile is not None else GLOBAL_CARD_NAME

    @property
    def chars(self) -> int:
        """Characters the entries occupy, counted as Hermes counts: the joined text."""
        return joined_length(self.entries)

    def render(self) -> str:
        return render_peer_card(self)

    def to_json(self) -> dict[str, Any]:
        return {
            "profile": self.name,
            "chars": self.chars,
            "budget_chars": self.budget_chars,
            "left_out": self.left_out,
            "withheld": self.withheld,
            "entries": [
                {"text": entry, "document_id": doc}
                for entry, doc in zip(self.entries, self.document_ids, strict=True)
            ],
        }


def peer_card_title(name: str) -> str:
    """The block title: ``PEER CARD (<name>)``."""
    return f"PEER CARD ({name})"


def render_peer_card(card: PeerCard) -> str:
    """The card as Hermes renders a memory block, under ``PEER CARD (<profile>)``."""
    return render_titled_block(peer_card_title(card.name), card.entries, card.budget_chars)
