"""Ledger cards, built peer cards and a configuration with card paths for the peer-card tests, and the
hostile texts the cards must survive."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from dreamer.config import Config
from dreamer.peercard.build import build_peer_card
from dreamer.peercard.card import PeerCard
from dreamer.state import LedgerCard, StateStore, Watermark
from tests.support.configs import config_data, parsed
from tests.support.ledger import commit_run

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


def refresh_config(tmp_path: Path, **peer_card: Any) -> Config:
    writable = {"access": "read_write"}
    data = config_data(
        {"global": {}, "shared": {}, "research": writable, "coder": writable},
        {
            "research": {"peer_card_path": "cards/research.md"},
            "coder": {"peer_card_path": "cards/coder.md", "conflict_policy": "keep_both"},
        },
        state_dir=str(tmp_path / "state"),
        peer_card={"global_path": "cards/global.md", **peer_card},
    )
    return parsed(data, base_dir=tmp_path)


def promote(state: StateStore, cards: Sequence[LedgerCard]) -> None:
    commit_run(
        state,
        cards,
        run_id="run-1",
        profile="research",
        bank_id="private__hermes__research",
        watermark=Watermark(),
        at=T0,
    )
