"""Building a peer card (pure): which ledger cards, in what order, within what bounds.

`peer_card` makes a card from its cards in rank order (:class:`RankedCards`: the state file's rank
rows, or cards in memory for `build_peer_card`), reading them only as far as the bounds need;
`polished_peer_card` bounds a polish's entries the same way. The rules and why:
``docs/design/peer-card.md``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Protocol

from dreamer.cardrank import RankKey, rank_key
from dreamer.config import ConflictPolicy
from dreamer.hermes.memory.entries import ENTRY_DELIMITER
from dreamer.peercard.card import PeerCard
from dreamer.peercard.entry import KIND_MARKERS, format_entry
from dreamer.peercard.polish import PolishedEntry
from dreamer.state import LedgerCard
from dreamer.text import content_tokens
from dreamer.threats import prompt_threats

__all__ = [
    "DEFAULT_BUDGET_CHARS",
    "DEFAULT_MAX_ENTRIES",
    "DEFAULT_MAX_ENTRY_CHARS",
    "LOOKAHEAD",
    "build_peer_card",
    "polished_peer_card",
]

DEFAULT_MAX_ENTRIES = 40
DEFAULT_MAX_ENTRY_CHARS = 200
#: The budget Hermes gives USER.md: a peer card costs no more prompt than the user profile.
DEFAULT_BUDGET_CHARS = 1375
#: Shortest entry limit accepted: room for the longest marker and a few words.
MIN_ENTRY_CHARS = 20
#: After the first entry too big for what is left of the budget, how many more cards are looked at
#: for smaller entries that still fit; the cards after them are not read (docs/design/peer-card.md).
LOOKAHEAD = 100


class RankedCards(Protocol):
    """Where a peer card's cards come from: its members in rank order (``dreamer.cardrank``), the
    cards that supersede them, and how many there are. A list of cards in memory
    (:func:`build_peer_card`) or the state file's rank rows (``peercard.refresh``)."""

    def members(self) -> Iterator[Sequence[LedgerCard]]:
        """The card's members (a profile's cards, or every card of the bank), in rank order, a
        chunk at a time."""
        ...

    def newer(self, document_ids: Sequence[str]) -> Mapping[str, Sequence[LedgerCard]]:
        """For each of ``document_ids`` that some card supersedes, the cards that do."""
        ...

    def count(self, *, superseded: bool) -> int:
        """How many members there are (``superseded`` False: those no card supersedes)."""
        ...


def build_peer_card(
    cards: Sequence[LedgerCard],
    *,
    profile: str | None,
    policy: ConflictPolicy,
    max_entries: int = DEFAULT_MAX_ENTRIES,
    max_entry_chars: int = DEFAULT_MAX_ENTRY_CHARS,
    budget_chars: int = DEFAULT_BUDGET_CHARS,
) -> PeerCard | None:
    """The peer card of ``profile`` (None: the global card) from ledger cards, or None when empty.

    Supersession is read across every card given: a newer card of another profile still counts."""
    return peer_card(
        _CardsInMemory(cards, profile),
        profile=profile,
        policy=policy,
        max_entries=max_entries,
        max_entry_chars=max_entry_chars,
        budget_chars=budget_chars,
    )


def peer_card(
    source: RankedCards,
    *,
    profile: str | None,
    policy: ConflictPolicy,
    max_entries: int = DEFAULT_MAX_ENTRIES,
    max_entry_chars: int = DEFAULT_MAX_ENTRY_CHARS,
    budget_chars: int = DEFAULT_BUDGET_CHARS,
) -> PeerCard | None:
    """The peer card of ``profile`` (None: the global card) from its ranked cards, or None when
    empty. Cards are read from ``source`` only as far as the card's bounds need them."""
    if max_entries < 1 or budget_chars < 1:
        raise ValueError(
            f"max_entries and budget_chars must be at least 1 (got {max_entries}, {budget_chars})"
        )
    if max_entry_chars < MIN_ENTRY_CHARS:
        raise ValueError(f"max_entry_chars must be at least {MIN_ENTRY_CHARS} (got {max_entry_chars})")
    if policy not in ("recency_wins", "keep_both"):
        raise ValueError(f"unknown conflict policy {policy!r}; use recency_wins or keep_both")
    candidates = (
        (*_entry(card, max_entry_chars), card.document_id, card.text)
        for card in _ordered(source, profile, keep_both=policy == "keep_both")
    )
    total = source.count(superseded=policy == "keep_both")
    return _bounded_card(profile, candidates, max_entries=max_entries, budget_chars=budget_chars, total=total)


def _entry(card: LedgerCard, max_entry_chars: int) -> tuple[str, str]:
    """A card's entry and its dedup key; a fact found more than once ends with how often and when
    (``(seen 8×, 2023-03 to 2023-10)``), within the entry's length."""
    marker = KIND_MARKERS.get(card.kind.lower())
    told = card.told
    suffix = f" ({told.short()})" if told is not None else ""
    if not suffix or max_entry_chars - len(suffix) < MIN_ENTRY_CHARS:
        return format_entry(card.text, marker, max_entry_chars)
    entry, key = format_entry(card.text, marker, max_entry_chars - len(suffix))
    return (entry + suffix if entry else entry), key


def _ordered(source: RankedCards, profile: str | None, *, keep_both: bool) -> Iterator[LedgerCard]:
    """The members in rank order, lazily; a superseded card is dropped (``recency_wins``) or kept
    with the cards that supersede it just before it, when they would rank after it (``keep_both``)."""
    placed: set[str] = set()

    def place(
        card: LedgerCard, path: frozenset[str], newer_of: Mapping[str, Sequence[LedgerCard]]
    ) -> Iterator[LedgerCard]:
        if card.document_id in placed or card.document_id in path:
            return
        for newer in sorted(newer_of.get(card.document_id, ()), key=_rank):
            if profile is None or newer.profile == profile or profile in newer.profiles:
                yield from place(newer, path | {card.document_id}, source.newer([newer.document_id]))
        if card.document_id not in placed:
            placed.add(card.document_id)
            yield card

    for chunk in source.members():
        newer_of = source.newer([card.document_id for card in chunk])
        for card in chunk:
            if not keep_both:
                if card.document_id not in newer_of:
                    yield card
                continue
            yield from place(card, frozenset(), newer_of)


class _CardsInMemory:
    """:class:`RankedCards` over a list of cards: the members, and every card for supersession."""

    def __init__(self, cards: Sequence[LedgerCard], profile: str | None) -> None:
        self._members = sorted(
            (c for c in cards if profile is None or c.profile == profile or profile in c.profiles), key=_rank
        )
        self._newer: dict[str, list[LedgerCard]] = {}
        for card in cards:
            if card.supersedes and card.supersedes != card.document_id:
                self._newer.setdefault(card.supersedes, []).append(card)

    def members(self) -> Iterator[Sequence[LedgerCard]]:
        yield self._members

    def newer(self, document_ids: Sequence[str]) -> Mapping[str, Sequence[LedgerCard]]:
        return {i: self._newer[i] for i in document_ids if i in self._newer}

    def count(self, *, superseded: bool) -> int:
        if superseded:
            return len(self._members)
        return sum(1 for c in self._members if c.document_id not in self._newer)


def polished_peer_card(
    card: PeerCard, entries: Sequence[PolishedEntry], *, max_entries: int, max_entry_chars: int
) -> PeerCard | None:
    """``card`` with its entries replaced by polished ones, bounded exactly as a card as built is.

    Each entry is marked, neutralised, made one line, clipped and deduplicated as a ledger card's
    entry is, then taken in order within ``max_entries`` and the card's character budget;
    ``left_out`` counts polished entries that did not fit. Each entry is attributed to the entry of
    ``card`` it shares most content words with (provenance for :meth:`PeerCard.to_json`).
    """
    candidates = (
        (
            *format_entry(entry.text, entry.mark, max_entry_chars),
            _closest_document(entry.text, card),
            entry.text,
        )
        for entry in entries
    )
    return _bounded_card(
        card.profile,
        candidates,
        max_entries=max_entries,
        budget_chars=card.budget_chars,
        total=len(entries),
    )


def _closest_document(text: str, card: PeerCard) -> str:
    words = set(content_tokens(text))
    best_id, best = card.document_ids[0], -1.0
    for entry, document_id in zip(card.entries, card.document_ids, strict=True):
        other = set(content_tokens(entry))
        overlap = len(words & other) / len(words | other) if words | other else 0.0
        if overlap > best:
            best_id, best = document_id, overlap
    return best_id


def _bounded_card(
    profile: str | None,
    candidates: Iterable[tuple[str, str, str, str]],
    *,
    max_entries: int,
    budget_chars: int,
    total: int,
) -> PeerCard | None:
    """Entries ``(entry, dedup key, document id, source text)`` taken in order within the bounds;
    None when empty.

    ``candidates`` is read lazily and holds ``total`` items. It is read no further once the card
    holds ``max_entries`` entries, or :data:`LOOKAHEAD` items after the first entry too big for what
    is left of the budget; the items not read are counted in ``left_out`` with those that did not fit.
    An item whose source text reads like an instruction to the agent (the threat scan) is never an
    entry: it is counted in ``withheld``.
    """
    entries: list[str] = []
    document_ids: list[str] = []
    seen: set[str] = set()
    used = 0
    left_out = 0
    withheld = 0
    looked = 0
    first_misfit: int | None = None
    items = iter(candidates)
    while len(entries) < max_entries and (first_misfit is None or looked - first_misfit < LOOKAHEAD):
        item = next(items, None)
        if item is None:
            break
        looked += 1
        entry, key, document_id, source = item
        if key and prompt_threats(source):
            withheld += 1
            continue
        # Two facts cut to the same visible entry would be the same line twice.
        shown = "shown:" + " ".join(entry.casefold().split())
        if not key or key in seen or shown in seen:
            continue
        seen.update((key, shown))
        cost = len(entry) + (len(ENTRY_DELIMITER) if entries else 0)
        if used + cost > budget_chars:
            left_out += 1
            if first_misfit is None:
                first_misfit = looked
            continue
        entries.append(entry)
        document_ids.append(document_id)
        used += cost
    left_out += max(0, total - looked)
    if not entries:
        return None
    return PeerCard(profile, tuple(entries), tuple(document_ids), budget_chars, left_out, withheld)


def _rank(card: LedgerCard) -> RankKey:
    return rank_key(card.kind, card.reinforcements, card.source_ids, card.promoted_at, card.document_id)
