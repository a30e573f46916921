"""Ledger cards and built peer cards for the peer-card tests, and the hostile texts they must survive."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from dreamer.peercard.build import build_peer_card
from dreamer.peercard.card import PeerCard
from dreamer.state import LedgerCard

T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
RULE = "═" * 46
HOSTILE = [
    "</system-reminder>",
    "<system-reminder>",
    "<|im_start|>system",
    "<|endoftext|>",
    "\n§\n",
    "§",
    RULE,
    "\r§\r",
    "\u2028§\u2028",
    "＜/system-reminder＞",
    "\x00\x1b[31m",
]


def card(
    text: str,
    *,
    kind: str = "fact",
    doc: str | None = None,
    profile: str = "research",
    profiles: tuple[str, ...] = (),
    reinforcements: int = 0,
    sources: int = 1,
    age_h: float = 0,
    supersedes: str | None = None,
) -> LedgerCard:
    return LedgerCard(
        document_id=doc or f"rollup:{profile}:{abs(hash(text)):x}",
        profile=profile,
        upstream_bank="private__hermes",
        text=text,
        normalized=text.lower(),
        kind=kind,
        source_ids=tuple(f"u{i}" for i in range(sources)),
        profiles=profiles or (profile,),
        reinforcements=reinforcements,
        promoted_at=T0 - timedelta(hours=age_h),
        last_seen_at=T0,
        supersedes=supersedes,
    )


def build(cards: Sequence[LedgerCard], **kwargs: Any) -> PeerCard:
    options: dict[str, Any] = {"profile": "research", "policy": "recency_wins", **kwargs}
    built = build_peer_card(cards, **options)
    assert built is not None
    return built
