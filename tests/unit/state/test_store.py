"""The one-transaction commit of a roll-up, and the ledger's sketches."""

from __future__ import annotations

import dataclasses
import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import pytest

from dreamer.errors import StateFileError
from dreamer.state import LedgerCard, Reinforcement, StateStore, Watermark

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def commit_promoted(st: StateStore, card: LedgerCard) -> Watermark:
    """Run r1 of profile p promotes ``card``; returns the watermark it committed."""
    st.record_run_start("r1", "rollup:p", T0)
    watermark = Watermark(T0, {"u1": T0}, 1, T0)
    st.commit_rollup(
        profile="p",
        bank_id="b",
        watermark=watermark,
        promoted=[card],
        reinforced=[],
        run_id="r1",
        outcome="promoted",
        detail="",
        counts={"promoted": 1},
        finished_at=T0,
    )
    return watermark


class TestStateStore:
    def test_commit_is_atomic_and_reinforcement_merges_provenance(self, tmp_path: Path) -> None:
        """Watermark, ledger rows and run record land together; reinforcing merges sources."""
        with StateStore.open(tmp_path / "s.sqlite3") as st:
            card = LedgerCard("d1", "p", "global", "Text", "text", source_ids=("u1",), profiles=("p",))
            wm = commit_promoted(st, card)
            st.record_run_start("r2", "rollup:q", T0)
            st.commit_rollup(
                profile="q",
                bank_id="b2",
                watermark=wm,
                promoted=[],
                run_id="r2",
                reinforced=[Reinforcement("d1", ("u9", "u1"), "q")],
                outcome="reinforced",
                detail="",
                counts={},
                finished_at=T0,
            )
            [row] = st.ledger("global")
            assert row.reinforcements == 1 and row.source_ids == ("u1", "u9") and row.profiles == ("p", "q")
            assert st.watermark("p").boundary_ids == {"u1"}
            assert [r.outcome for r in st.runs()] == ["reinforced", "promoted"]

    def test_failed_commit_leaves_nothing(self, tmp_path: Path) -> None:
        """If the transaction fails midway, the watermark does not move and the error names the file."""
        with StateStore.open(tmp_path / "s.sqlite3") as st:
            bad = LedgerCard("d1", "p", "global", "T", "t")
            wm = Watermark(T0, {"u1": T0}, 1, T0)
            st._conn.execute(
                "CREATE TRIGGER boom BEFORE INSERT ON ledger BEGIN SELECT RAISE(ABORT, 'x'); END"
            )
            with pytest.raises(StateFileError, match=r"s\.sqlite3: the state file failed: x"):
                st.commit_rollup(
                    profile="p",
                    bank_id="b",
                    watermark=wm,
                    promoted=[bad],
                    reinforced=[],
                    run_id="r",
                    outcome="promoted",
                    detail="",
                    counts={},
                    finished_at=T0,
                )
            assert st.watermark("p") == Watermark()


#: The ledger table as state files written before dedup sketches have it.
LEDGER_WITHOUT_SKETCH = """
CREATE TABLE ledger (
    document_id TEXT PRIMARY KEY, profile TEXT NOT NULL, upstream_bank TEXT NOT NULL,
    text TEXT NOT NULL, normalized TEXT NOT NULL, kind TEXT NOT NULL DEFAULT 'fact',
    source_ids TEXT NOT NULL DEFAULT '[]', profiles TEXT NOT NULL DEFAULT '[]',
    reinforcements INTEGER NOT NULL DEFAULT 0, promoted_at TEXT NOT NULL, last_seen_at TEXT NOT NULL,
    supersedes TEXT, run_id TEXT NOT NULL
);
INSERT INTO ledger (document_id, profile, upstream_bank, text, normalized, promoted_at, last_seen_at, run_id)
VALUES ('d1', 'p', 'global', 'Old card.', 'old card', '2026-01-01T00:00:00+00:00',
        '2026-01-01T00:00:00+00:00', 'r0');
"""


def old_state_file(tmp_path: Path) -> Path:
    path = tmp_path / "s.sqlite3"
    with sqlite3.connect(path) as conn:
        conn.executescript(LEDGER_WITHOUT_SKETCH)
    return path


class TestLedgerSketches:
    def test_old_state_file_gains_an_empty_sketch_column(self, tmp_path: Path) -> None:
        """A ledger written before sketches opens, keeps its rows, and reads with no sketch."""
        with StateStore.open(old_state_file(tmp_path)) as st:
            [row] = st.ledger("global")
        assert (row.document_id, row.text, row.sketch) == ("d1", "Old card.", None)

    def test_store_index_fills_only_the_sketch_and_the_index(self, tmp_path: Path) -> None:
        """Filling sketches changes that column alone; text and provenance stay as they were."""
        with StateStore.open(old_state_file(tmp_path)) as st:
            [before] = st.ledger("global")
            st.store_index({"d1": ("s1\told card\told card\told card", ["old", "card"], (2, 2))})
            assert st.unindexed("global") == []
            words = st._conn.execute("SELECT word, content_n FROM ledger_words ORDER BY word").fetchall()
            assert words == [("card", 2), ("old", 2)]
            [after] = st.ledger("global")
        assert after.sketch == "s1\told card\told card\told card"
        assert after == dataclasses.replace(before, sketch=after.sketch)

    def test_commit_keeps_the_sketch_of_a_promoted_card(self, tmp_path: Path) -> None:
        with StateStore.open(tmp_path / "s.sqlite3") as st:
            card = LedgerCard("d1", "p", "global", "Text", "text", sketch="s1\ttext\ttext\ttext")
            commit_promoted(st, card)
            [row] = st.ledger("global")
        assert row.sketch == card.sketch


def _big_commit(st: StateStore) -> None:
    """A roll-up commit of 1,500 cards of 3,000 characters: past SQLite's 1,000-page threshold."""
    cards = [
        LedgerCard(f"d{i}", "p", "global", f"card {i} " + "x" * 3000, f"card {i}", profiles=("p",))
        for i in range(1500)
    ]
    st.record_run_start("big", "rollup:p", T0)
    st.commit_rollup(
        profile="p",
        bank_id="b",
        watermark=Watermark(T0, {"u1": T0}, 1, T0),
        promoted=cards,
        reinforced=[],
        run_id="big",
        outcome="promoted",
        detail="",
        counts={"promoted": len(cards)},
        finished_at=T0,
    )


def _cards_in_file_alone(path: Path, copy: Path) -> int:
    """The ledger's cards in the state file itself, read from a copy taken without its log."""
    copy.write_bytes(path.read_bytes())
    with sqlite3.connect(copy) as conn:
        return int(conn.execute("SELECT COUNT(*) FROM ledger").fetchone()[0])


class TestCheckpoints:
    def test_a_deferring_store_leaves_the_pages_in_the_log_until_it_checkpoints(self, tmp_path: Path) -> None:
        """With `defer_checkpoints` a commit past the 1,000-page threshold writes only the log:
        the file itself holds none of its cards, while the file and its log (as a crash would
        leave them) hold them all; `checkpoint` then writes the pages back."""
        path = tmp_path / "s.sqlite3"
        with StateStore.open(path) as st:
            st.defer_checkpoints()
            _big_commit(st)
            assert _cards_in_file_alone(path, tmp_path / "alone.sqlite3") == 0
            crashed = tmp_path / "crashed"
            crashed.mkdir()
            for name in (path.name, path.name + "-wal"):
                (crashed / name).write_bytes((tmp_path / name).read_bytes())
            with sqlite3.connect(crashed / path.name) as conn:
                assert conn.execute("SELECT COUNT(*) FROM ledger").fetchone()[0] == 1500
            assert st.checkpoint() > 1000
            assert _cards_in_file_alone(path, tmp_path / "alone.sqlite3") == 1500

    def test_by_default_the_commit_past_the_threshold_checkpoints(self, tmp_path: Path) -> None:
        """Without it SQLite checkpoints in the commit itself (what a run paid for: at 100k cards
        0.16 s of its 0.19 s commit), as a command's own connection still does."""
        path = tmp_path / "s.sqlite3"
        with StateStore.open(path) as st:
            _big_commit(st)
            assert _cards_in_file_alone(path, tmp_path / "alone.sqlite3") > 0

    def test_it_leaves_the_stores_own_connection_free(self, tmp_path: Path) -> None:
        """It runs on a connection of its own, never the store's: SQLite serialises the calls on
        one connection, and the daemon's event loop records runs on the store's while the
        checkpoint runs in a worker thread, so there the loop would wait for the whole
        checkpoint. It writes the pages back while the store's connection is in a transaction."""

        class Untouchable:
            def __getattr__(self, name: str) -> object:
                raise AssertionError(f"the checkpoint used the store's connection ({name})")

        path = tmp_path / "s.sqlite3"
        with StateStore.open(path) as st:
            st.defer_checkpoints()
            _big_commit(st)
            with st.snapshot():
                own, st._conn = st._conn, Untouchable()
                try:
                    assert st.checkpoint() > 1000
                finally:
                    st._conn = own
            assert _cards_in_file_alone(path, tmp_path / "alone.sqlite3") == 1500

    def test_a_path_with_characters_a_uri_gives_meaning_to(self, tmp_path: Path) -> None:
        """The checkpoint opens the file by a URI (read-write, never created): a space, "#", "?"
        and "%" in its path name the same file."""
        path = tmp_path / "odd #1 ?x=%20 dir" / "s.sqlite3"
        with StateStore.open(path) as st:
            st.defer_checkpoints()
            _big_commit(st)
            assert st.checkpoint() > 1000
            assert _cards_in_file_alone(path, tmp_path / "alone.sqlite3") == 1500
        assert sorted(p.name for p in path.parent.iterdir() if p.suffix == ".sqlite3") == ["s.sqlite3"]

    @pytest.mark.parametrize("damage", ["removed", "garbage"])
    def test_a_failed_checkpoint_is_a_state_file_error_naming_the_file(
        self, tmp_path: Path, damage: str
    ) -> None:
        """The file removed, or garbage put in its place, while the store holds it open."""
        path = tmp_path / "s.sqlite3"
        with StateStore.open(path) as st:
            path.unlink()
            if damage == "garbage":
                path.write_bytes(b"not a database" * 512)
            with pytest.raises(StateFileError, match=r"s\.sqlite3: cannot checkpoint the state file"):
                st.checkpoint()
