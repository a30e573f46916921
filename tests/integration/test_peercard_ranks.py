"""Peer cards read from the state file's rank rows equal peer cards built from every card in memory,
and the rank rows follow promotions, reinforcements, new profiles and the upgrade from schema 4.

The reference is ``build_peer_card`` over ``StateStore.profile_cards`` (a profile) or
``StateStore.ledger`` (the bank): every card read, ranked and placed in memory.
"""

from __future__ import annotations

import random
import sqlite3
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from dreamer.config import ConflictPolicy, load_config
from dreamer.errors import StateFileError
from dreamer.peercard.build import build_peer_card, peer_card
from dreamer.peercard.refresh import _LedgerRanks, peer_cards
from dreamer.state import GLOBAL_SCOPE, SCHEMA_VERSION, LedgerCard, Reinforcement, StateStore, Watermark
from dreamer.state import store as state_store
from dreamer.state.schema import needs_upgrade
from tests.support.ledger import commit_run

T0 = datetime(2026, 11, 1, tzinfo=UTC)
PROFILES = ("research", "homelab", "coder")
KINDS = ("fact", "identity", "preference", "event", "Relationship", "instruction", "attribute")
BANKS = ("global", "other")


def _commit(state: StateStore, run: int, promoted: list[LedgerCard], reinforced: list[Reinforcement]) -> None:
    commit_run(
        state,
        promoted,
        reinforced=reinforced,
        run_id=f"run-{run}",
        profile="research",
        watermark=Watermark(T0 + timedelta(seconds=run)),
    )


def _grow(state: StateStore, rng: random.Random, runs: int) -> list[LedgerCard]:
    """Random runs: new cards of every kind, some superseding earlier ones (chains and cycles too),
    some reinforced later by other profiles, texts that repeat and texts too long for the budget."""
    written: list[LedgerCard] = []
    for run in range(runs):
        promoted = []
        for _ in range(rng.randint(1, 12)):
            n = len(written) + len(promoted)
            profile = rng.choice(PROFILES)
            older = [c.document_id for c in written if rng.random() < 0.3]
            text = rng.choice(
                [
                    f"Fact {n} about {profile}.",
                    f"Fact {rng.randint(0, 5)} about {profile}.",  # repeats an earlier text
                    f"A long card {n} " + "with many words " * rng.randint(1, 12),
                    "!!! ???",  # no words: never an entry
                ]
            )
            promoted.append(
                LedgerCard(
                    document_id=f"doc-{n}",
                    profile=profile,
                    upstream_bank=rng.choice(BANKS) if rng.random() < 0.2 else "global",
                    text=text,
                    normalized=text.lower(),
                    kind=rng.choice(KINDS),
                    source_ids=tuple(f"u{n}-{k}" for k in range(rng.randint(1, 3))),
                    profiles=(profile,),
                    promoted_at=T0 + timedelta(minutes=rng.choice([run, run, n])),
                    last_seen_at=T0,
                    supersedes=rng.choice(older) if older and rng.random() < 0.3 else None,
                    run_id=f"run-{run}",
                )
            )
        reinforced = [
            Reinforcement(c.document_id, (f"again-{run}-{k}",) * rng.randint(1, 2), rng.choice(PROFILES))
            for k, c in enumerate(written)
            if rng.random() < 0.15
        ]
        _commit(state, run, promoted, reinforced)
        written += promoted
    # A card that supersedes itself, and two that supersede each other.
    if len(written) > 3:
        a, b, c = written[0], written[1], written[2]
        _commit(
            state,
            runs,
            [
                replace(a, document_id="self", supersedes="self", text="Self."),
                replace(b, document_id="cycle-1", supersedes="cycle-2", text="Cycle one."),
                replace(c, document_id="cycle-2", supersedes="cycle-1", text="Cycle two."),
            ],
            [],
        )
    return written


BOUNDS: list[dict[str, Any]] = [
    {},
    {"max_entries": 3},
    {"budget_chars": 120},
    {"budget_chars": 400, "max_entry_chars": 40},
]


@pytest.mark.parametrize("seed", range(6))
def test_cards_from_the_rank_rows_equal_cards_built_in_memory(tmp_path: Path, seed: int) -> None:
    """Every profile's card and each bank's card, both conflict policies, four sets of bounds."""
    rng = random.Random(seed)
    compared = 0
    with StateStore.open(tmp_path / "state.sqlite3") as state:
        _grow(state, rng, runs=rng.randint(5, 25))
        policies: tuple[ConflictPolicy, ...] = ("recency_wins", "keep_both")
        for bank in BANKS:
            for bounds in BOUNDS:
                for name in PROFILES:
                    for policy in policies:
                        expected = build_peer_card(
                            state.profile_cards(bank, name), profile=name, policy=policy, **bounds
                        )
                        got = peer_card(
                            _LedgerRanks(state, bank, name), profile=name, policy=policy, **bounds
                        )
                        assert got == expected, (bank, name, policy, bounds)
                        compared += expected is not None
                expected = build_peer_card(state.ledger(bank), profile=None, policy="recency_wins", **bounds)
                got = peer_card(
                    _LedgerRanks(state, bank, GLOBAL_SCOPE), profile=None, policy="recency_wins", **bounds
                )
                assert got == expected, (bank, bounds)
    assert compared > 20


def _ranks(path: Path) -> list[tuple[Any, ...]]:
    with sqlite3.connect(path) as raw:
        return raw.execute("SELECT * FROM ledger_rank ORDER BY 1, 2, 3, 4, 5, 6, 7").fetchall()


def test_the_upgrade_from_schema_4_writes_the_rows_the_commits_wrote(tmp_path: Path) -> None:
    """A schema-4 file (no rank rows) is given, when opened, exactly the rows that the commits of
    the same history wrote, in one transaction, keeping every other row."""
    path = tmp_path / "state.sqlite3"
    with StateStore.open(path) as state:
        _grow(state, random.Random(3), runs=20)
    written = _ranks(path)
    assert len(written) > 50
    with sqlite3.connect(path) as raw:
        before = raw.execute("SELECT count(*) FROM ledger").fetchone()[0]
        raw.execute("DROP TABLE ledger_rank")
        raw.execute("PRAGMA user_version = 4")
    with StateStore.open(path):
        pass
    assert _ranks(path) == written
    with sqlite3.connect(path) as raw:
        assert raw.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 9
        assert raw.execute("SELECT count(*) FROM ledger").fetchone()[0] == before


def test_a_card_reads_its_first_chunk_only(tmp_path: Path) -> None:
    """A profile of 2,000 cards: its card, with the default bounds, reads the rank rows of one
    chunk (plus the lookahead) and no other ledger row (SQLite steps at 500 and at 2,000 cards)."""
    steps = []
    for size in (500, 2000):
        path = tmp_path / f"state-{size}.sqlite3"
        with StateStore.open(path) as state:
            cards = [
                LedgerCard(
                    document_id=f"doc-{i}",
                    profile="research",
                    upstream_bank="global",
                    text=f"Fact number {i} about the research profile and its many papers.",
                    normalized=f"fact {i}",
                    promoted_at=T0 + timedelta(seconds=i),
                    last_seen_at=T0,
                    run_id="seed",
                )
                for i in range(size)
            ]
            _commit(state, 0, cards, [])
            count = 0

            def step() -> int:
                nonlocal count
                count += 1
                return 0

            ranks = _LedgerRanks(state, "global", "research")
            state._conn.set_progress_handler(step, 1000)
            try:
                card = peer_card(ranks, profile="research", policy="keep_both")
            finally:
                state._conn.set_progress_handler(None, 1000)
            assert card is not None and card.left_out == size - len(card.entries)
            steps.append(count)
    # The count of the scope's rows grows with it (an index range); nothing else does.
    assert steps[1] < 2 * steps[0], steps


@pytest.mark.parametrize(
    "damage", ["promoted_at = 'not a time'", "source_ids = '[never closed'", "source_ids = '[[1], 2]'"]
)
def test_a_damaged_card_does_not_stop_the_upgrade(tmp_path: Path, damage: str) -> None:
    """A card whose time or source list does not parse is ranked as the oldest card without sources,
    so the upgrade completes and keeps every row; reading that card is what reports the damage."""
    path = tmp_path / "state.sqlite3"
    with StateStore.open(path) as state:
        _grow(state, random.Random(5), runs=6)
    with sqlite3.connect(path) as raw:
        raw.execute(f"UPDATE ledger SET {damage} WHERE document_id = 'doc-1'")
        raw.execute("DROP TABLE ledger_rank")
        raw.execute("PRAGMA user_version = 4")
        before = raw.execute("SELECT count(*) FROM ledger").fetchone()[0]
    with StateStore.open(path):
        pass
    with sqlite3.connect(path) as raw:
        assert raw.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert raw.execute("SELECT count(*) FROM ledger").fetchone()[0] == before
        ranked = {r[0] for r in raw.execute("SELECT DISTINCT document_id FROM ledger_rank")}
        everyone = {r[0] for r in raw.execute("SELECT document_id FROM ledger")}
    assert ranked == everyone


def test_needs_upgrade_reads_the_version_without_touching_the_file(tmp_path: Path) -> None:
    """What the daemon asks before READY: True only for a state file of an older schema, in a
    directory whose name holds URI characters too; a missing file is not created, garbage is no."""
    folder = tmp_path / "odd?#name %20"
    folder.mkdir()
    path = folder / "state.sqlite3"
    assert needs_upgrade(path) is False and not path.exists()
    StateStore.open(path).close()
    assert needs_upgrade(path) is False
    with sqlite3.connect(path) as raw:
        raw.execute("DROP TABLE ledger_rank")
        raw.execute("PRAGMA user_version = 4")
    assert needs_upgrade(path) is True
    (folder / "garbage").write_bytes(b"not a database " * 100)
    assert needs_upgrade(folder / "garbage") is False


def test_a_card_is_read_from_one_snapshot_while_another_process_commits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A card is read in chunks of 5; another process commits, between the first and the second
    chunk, a card that ranks sixth. It is not seen halfway: the card is that of the ledger as it
    was when the reading began (without the snapshot, the new card would be its sixth entry)."""
    path = tmp_path / "state.sqlite3"

    def card(i: int, reinforcements: int) -> LedgerCard:
        return LedgerCard(
            document_id=f"c{i}",
            profile="research",
            upstream_bank="global",
            text=f"Card {i} of the research profile.",
            normalized=f"card {i}",
            profiles=("research",),
            reinforcements=reinforcements,
            promoted_at=T0,
            last_seen_at=T0,
            run_id="seed",
        )

    with StateStore.open(path) as state:
        _commit(state, 0, [card(i, 100 - 2 * i) for i in range(40)], [])
        before = build_peer_card(state.ledger("global"), profile=None, policy="recency_wins", max_entries=30)
        real = state.ranked_chunk
        committed = []

        def chunk_then_commit(*args: Any) -> Any:
            out = real(*args)
            if not committed:
                with StateStore.open(path) as other:
                    _commit(other, 1, [card(99, 100 - 2 * 5 + 1)], [])
                committed.append(True)
            return out

        monkeypatch.setattr(state, "ranked_chunk", chunk_then_commit)
        monkeypatch.setattr(_LedgerRanks, "CHUNK", 5)
        read = peer_cards_of(state, tmp_path)
        monkeypatch.undo()
        after = build_peer_card(state.ledger("global"), profile=None, policy="recency_wins", max_entries=30)
    assert committed and before is not None and after is not None
    assert after.entries[5] == "Card 99 of the research profile. (seen 92×, 2026-11)"
    assert read == before != after


def peer_cards_of(state: StateStore, folder: Path) -> Any:
    """The global card as ``peer_cards`` reads it (one snapshot), bounded to 30 entries."""
    config_path = folder / "config.toml"
    config_path.write_text(
        f'state_dir = "{folder}"\n[banks.global]\nbank_id = "global"\n[banks.shared]\nbank_id = "shared"\n'
        '[banks.research]\nbank_id = "r"\naccess = "read_write"\n'
        '[profiles.research]\nbank = "research"\n[peer_card]\nmax_entries = 30\n',
        encoding="utf-8",
    )
    [(_, _, card)] = peer_cards(load_config(config_path), state, profiles=[])
    return card


def test_a_file_locked_by_an_upgrade_elsewhere_is_not_called_damaged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While another process holds the write lock (upgrading the file, say), opening it waits, then
    says the file is locked and to wait: never to move a healthy file aside; nothing is changed."""
    path = tmp_path / "state.sqlite3"
    StateStore.open(path).close()
    with sqlite3.connect(path) as raw:
        raw.execute("DROP TABLE ledger_rank")
        raw.execute("PRAGMA user_version = 4")
    monkeypatch.setattr(state_store, "LOCK_TIMEOUT_S", 0.3)
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(StateFileError) as caught:
            StateStore.open(path)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    message = str(caught.value)
    assert "locked by another process" in message and "wait" in message
    assert "move it aside" not in message and "restore" not in message
    assert needs_upgrade(path)  # untouched: the next open upgrades it
    with StateStore.open(path):
        pass
    assert not needs_upgrade(path)
