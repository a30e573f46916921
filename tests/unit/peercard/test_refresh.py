"""Refreshing the peer cards from the ledger: which profiles get a card, with which bounds, and when none."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from dreamer.errors import PolicyError
from dreamer.hermes.memory.entries import parse_entries
from dreamer.peercard.refresh import refresh_peer_cards
from dreamer.state import LedgerCard, StateStore
from tests.support.configs import config_data, parsed
from tests.support.peer_cards import RULE, card, promote, refresh_config

# --- refreshing from the ledger (real SQLite state file) ----------------------------------------


class TestRefresh:
    async def test_writes_each_profile_and_the_global_card(self, tmp_path: Path) -> None:
        """Every profile with a path gets its card, the global card holds all; paths are returned."""
        config = refresh_config(tmp_path)
        with StateStore.open(tmp_path / "state.sqlite3") as state:
            promote(
                state,
                [
                    card("Evan is a nurse.", kind="identity", doc="a"),
                    card("The repo uses pytest.", profile="coder", kind="instruction", doc="b"),
                ],
            )
            written = await refresh_peer_cards(config, state)
        cards = tmp_path / "cards"
        assert written == [cards / "research.md", cards / "coder.md", cards / "global.md"]
        assert (cards / "research.md").read_text(encoding="utf-8").endswith("\nIDENTITY: Evan is a nurse.")
        coder = (cards / "coder.md").read_text(encoding="utf-8")
        assert coder.split("\n")[1].startswith("PEER CARD (coder) [")
        assert "Evan" not in coder
        assert parse_entries((cards / "global.md").read_text(encoding="utf-8").split(f"{RULE}\n", 2)[2]) == [
            "IDENTITY: Evan is a nurse.",
            "INSTRUCTION: The repo uses pytest.",
        ]

    async def test_empty_card_is_not_written(self, tmp_path: Path) -> None:
        """A profile with no promoted card gets no file; an empty ledger writes nothing at all."""
        config = refresh_config(tmp_path)
        with StateStore.open(tmp_path / "state.sqlite3") as state:
            assert await refresh_peer_cards(config, state) == []
            promote(state, [card("Evan is a nurse.", kind="identity", doc="a")])
            written = await refresh_peer_cards(config, state, profiles=["coder", "research"])
        assert written == [tmp_path / "cards" / "research.md", tmp_path / "cards" / "global.md"]
        assert not (tmp_path / "cards" / "coder.md").exists()

    async def test_global_card_can_be_left_alone(self, tmp_path: Path) -> None:
        """include_global=False refreshes only the named profiles' cards."""
        config = refresh_config(tmp_path)
        with StateStore.open(tmp_path / "state.sqlite3") as state:
            promote(state, [card("Evan is a nurse.", kind="identity", doc="a")])
            written = await refresh_peer_cards(config, state, profiles=["research"], include_global=False)
        assert written == [tmp_path / "cards" / "research.md"]
        assert not (tmp_path / "cards" / "global.md").exists()

    async def test_settings_bound_the_card(self, tmp_path: Path) -> None:
        """peer_card.max_entries and budget_chars from the configuration apply."""
        config = refresh_config(tmp_path, max_entries=2, budget_chars=200)
        with StateStore.open(tmp_path / "state.sqlite3") as state:
            promote(state, [card(f"Fact number {i} holds.", doc=f"d{i}") for i in range(5)])
            await refresh_peer_cards(config, state, profiles=["research"])
        text = (tmp_path / "cards" / "research.md").read_text(encoding="utf-8")
        assert len(parse_entries(text.split(f"{RULE}\n", 2)[2])) == 2
        assert "/200 chars]" in text

    async def test_disabled_or_unknown(self, tmp_path: Path) -> None:
        """peer_card.enabled = false writes nothing; an unknown profile is refused with the known ones."""
        with StateStore.open(tmp_path / "state.sqlite3") as state:
            promote(state, [card("Evan is a nurse.", kind="identity", doc="a")])
            assert await refresh_peer_cards(refresh_config(tmp_path, enabled=False), state) == []
            with pytest.raises(PolicyError, match=r"unknown profile 'nope' \(known: coder, research\)"):
                await refresh_peer_cards(refresh_config(tmp_path), state, profiles=["nope"])

    async def test_no_path_reads_no_ledger(self, tmp_path: Path) -> None:
        """A card with no configured path is neither read nor built: after every run of a daemon
        without peer-card paths, refreshing costs nothing."""

        class Counting(StateStore):
            reads = 0

            def ledger(self, upstream_bank: str | None = None) -> list[LedgerCard]:
                Counting.reads += 1
                return super().ledger(upstream_bank)

            def profile_cards(self, upstream_bank: str, profile: str) -> list[LedgerCard]:
                Counting.reads += 1
                return super().profile_cards(upstream_bank, profile)

        config = parsed(
            config_data(("global", "shared", "research"), ("research",), state_dir=str(tmp_path)),
            base_dir=tmp_path,
        )
        with StateStore.open(tmp_path / "state.sqlite3") as plain:
            promote(plain, [card("Evan is a nurse.", kind="identity", doc="a")])
            state = Counting(plain._conn, plain.path)
            assert await refresh_peer_cards(config, state) == []
        assert Counting.reads == 0

    async def test_a_profile_card_reads_its_own_cards_and_their_successors(self, tmp_path: Path) -> None:
        """A card another profile superseded leaves the profile's card, as the whole-ledger build did."""
        config = refresh_config(tmp_path)
        with StateStore.open(tmp_path / "state.sqlite3") as state:
            old = card("Nextcloud runs version 27.1.", doc="old")
            newer = dataclasses.replace(
                card("Nextcloud runs version 28.0.", profile="coder", doc="new"), supersedes="old"
            )
            other = card("The repo uses pytest.", profile="coder", doc="b")
            mine = card("Evan is a nurse.", kind="identity", doc="a")
            promote(state, [old, newer, other, mine])
            read = {c.document_id for c in state.profile_cards("private__hermes", "research")}
            assert read == {"old", "new", "a"}
            await refresh_peer_cards(config, state, profiles=["research"], include_global=False)
        text = (tmp_path / "cards" / "research.md").read_text(encoding="utf-8")
        assert "27.1" not in text and "Evan is a nurse." in text
