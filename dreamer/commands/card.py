"""The body of ``dreamer card``: the peer cards from the promotion ledger, printed or written."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from dreamer.commands.output import emit, written_paths
from dreamer.commands.rollup import select_profiles
from dreamer.config import Config
from dreamer.errors import ExitCode
from dreamer.jobs.open import missing_state, open_for

if TYPE_CHECKING:
    from dreamer.peercard.card import PeerCard
    from dreamer.peercard.polish import PolishTokens


async def card_command(
    config: Config, profiles: Sequence[str], *, write: bool, as_json: bool, out: TextIO = sys.stdout
) -> int:
    """Print the peer cards from the local promotion ledger; with ``write``, write them too (and
    say the LLM tokens the polish used)."""
    from dreamer.peercard.card import GLOBAL_CARD_NAME
    from dreamer.peercard.polish import PolishTokens
    from dreamer.peercard.refresh import peer_cards, refresh_peer_cards

    chosen = select_profiles(config, profiles)
    polish = write and config.peer_card.polish
    written: list[Path] = []
    tokens = PolishTokens()
    # The polish (peer_card.polish) needs the backend; the cards printed are the cards as built.
    # A state file that is not there is not created: there are no cards to show or write.
    async with open_for(config, backend=polish, state="present") as opened:
        state = opened.ledger
        if state is None:
            names = [*chosen, *([] if profiles else [GLOBAL_CARD_NAME])]
            cards: list[tuple[str, Path | None, PeerCard | None]] = [(name, None, None) for name in names]
        else:
            cards = peer_cards(config, state, profiles=chosen, include_global=not profiles)
        if write and state is not None:
            written = await refresh_peer_cards(
                config,
                state,
                profiles=chosen,
                include_global=not profiles,
                backend=opened.opened_backend,
                tokens=tokens,
            )
    missing = None if state is not None else missing_state(config)
    if as_json:
        doc = {name: (card.to_json() if card else None) for name, _path, card in cards}
        payload: dict[str, object] = {"cards": doc, "written": [str(p) for p in written]}
        if missing is not None:
            payload["state_missing"] = missing
        if write:
            payload.update(tokens.counts())
        emit(payload, True, out)
        return ExitCode.OK
    if missing is not None:
        out.write(missing + "\n\n")
    for name, _path, card in cards:
        out.write(f"{card.render()}\n\n" if card else f"({name}: no promoted cards yet)\n\n")
        if card is not None and card.withheld:
            out.write(
                f"({name}: {card.withheld} card(s) withheld: they read like instructions to the agent; "
                "dreamer recall shows them marked)\n\n"
            )
    if write:
        out.write(written_paths(written) + "\n")
        if tokens.calls:
            out.write(polish_tokens_line(tokens) + "\n")
    return ExitCode.OK


def polish_tokens_line(tokens: PolishTokens) -> str:
    """The LLM tokens of the polish reflects, as ``dreamer rollup`` says its own."""
    estimated = f", {tokens.calls_estimated} estimated" if tokens.calls_estimated else ""
    return (
        f"polish LLM: {tokens.calls} call(s){estimated}, {tokens.prompt:,} prompt + "
        f"{tokens.completion:,} completion tokens"
    )
