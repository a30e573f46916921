"""A state file of the previous schema (1: no word index) upgrades in one transaction, keeps every
row, and is indexed by the next roll-up."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from dreamer.errors import StateFileError
from dreamer.state import APPLICATION_ID, SCHEMA_VERSION, StateStore, schema

# Schema 1 as it was written: the tables without the word index.
SCHEMA_1 = """
CREATE TABLE runs (run_id TEXT PRIMARY KEY, job_id TEXT NOT NULL, started_at TEXT NOT NULL,
    finished_at TEXT, outcome TEXT, detail TEXT NOT NULL DEFAULT '', counts TEXT NOT NULL DEFAULT '{}');
CREATE INDEX runs_by_job ON runs (job_id, started_at);
CREATE TABLE watermarks (profile TEXT PRIMARY KEY, bank_id TEXT NOT NULL, created_at TEXT,
    boundary_ids TEXT NOT NULL DEFAULT '[]', unit_count INTEGER NOT NULL DEFAULT 0, last_write_at TEXT,
    rolled_at TEXT);
CREATE TABLE ledger (document_id TEXT PRIMARY KEY, profile TEXT NOT NULL, upstream_bank TEXT NOT NULL,
    text TEXT NOT NULL, normalized TEXT NOT NULL, kind TEXT NOT NULL DEFAULT 'fact',
    source_ids TEXT NOT NULL DEFAULT '[]', profiles TEXT NOT NULL DEFAULT '[]',
    reinforcements INTEGER NOT NULL DEFAULT 0, promoted_at TEXT NOT NULL, last_seen_at TEXT NOT NULL,
    supersedes TEXT, run_id TEXT NOT NULL, sketch TEXT);
CREATE INDEX ledger_by_bank ON ledger (upstream_bank, promoted_at);
"""


def schema_1_file(path: Path, cards: int) -> None:
    with sqlite3.connect(path) as conn:
        conn.executescript(SCHEMA_1)
        conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        conn.execute("PRAGMA user_version = 1")
        conn.execute(
            "INSERT INTO runs VALUES ('r1', 'rollup:p', '2026-01-01T00:00:00+00:00', NULL, NULL, '', '{}')"
        )
        conn.execute(
            "INSERT INTO watermarks VALUES ('p', 'b', '2026-01-01T00:00:00+00:00', '[\"u1\"]', 3, NULL, NULL)"
        )
        conn.executemany(
            "INSERT INTO ledger (document_id, profile, upstream_bank, text, normalized, source_ids, "
            "reinforcements, promoted_at, last_seen_at, run_id, sketch) VALUES (?, 'p', 'g', ?, ?, ?, ?, "
            "'2026-01-01T00:00:00+00:00', '2026-01-01T00:00:00+00:00', 'r1', NULL)",
            [
                (f"d{i}", f"Card number {i} about host atlas.", f"card number {i} about host atlas",
                 json.dumps([f"u{i}"]), i % 3)
                for i in range(cards)
            ],
        )


def test_upgrade_keeps_every_row_and_marks_cards_for_indexing(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite3"
    schema_1_file(path, 250)
    with sqlite3.connect(path) as conn:
        before = conn.execute("SELECT * FROM ledger ORDER BY document_id").fetchall()
    with StateStore.open(path) as store:
        assert len(store.unindexed("g")) == 250
        assert store.runs("rollup:p")[0].run_id == "r1"
        assert store.watermark("p").unit_count == 3
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        after = conn.execute(
            "SELECT document_id, profile, upstream_bank, text, normalized, kind, source_ids, profiles, "
            "reinforcements, promoted_at, last_seen_at, supersedes, run_id, sketch FROM ledger "
            "ORDER BY document_id"
        ).fetchall()
    assert after == before


def test_a_failed_upgrade_leaves_the_file_as_it_was(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One transaction: an upgrade that fails after adding a column changes nothing. (The failure is
    injected into the upgrade's second DDL step; a real disk cannot be made to fail just there.)"""
    path = tmp_path / "state.sqlite3"
    schema_1_file(path, 5)
    real = schema._run_script

    def failing(conn: sqlite3.Connection, script: str) -> None:
        if script is schema._INDEXES:
            raise sqlite3.OperationalError("disk I/O error")
        real(conn, script)

    monkeypatch.setattr(schema, "_run_script", failing)
    with pytest.raises(StateFileError, match="disk I/O error"):
        StateStore.open(path)
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == 1
        assert "indexed" not in {row[1] for row in conn.execute("PRAGMA table_info(ledger)")}
        assert conn.execute("SELECT count(*) FROM ledger").fetchone()[0] == 5


def indexed_words(store: StateStore) -> list[tuple[str, str]]:
    return list(store._conn.execute("SELECT word, document_id FROM ledger_words ORDER BY word"))


def test_a_new_index_version_reindexes_every_card(tmp_path: Path) -> None:
    with StateStore.open(tmp_path / "state.sqlite3") as store:
        schema_cards = [("d1", "s1\tatlas\tatlas\tatlas", ["atlas"])]
        store._conn.execute(
            "INSERT INTO ledger (document_id, profile, upstream_bank, text, normalized, promoted_at, "
            "last_seen_at, run_id) VALUES ('d1', 'p', 'g', 'Atlas.', 'atlas', '2026-01-01T00:00:00+00:00', "
            "'2026-01-01T00:00:00+00:00', 'r')"
        )
        store.use_index_version("s1")
        store.store_index({d: (s, w, (1, 1)) for d, s, w in schema_cards})
        assert store.unindexed("g") == [] and indexed_words(store) == [("atlas", "d1")]
        store.use_index_version("s1")
        assert store.unindexed("g") == []
        store.use_index_version("s2")
        assert [c.document_id for c in store.unindexed("g")] == ["d1"]
        assert indexed_words(store) == []


# Upgrades the schema-1 file argv[1] and dies (SIGKILL, no cleanup) once the upgrade has rewritten
# the ledger and built the word index, before it commits: a crash in the middle of its one
# transaction, after SQLite had to spill changed pages to the file (so the journal is hot).
KILLED_MID_UPGRADE = r"""
import os, signal, sys
from pathlib import Path
from dreamer.state import StateStore, schema
real = schema._run_script
def dying(conn, script):
    real(conn, script)
    if script is schema.RANKS:
        os.kill(os.getpid(), signal.SIGKILL)
schema._run_script = dying
StateStore.open(Path(sys.argv[1]))
"""


def test_a_crash_mid_upgrade_still_asks_for_start_time(tmp_path: Path) -> None:
    """kill -9 during the upgrade leaves a hot journal: needs_upgrade still says yes (the daemon
    extends systemd's start timeout for the rollback and the upgrade), and the next open rolls
    back, upgrades and keeps every row."""
    path = tmp_path / "state.sqlite3"
    schema_1_file(path, 30_000)
    proc = subprocess.run(
        [sys.executable, "-c", KILLED_MID_UPGRADE, str(path)],
        cwd=Path(__file__).resolve().parents[3],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert Path(f"{path}-journal").stat().st_size > 0
    assert schema.needs_upgrade(path) is True
    with StateStore.open(path) as store:
        assert len(store.unindexed("g")) == 30_000
    assert schema.needs_upgrade(path) is False
