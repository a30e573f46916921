"""Refreshing the peer cards of a configuration: built from the local ledger, written, then polished.

`peer_cards` builds each profile's card and the global card; `refresh_peer_cards` writes the ones
with a configured path and, with ``peer_card.polish``, rewrites each by one reflect when that is
usable. Why the card as built is written first: ``docs/design/peer-card.md``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path

import anyio.to_thread
import structlog

from dreamer.backends.base import MemoryBackend
from dreamer.config import Config
from dreamer.errors import DreamerError, PolicyError
from dreamer.peercard.build import peer_card, polished_peer_card
from dreamer.peercard.card import GLOBAL_CARD_NAME, PeerCard
from dreamer.peercard.entry import MARKERS
from dreamer.peercard.polish import PolishRejected, PolishTokens, reflect_polish
from dreamer.peercard.write import write_peer_card
from dreamer.retry import RetryPolicy
from dreamer.rollup.promote import ROLLUP_TAG
from dreamer.slot import SlotLock
from dreamer.state import GLOBAL_SCOPE, LedgerCard, RankPosition, StateStore

__all__ = ["peer_cards", "refresh_peer_cards"]

log = structlog.get_logger("dreamer.peercard")


def peer_cards(
    config: Config,
    state: StateStore,
    *,
    profiles: Sequence[str] | None = None,
    include_global: bool = True,
    with_path_only: bool = False,
) -> list[tuple[str, Path | None, PeerCard | None]]:
    """``(name, configured path, card)`` for each profile and (unless excluded) the global card.

    ``profiles`` None means every enabled profile; ``card`` is None when it would be empty. Reads
    the local ledger only, in one snapshot: each card reads its scope's cards (a profile's, or the
    global bank's) in rank order only as far as it shows them, and the cards that supersede those.
    With ``with_path_only``, cards without a configured path are neither read nor built. The global
    card drops superseded cards, which follows each profile's own policy
    (``docs/design/peer-card.md``).
    """
    settings = config.peer_card
    if profiles is None:
        names = list(config.enabled_profiles())
    else:
        unknown = [name for name in profiles if name not in config.profiles]
        if unknown:
            known = ", ".join(sorted(config.profiles)) or "none defined under [profiles]"
            raise PolicyError(f"unknown profile {unknown[0]!r} (known: {known})")
        names = list(dict.fromkeys(profiles))
    bounds = {
        "max_entries": settings.max_entries,
        "max_entry_chars": settings.max_entry_chars,
        "budget_chars": settings.budget_chars,
    }
    with state.snapshot():  # cards read in chunks, all from one ledger whatever commits meanwhile
        return _built(config, state, names, include_global, with_path_only, bounds)


def _built(
    config: Config,
    state: StateStore,
    names: Sequence[str],
    include_global: bool,
    with_path_only: bool,
    bounds: Mapping[str, int],
) -> list[tuple[str, Path | None, PeerCard | None]]:
    settings = config.peer_card
    out: list[tuple[str, Path | None, PeerCard | None]] = []
    for name in names:
        profile = config.profiles[name]
        if with_path_only and profile.peer_card_path is None:
            continue
        ranks = _LedgerRanks(state, config.upstream_bank_id(name), name)
        card = peer_card(ranks, profile=name, policy=profile.conflict_policy, **bounds)
        out.append((name, profile.peer_card_path, card))
    if include_global and not (with_path_only and settings.global_path is None):
        ranks = _LedgerRanks(state, config.bank_id(config.topology.global_bank), GLOBAL_SCOPE)
        card = peer_card(ranks, profile=None, policy="recency_wins", **bounds)
        out.append((GLOBAL_CARD_NAME, settings.global_path, card))
    return out


class _LedgerRanks:
    """A peer card's cards from the state file's rank rows (:class:`~.build.RankedCards`): read a
    chunk at a time in rank order, as far as the card's bounds need them."""

    #: Cards read at a time: a card of the default bounds is usually filled from the first chunk.
    CHUNK = 64

    def __init__(self, state: StateStore, upstream_bank: str, scope: str) -> None:
        self._state = state
        self._bank = upstream_bank
        self._scope = scope

    def members(self) -> Iterator[Sequence[LedgerCard]]:
        after: RankPosition | None = None
        while True:
            cards, after = self._state.ranked_chunk(self._bank, self._scope, after, self.CHUNK)
            if cards:
                yield cards
            if after is None:
                return

    def newer(self, document_ids: Sequence[str]) -> Mapping[str, Sequence[LedgerCard]]:
        out: dict[str, list[LedgerCard]] = {}
        for card in self._state.superseding(document_ids):
            if card.upstream_bank == self._bank and card.supersedes and card.supersedes != card.document_id:
                out.setdefault(card.supersedes, []).append(card)
        return out

    def count(self, *, superseded: bool) -> int:
        return self._state.ranked_count(self._bank, self._scope, superseded=superseded)


async def refresh_peer_cards(
    config: Config,
    state: StateStore,
    *,
    profiles: Sequence[str] | None = None,
    include_global: bool = True,
    backend: MemoryBackend | None = None,
    tokens: PolishTokens | None = None,
) -> list[Path]:
    """Rebuild and write the peer cards that have a configured path; returns the paths written.

    An empty card is not written (a previous file stays as it was). See :func:`peer_cards`. With
    ``peer_card.polish`` and a ``backend`` whose reflect uses an LLM, each written card is then
    polished and written again when the polish is usable; the card as built is on disk first, so a
    failed, slow or cancelled polish never leaves the file stale. Each polish reflect's LLM tokens
    are counted in ``tokens``, usable answer or not (also when a later card's refresh fails).
    """
    if not config.peer_card.enabled:
        return []
    polisher = _polisher(config, backend)
    slot = SlotLock.from_config(config.slot)
    written: list[Path] = []
    built = await anyio.to_thread.run_sync(
        lambda: peer_cards(
            config, state, profiles=profiles, include_global=include_global, with_path_only=True
        )
    )
    for name, path, card in built:
        if path is None or card is None:
            continue
        if card.withheld:
            log.warning(
                "peer card entries withheld: they read like instructions to the agent",
                card=name,
                withheld=card.withheld,
            )
        await anyio.to_thread.run_sync(write_peer_card, path, card.render())
        written.append(path)
        if polisher is not None:
            polished = await _polish(config, polisher, card, slot, tokens)
            if polished is not None:
                await anyio.to_thread.run_sync(write_peer_card, path, polished.render())
    return written


def _polisher(config: Config, backend: MemoryBackend | None) -> MemoryBackend | None:
    """The backend to polish with, or None (saying why when the configuration asks for a polish)."""
    if not config.peer_card.polish:
        return None
    if backend is None:
        log.info("peer card polish skipped", reason="no backend to reflect with; writing the cards as built")
        return None
    if not backend.reflect_uses_llm:
        log.info(
            "peer card polish skipped",
            reason=f"the {backend.name} backend's reflect does not use an LLM; writing the cards as built",
        )
        return None
    return backend


def _polish_source(config: Config, card: PeerCard) -> tuple[str, tuple[str, ...]]:
    """The bank a card's polish reflects on and the tags limiting it to the card's own cards."""
    if card.profile is None:
        return config.bank_id(config.topology.global_bank), (ROLLUP_TAG,)
    return config.upstream_bank_id(card.profile), (f"src:{card.profile}",)


async def _polish(
    config: Config, backend: MemoryBackend, card: PeerCard, slot: SlotLock, tokens: PolishTokens | None
) -> PeerCard | None:
    """``card`` polished by one reflect, or None (with a warning giving the reason) to keep it as built."""
    settings = config.peer_card
    bank_id, tags = _polish_source(config, card)
    try:
        entries = await reflect_polish(
            backend,
            bank_id,
            card.entries,
            MARKERS,
            max_entries=settings.max_entries,
            max_entry_chars=settings.max_entry_chars,
            budget_chars=card.budget_chars,
            budget=settings.polish_budget,
            tags=tags,
            policy=RetryPolicy.from_config(config.retry),
            slot=slot,
            tokens=tokens,
        )
        polished = polished_peer_card(
            card, entries, max_entries=settings.max_entries, max_entry_chars=settings.max_entry_chars
        )
        if polished is None:
            raise PolishRejected("no polished entry has words")
        if polished.left_out:
            raise PolishRejected(
                f"{polished.left_out} polished entries do not fit peer_card.max_entries or budget_chars"
            )
        if polished.withheld:
            raise PolishRejected(f"{polished.withheld} polished entries read like instructions to the agent")
    except (DreamerError, TimeoutError) as exc:
        detail = getattr(exc, "detail", "")
        log.warning(
            "peer card polish failed; the card as built stays",
            card=card.name,
            bank=bank_id,
            reason=f"{exc} {detail}".strip() if isinstance(detail, str) else str(exc),
            error=type(exc).__name__,
        )
        return None
    log.info(
        "peer card polished",
        card=card.name,
        entries=len(polished.entries),
        chars=polished.chars,
        entries_as_built=len(card.entries),
        chars_as_built=card.chars,
    )
    return replace(polished, left_out=card.left_out, withheld=card.withheld)
