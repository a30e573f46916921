"""What is current: marking the recall hits a newer card superseded, and ranking each below its successor.

A ``recency_wins`` conflict is recorded twice: the newer card carries the tag and metadata
``supersedes=<older document id>`` upstream (so a recall result shows it, on Hindsight too), and its
ledger row names the older card (so an older card is known as superseded even when its successor
is not among the hits). :func:`mark_superseded` takes both: the hits and what the ledger says.

Pure: plain values in, values out. Why: ``docs/design/readside.md``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime

from dreamer.readside.answers import LabelledRecall, Successor
from dreamer.state import LedgerCard

__all__ = ["mark_superseded", "successors_from_ledger"]


def successors_from_ledger(cards: Iterable[LedgerCard]) -> dict[str, Successor]:
    """Older document id -> the current card that replaced it, from ledger cards that supersede others.

    A chain (A superseded by B, B by C) resolves to its end (A -> C); when two cards supersede one,
    the later promoted wins; a cycle stops where it would repeat.
    """
    direct: dict[str, LedgerCard] = {}
    for card in cards:
        older = card.supersedes
        if not older or older == card.document_id:
            continue
        known = direct.get(older)
        if known is None or _newer(card, known):
            direct[older] = card
    out: dict[str, Successor] = {}
    for older in direct:
        seen = {older}
        card = direct[older]
        while card.document_id in direct and card.document_id not in seen:
            seen.add(card.document_id)
            card = direct[card.document_id]
        out[older] = Successor(card.document_id, card.text)
    return out


def mark_superseded(
    items: Sequence[LabelledRecall], known: Mapping[str, Successor] | None = None
) -> tuple[LabelledRecall, ...]:
    """``items`` with every superseded hit marked (``superseded_by``) and ranked just below its successor.

    A hit is superseded when another hit's roll-up card says it supersedes one of its document ids
    (its successor is then that hit), or when ``known`` (older document id -> successor, from
    :func:`successors_from_ledger`) names one of them. A successor among the hits that ranked lower
    moves up to just above the hit it superseded, so the current fact is read first, where the
    query found the old one. Everything else keeps its order.
    """
    known = known or {}
    successor_at: dict[str, int] = {}
    for index, item in enumerate(items):
        for older in item.supersedes:
            successor_at.setdefault(older, index)
    marked: list[LabelledRecall] = []
    moves_after: dict[int, int] = {}
    for index, item in enumerate(items):
        successor: Successor | None = None
        for document_id in item.document_ids:
            at = _successor_index(items, index, document_id, successor_at)
            if at is not None:
                moves_after[index] = successor_at[document_id]
                newer = items[at]
                successor = Successor(_card_id(newer, known.get(document_id)), newer.text)
                break
            if document_id in known and known[document_id].document_id not in item.document_ids:
                successor = known[document_id]
                break
        marked.append(item if successor is None else replace(item, superseded_by=successor))
    if not moves_after:
        return tuple(marked)
    order: list[int] = []
    placed: set[int] = set()

    def place(index: int, path: frozenset[int]) -> None:
        if index in placed or index in path:
            return
        newer = moves_after.get(index)
        if newer is not None:
            place(newer, path | {index})
        if index not in placed:
            placed.add(index)
            order.append(index)

    for index in range(len(marked)):
        place(index, frozenset())
    return tuple(marked[i] for i in order)


def _successor_index(
    items: Sequence[LabelledRecall], index: int, document_id: str, successor_at: Mapping[str, int]
) -> int | None:
    """The hit that finally replaced ``items[index]`` through ``document_id``: a chain among the
    hits (A by B, B by C) is followed to its end; None when no other hit supersedes it."""
    at = successor_at.get(document_id)
    if at is None or at == index:
        return None
    seen = {index, at}
    while True:
        nxt = next((successor_at[d] for d in items[at].document_ids if d in successor_at), None)
        if nxt is None or nxt in seen:
            return at
        seen.add(nxt)
        at = nxt


def _card_id(newer: LabelledRecall, from_ledger: Successor | None) -> str:
    """The successor's card id: the ledger's when the hit holds that card, else the hit's."""
    if from_ledger is not None and from_ledger.document_id in newer.document_ids:
        return from_ledger.document_id
    return newer.document_id or (newer.document_ids[0] if newer.document_ids else newer.id)


def _newer(card: LedgerCard, other: LedgerCard) -> bool:
    return (_stamp(card.promoted_at), card.document_id) > (_stamp(other.promoted_at), other.document_id)


def _stamp(moment: datetime) -> float:
    try:
        return moment.timestamp()
    except (OverflowError, OSError, ValueError):
        return 0.0
