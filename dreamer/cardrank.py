"""The order a peer card takes a bank's cards in, from a card's own fields (pure).

Stable facts first (a classified kind), then plain facts, then events; within a tier the most
reinforced, the most sources, the newest, then the document id. The peer card ranks with it, and
the state file keeps every card's key in this order (``ledger_rank``), so a card is built from its
first cards without reading the others. Why: ``docs/design/peer-card.md``.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

__all__ = ["STABLE_KINDS", "TRANSIENT_KINDS", "RankKey", "kind_tier", "rank_key", "timestamp"]

#: Kinds that describe who someone is or how they want things: the first tier.
STABLE_KINDS = frozenset({"identity", "attribute", "preference", "relationship", "instruction"})
#: Kinds that describe something passing: listed last, so they are the first to fall off the budget.
TRANSIENT_KINDS = frozenset({"event"})

#: (tier, -reinforcements, -distinct sources, -promotion time, document id): smaller ranks first.
RankKey = tuple[int, int, int, float, str]


def kind_tier(kind: str) -> int:
    """0 for a stable kind, 2 for a transient one, 1 for any other (plain facts)."""
    kind = kind.lower()
    return 0 if kind in STABLE_KINDS else (2 if kind in TRANSIENT_KINDS else 1)


def timestamp(moment: datetime) -> float:
    """Seconds since the epoch; 0.0 for a time no platform can express."""
    try:
        return moment.timestamp()
    except (OverflowError, OSError, ValueError):
        return 0.0


def rank_key(
    kind: str, reinforcements: int, source_ids: Iterable[str], promoted_at: datetime, document_id: str
) -> RankKey:
    """A card's place in a peer card's order."""
    return (
        kind_tier(kind),
        -reinforcements,
        -len(set(source_ids)),
        -timestamp(promoted_at),
        document_id,
    )
