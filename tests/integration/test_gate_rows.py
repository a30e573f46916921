"""The gate rows (schema 8): each indexed card's word-set sizes and word signature, written with
its words in the commit; the backfill that gives them, a batch at a time, to the cards of a file
indexed before they existed; and the judge, which reads a card the word index names only when its
gate row may pass, and finds exactly the cards it found without them."""

from __future__ import annotations

import io
import json
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from dreamer.commands.status import status_command
from dreamer.config import Config, load_config
from dreamer.errors import StateFileError
from dreamer.rollup import dedup
from dreamer.rollup.candidates import index_words, probe_words, scans, word_sizes
from dreamer.rollup.judging import backfill_gates, card_candidates, index_pending, judge_against_ledger
from dreamer.rollup.similarity import Sketch, profile_text, sketch_of
from dreamer.state import SCHEMA_VERSION, StateStore
from dreamer.state.signature import word_signature
from tests.support.cli import run_dreamer
from tests.support.configs import config_data, write_toml
from tests.support.ledger import as_schema_8, commit_run, sketched_row, without_gates

FRAME = "{who} keeps {a} with {b} on {c} at port {port} since {i}."
PEOPLE = ["Caroline", "Melanie", "John", "Gina", "Nate"]


def ledger_texts(n: int) -> list[str]:
    """Cards of one frame that share its words and differ in the rest: most share one or two
    words with a new card, a few nearly all."""
    return [
        FRAME.format(
            who=PEOPLE[i % 5],
            a=f"alpha{i % 37}x",
            b=f"beta{i % 11}x",
            c=f"gamma{i % 13}x",
            port=1000 + i % 7,
            i=i,
        )
        for i in range(n)
    ]


NEW = [
    FRAME.format(who="Gina", a="alpha3x", b="beta3x", c="gamma3x", port=1003, i=3),
    FRAME.format(who="Nate", a="alpha9x", b="beta9x", c="gamma9x", port=1002, i=9999),
    "Caroline keeps alpha1x.",
    "Something else entirely, about beta5x only.",
]


def gate_rows(state: StateStore) -> dict[str, tuple[int, int, int]]:
    rows = state._conn.execute("SELECT document_id, content_n, residual_n, signature FROM ledger_gate")
    return {r[0]: (r[1], r[2], r[3]) for r in rows}


def expected_rows(state: StateStore) -> dict[str, tuple[int, int, int]]:
    """Each indexed card's gate row as its stored sketch gives it."""
    out = {}
    for doc, stored in state._conn.execute("SELECT document_id, sketch FROM ledger WHERE indexed = 1"):
        sketch = Sketch.loads(stored)
        assert sketch is not None
        out[doc] = (*word_sizes(sketch), word_signature(index_words(sketch)))
    return out


def candidates(state: StateStore, text: str) -> list[tuple[str, str]]:
    sketch = sketch_of(profile_text(text))
    counts = state.word_counts(probe_words(sketch))
    found = card_candidates(state, "global", sketch, dedup.DedupThresholds(), counts)
    return [(c.card_id, c.text) for c in found]


def as_schema_7(path: Path) -> None:
    """The file as schema 7 left it: no gate rows, no backfill begun."""
    as_schema_8(path)
    with sqlite3.connect(path) as conn:
        conn.execute("DROP TABLE ledger_gate")
        conn.execute("DELETE FROM meta WHERE key LIKE 'gate_backfill%'")
        conn.execute("PRAGMA user_version = 7")


def test_status_says_how_many_cards_have_no_gate_row_until_the_backfill_is_done(tmp_path: Path) -> None:
    """`dreamer status` counts the cards still without a gate row after an upgrade (each is read
    in full until the backfill reaches it), batch by batch, and says nothing once none is left; a
    file whose cards were written with theirs has nothing to say before its first backfill pass."""
    config, path = status_config(tmp_path)
    with StateStore.open(config.state_path) as state:
        commit_run(state, [sketched_row(t, i) for i, t in enumerate(ledger_texts(45))])
    assert status_doc(config)["gate_rows_missing"] == 0, "written with their rows"
    as_schema_7(config.state_path)
    with StateStore.open(config.state_path):
        pass  # the upgrade
    assert status_doc(config)["gate_rows_missing"] == 45
    line = "gate rows: 45 ledger cards have none yet"
    assert line in run_dreamer(path, "status").stdout
    with StateStore.open(config.state_path) as state:
        backfill_gates(state, 10)
    assert status_doc(config)["gate_rows_missing"] == 35
    with StateStore.open(config.state_path) as state:
        while not backfill_gates(state, 10):
            pass
    assert status_doc(config)["gate_rows_missing"] == 0
    assert "gate rows:" not in run_dreamer(path, "status").stdout


def status_config(tmp_path: Path) -> tuple[Config, Path]:
    banks = {"global": {}, "shared": {}, "homelab": {"access": "read_write"}}
    data = config_data(banks, ("homelab",), state_dir=str(tmp_path))
    path = write_toml(tmp_path / "config.toml", data)
    return load_config(path), path


def status_doc(config: Config) -> dict[str, Any]:
    out = io.StringIO()
    anyio.run(lambda: status_command(config, as_json=True, out=out))
    doc: dict[str, Any] = json.loads(out.getvalue())
    return doc


def word_signatures(state: StateStore) -> set[tuple[str, int | None]]:
    return set(state._conn.execute("SELECT document_id, signature FROM ledger_words"))


def test_a_committed_card_has_its_gate_row(tmp_path: Path) -> None:
    with StateStore.open(tmp_path / "state.sqlite3") as state:
        commit_run(state, [sketched_row(t, i) for i, t in enumerate(ledger_texts(60))])
        assert len(gate_rows(state)) == 60
        assert gate_rows(state) == expected_rows(state)
        assert word_signatures(state) == {(doc, row[2]) for doc, row in gate_rows(state).items()}


def test_a_schema_8_file_gives_its_word_index_the_gate_and_the_probe_reads_it_alone(tmp_path: Path) -> None:
    """Schema 9: the upgrade copies each card's signature into its word rows and makes the ranges
    indexes that hold the gate; what the probe finds is the same, and it no longer reads the gate
    rows' table (emptied here, the probe finds the same rows)."""
    path = tmp_path / "state.sqlite3"
    with StateStore.open(path) as state:
        commit_run(state, [sketched_row(t, i) for i, t in enumerate(ledger_texts(120))])
        asked = [
            scans(
                sketch_of(profile_text(t)),
                dedup.DedupThresholds(),
                state.word_counts(probe_words(sketch_of(profile_text(t)))),
            )
            for t in NEW
        ]
        found = [state.scan_index(a or []) for a in asked]
        written = gate_rows(state)
    as_schema_8(path)
    with sqlite3.connect(path) as conn:
        assert {r[0] for r in conn.execute("SELECT signature FROM ledger_gate")} and "signature" not in {
            r[1] for r in conn.execute("PRAGMA table_info(ledger_words)")
        }
    with StateStore.open(path) as state:
        assert word_signatures(state) == {(doc, row[2]) for doc, row in written.items()}
        names = {r[0] for r in state._conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
        assert {"ledger_words_content_gate", "ledger_words_residual_gate"} <= names
        assert not {"ledger_words_by_content", "ledger_words_by_residual"} & names
        assert [state.scan_index(a or []) for a in asked] == found
        assert any(None not in f.values() and f for f in found)
        state._conn.execute("DELETE FROM ledger_gate")
        assert [state.scan_index(a or []) for a in asked] == found


def _older_file(
    path: Path, cards: int, downgrade: Callable[[Path], None]
) -> tuple[dict[str, Any], list[Any]]:
    """A state file of ``cards`` ledger cards taken back to an older schema by ``downgrade``: the
    gate rows it had, and its word rows as the older schema holds them."""
    with StateStore.open(path) as state:
        commit_run(state, [sketched_row(t, i) for i, t in enumerate(ledger_texts(cards))])
        written = gate_rows(state)
    downgrade(path)
    with sqlite3.connect(path) as conn:
        return written, conn.execute("SELECT * FROM ledger_words ORDER BY 1, 2").fetchall()


def test_a_schema_7_file_upgrades_keeping_every_row_and_is_backfilled_batch_by_batch(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite3"
    written, words_before = _older_file(path, 45, as_schema_7)
    with sqlite3.connect(path) as conn:
        ledger_before = conn.execute("SELECT * FROM ledger ORDER BY document_id").fetchall()
    with StateStore.open(path) as state:
        assert gate_rows(state) == {}
        found_before = {t: candidates(state, t) for t in NEW}  # read in full, as before gate rows
        sizes, done = [], False
        while not done:
            done = backfill_gates(state, 10)
            sizes.append(len(gate_rows(state)))
        assert sizes == [10, 20, 30, 40, 45]
        assert gate_rows(state) == written
        changes = state._conn.total_changes
        assert backfill_gates(state, 10) is True
        assert state._conn.total_changes == changes, "a finished backfill writes nothing more"
        assert {t: candidates(state, t) for t in NEW} == found_before
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert conn.execute("SELECT * FROM ledger ORDER BY document_id").fetchall() == ledger_before
        words = "SELECT word, document_id, content_n, residual_n FROM ledger_words ORDER BY 1, 2"
        assert conn.execute(words).fetchall() == words_before
        signed = conn.execute("SELECT document_id, signature FROM ledger_words").fetchall()
        assert {(doc, row[2]) for doc, row in written.items()} == set(signed), "backfilled into the words"


def test_a_card_whose_sketch_does_not_read_gets_no_gate_row_and_is_still_found(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite3"
    texts = ledger_texts(30)
    with StateStore.open(path) as state:
        commit_run(state, [sketched_row(t, i) for i, t in enumerate(texts)])
        found = candidates(state, NEW[0])
        assert found
    as_schema_7(path)
    with StateStore.open(path) as state:
        damaged = found[0][0]
        state._conn.execute("UPDATE ledger SET sketch = 'not a sketch' WHERE document_id = ?", (damaged,))
        while not backfill_gates(state, 7):
            pass
        assert damaged not in gate_rows(state) and len(gate_rows(state)) == 29
        assert damaged in {doc for doc, _ in candidates(state, NEW[0])}


def test_the_judge_reads_fewer_cards_and_finds_the_same_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With gate rows, the cards the word index names and the gate rows rule out are not read from
    the ledger; the candidates found are the very same as with no gate row at all."""
    read: list[int] = []
    real = StateStore.ledger_candidates

    def counting(self: StateStore, upstream_bank: str, **kwargs: object) -> object:
        ids = kwargs["ids"]
        read.append(len(ids))  # type: ignore[arg-type]
        return real(self, upstream_bank, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(StateStore, "ledger_candidates", counting)
    with StateStore.open(tmp_path / "state.sqlite3") as state:
        commit_run(state, [sketched_row(t, i) for i, t in enumerate(ledger_texts(400))])
        with_rows = {t: candidates(state, t) for t in NEW}
        read_with = sum(read)
        without_gates(state._conn)
        read.clear()
        assert {t: candidates(state, t) for t in NEW} == with_rows
        read_without = sum(read)
    assert any(with_rows.values())
    assert read_with * 3 < read_without, (read_with, read_without)


def test_a_new_index_version_writes_the_gate_rows_again(tmp_path: Path) -> None:
    with StateStore.open(tmp_path / "state.sqlite3") as state:
        state.use_index_version(Sketch.VERSION)
        commit_run(state, [sketched_row(t, i) for i, t in enumerate(ledger_texts(25))])
        written = gate_rows(state)
        state.use_index_version("an older analysis")
        assert gate_rows(state) == {}
        index_pending(state, "global")
        assert gate_rows(state) == written


def test_a_dry_run_writes_no_gate_row(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite3"
    with StateStore.open(path) as state:
        state.use_index_version(Sketch.VERSION)
        commit_run(state, [sketched_row(t, i) for i, t in enumerate(ledger_texts(25))])
    as_schema_7(path)
    with StateStore.open(path) as state:
        batch = [dedup.CardText("new-0", NEW[0])]
        judge_against_ledger(state, "global", batch, [[]], None, dry_run=True)
        assert gate_rows(state) == {}
        judge_against_ledger(state, "global", batch, [[]], None, dry_run=False)
        assert len(gate_rows(state)) == 25


@pytest.mark.parametrize(
    "damage", ["signature = 'garbage'", "signature = -1", "signature = 2.5", "signature = x'00'"]
)
def test_a_damaged_gate_row_is_left_out_and_its_card_still_found(tmp_path: Path, damage: str) -> None:
    """A gate in the word index that is not what one is written with (text, a negative
    signature, a fraction, bytes) is ignored: the card is read in full, the run does not fail.
    (A damaged size is the word index's own: the ranges are read by it.)"""
    with StateStore.open(tmp_path / "state.sqlite3") as state:
        commit_run(state, [sketched_row(t, i) for i, t in enumerate(ledger_texts(40))])
        found = candidates(state, NEW[0])
        assert found
        state._conn.execute(f"UPDATE ledger_words SET {damage}")
        asked = scans(sketch_of(profile_text(NEW[0])), dedup.DedupThresholds(), {})
        assert asked is not None
        assert set(state.scan_index(asked).values()) == {None}
        assert candidates(state, NEW[0]) == found


def test_a_new_file_has_no_backfill_and_an_upgraded_one_writes_only_the_rows_it_lacks(tmp_path: Path) -> None:
    """Every card of a new file gets its gate row in its commit, so its backfill is done from the
    start; a file whose backfill had not finished (upgraded from schema 7, then written by schema
    8) writes the rows of the cards that lack one, and passes over the others."""
    with StateStore.open(tmp_path / "state.sqlite3") as state:
        commit_run(state, [sketched_row(t, i) for i, t in enumerate(ledger_texts(45))])
        changes = state._conn.total_changes
        assert backfill_gates(state, 10) is True
        assert state._conn.total_changes == changes, "nothing to walk"
        written = gate_rows(state)
        state._conn.execute("DELETE FROM meta WHERE key LIKE 'gate_backfill%'")
        lacking = sorted(written)[::3]
        for doc in lacking:
            state._conn.execute("DELETE FROM ledger_gate WHERE document_id = ?", (doc,))
            state._conn.execute("UPDATE ledger_words SET signature = NULL WHERE document_id = ?", (doc,))
        words = state._conn.execute("SELECT count(*) FROM ledger_words WHERE signature IS NULL").fetchone()[0]
        changes, batches = state._conn.total_changes, 0
        done = False
        while not done:
            done = backfill_gates(state, 10)
            batches += 1
        assert gate_rows(state) == written
        assert word_signatures(state) == {(doc, row[2]) for doc, row in written.items()}
        # Each batch moves its cursor (one row of meta); only the lacking cards' rows are written.
        assert state._conn.total_changes - changes == batches + len(lacking) + words


def test_a_schema_8_upgrade_without_room_for_its_log_fails_whole_and_runs_once_there_is(
    tmp_path: Path,
) -> None:
    """The upgrade to schema 9 rewrites the word rows in one transaction: on a disk without room
    for its log it fails with an error that says the disk is full, and the file is left as it was
    (schema 8, every row); with room it upgrades as if nothing had happened."""
    from tests.support.smallfs import fill, small_fs

    with small_fs(tmp_path / "fs", size_kib=8 * 1024) as fs:
        path = fs / "state.sqlite3"
        written, words_before = _older_file(path, 400, as_schema_8)
        fill(fs, leave_bytes=64 * 1024)
        with pytest.raises(StateFileError, match=r"full|space") as refused:
            StateStore.open(path)
        assert str(path) in str(refused.value)
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
            assert conn.execute("PRAGMA user_version").fetchone()[0] == 8
            assert conn.execute("SELECT * FROM ledger_words ORDER BY 1, 2").fetchall() == words_before
        (fs / "filler").unlink()
        with StateStore.open(path) as state:
            assert word_signatures(state) == {(doc, row[2]) for doc, row in written.items()}


def test_a_command_says_it_upgrades_the_state_file_before_it_does(tmp_path: Path) -> None:
    """An upgrade of a large ledger takes minutes (about 2.6 per million cards to schema 9): a
    command opening a file of an older schema says so first, naming it and both schemas, and says
    nothing of it once the file is upgraded."""
    config, path = status_config(tmp_path)
    with StateStore.open(config.state_path) as state:
        commit_run(state, [sketched_row(t, i) for i, t in enumerate(ledger_texts(20))])
    as_schema_8(config.state_path)
    first = run_dreamer(path, "status", "--log-format", "json")
    assert first.returncode == 0, first.stderr
    said = [json.loads(line) for line in first.stderr.splitlines() if line.startswith("{")]
    upgrading = [r for r in said if r["event"].startswith("upgrading the state file")]
    assert len(upgrading) == 1 and upgrading[0]["path"] == str(config.state_path), first.stderr
    assert (upgrading[0]["schema"], upgrading[0]["to"]) == (8, SCHEMA_VERSION)
    again = run_dreamer(path, "status", "--log-format", "json")
    assert again.returncode == 0 and "upgrading" not in again.stderr, again.stderr
