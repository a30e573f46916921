"""Copying a real SQLite state file into a real PostgreSQL schema (``dreamer.state.copy``): every
read of the store answers the same afterwards, a second copy adds nothing, a copy killed with
SIGKILL halfway finishes on the next run, the file is never changed, and a schema holding another
state is refused with nothing written.

The state is made through the store's own calls (commits with cards, words, vectors, decisions,
reinforcements and a supersession; a second profile; run records), as a daemon leaves it.
"""

from __future__ import annotations

import hashlib
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from dreamer.config.state import StateConfig
from dreamer.errors import StateFileError
from dreamer.state import (
    GLOBAL_SCOPE,
    SCHEMA_VERSION,
    Reinforcement,
    StateStore,
    StoredVector,
)
from dreamer.state.copy import TABLES, CopyReport, copy_state, open_source
from dreamer.state.pgstore import open_postgres
from tests.support.ledger import T0, sketched_row
from tests.support.state_seed import DIMENSION, MODEL, seed, watermark

pytestmark = pytest.mark.postgres

REPO = Path(__file__).resolve().parents[3]


def file_fingerprint(path: Path) -> tuple[str, int]:
    return hashlib.sha256(path.read_bytes()).hexdigest(), path.stat().st_mtime_ns


@pytest.fixture
def pg_config(postgres_url: str, postgres_schema: str) -> StateConfig:
    return StateConfig(backend="postgres", dsn=postgres_url, schema=postgres_schema)


@pytest.fixture
def pg(pg_config: StateConfig) -> Iterator[StateStore]:
    st = open_postgres(pg_config)
    try:
        yield st
    finally:
        st.close()


def copy(path: Path, target: StateStore, *, batch_rows: int = 5_000) -> CopyReport:
    with open_source(path) as source:
        return copy_state(source, target, source_path=path, batch_rows=batch_rows)


def reads(st: StateStore) -> dict[str, Any]:
    """What the pipeline, the peer cards and status read of a state."""
    chunks, after = [], None
    while True:
        chunk, after = st.ranked_chunk("global", GLOBAL_SCOPE, after, 7)
        chunks.append([c.document_id for c in chunk])
        if after is None:
            break
    words = sorted({w for c in st.ledger() for w in c.normalized.split()})
    return {
        "ledger": st.ledger(),
        "watermarks": [st.watermark(p) for p in ("p", "q", "nobody")],
        "runs": st.runs(limit=1000),
        "vectors": st.vectors_since("global", MODEL, DIMENSION, 0),
        "last_seq": st.last_vector_seq(),
        "ranked": chunks,
        "ranked_q": st.ranked_chunk("global", "q", None, 1000)[0],
        "ranked_count": st.ranked_count("global", GLOBAL_SCOPE, superseded=False),
        "word_counts": st.word_counts(words),
        "index_version": st.index_version(),
        "decisions": [st.card_decisions(c.document_id) for c in st.ledger()],
        "totals": st.run_totals(),
    }


def test_a_copy_reads_back_as_the_file(tmp_path: Path, pg: StateStore) -> None:
    path = tmp_path / "state.sqlite3"
    seed(path, 60)
    report = copy(path, pg, batch_rows=25)
    assert report.ok, report.checks
    with StateStore.open(path) as st:
        want = reads(st)
    assert reads(pg) == want
    assert len(want["ledger"]) == 60 and len(want["vectors"]) == 60 and want["word_counts"]
    names = [*(t.name for t in TABLES), "ledger checksum", "watermarks checksum"]
    assert [c.name for c in report.checks] == names
    assert all(c.new == c.sqlite for c in report.checks[:-2])


def test_the_file_is_never_written(tmp_path: Path, pg: StateStore) -> None:
    """Its bytes and its mtime, and no upgrade, journal or checkpoint of it."""
    path = tmp_path / "state.sqlite3"
    seed(path, 30)
    before = file_fingerprint(path)
    copy(path, pg, batch_rows=7)
    copy(path, pg, batch_rows=7)
    assert file_fingerprint(path) == before


def test_copying_again_adds_nothing_and_new_writes_continue_the_seq(tmp_path: Path, pg: StateStore) -> None:
    path = tmp_path / "state.sqlite3"
    seed(path, 40)
    first = copy(path, pg, batch_rows=9)
    snapshot = reads(pg)
    second = copy(path, pg, batch_rows=9)
    assert second.ok and all(c.new in (0, None) for c in second.checks)
    assert reads(pg) == snapshot
    assert [c.postgres for c in second.checks] == [c.postgres for c in first.checks]
    # The PostgreSQL state writes on past the copied seqs, and reads on from the copied watermark.
    last = pg.last_vector_seq()
    some = snapshot["ledger"][0].document_id
    pg.store_vectors({some: StoredVector(MODEL, DIMENSION, b"\x00" * 8)})
    [fresh] = pg.vectors_since("global", MODEL, DIMENSION, last)
    assert fresh.seq == last + 1 and fresh.document_id == some
    assert pg.watermark("p") == snapshot["watermarks"][0]


def test_an_older_schema_is_upgraded_in_a_temporary_copy(tmp_path: Path, pg: StateStore) -> None:
    path = tmp_path / "state.sqlite3"
    seed(path, 12)
    with sqlite3.connect(path) as conn:
        conn.execute("DROP TABLE leases")
        conn.execute("DROP TABLE hosts")
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION - 1}")
    before = file_fingerprint(path)
    said: list[str] = []
    with open_source(path, on_upgrade=said.append) as source:
        report = copy_state(source, pg, source_path=path)
    assert report.ok and said and "older state schema" in said[0]
    assert file_fingerprint(path) == before
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION - 1


def test_a_schema_holding_another_state_is_refused_and_nothing_is_written(
    tmp_path: Path, pg: StateStore
) -> None:
    mine, theirs = tmp_path / "mine.sqlite3", tmp_path / "theirs.sqlite3"
    seed(mine, 10)
    seed(theirs, 5, profiles=("other",), about="zephyr")  # cards, runs and decisions of their own
    copy(theirs, pg)
    counts = {t.name: pg._conn.execute(t.count()).fetchone()[0] for t in TABLES}
    refused = (
        r"holds 5 cards, 5 vectors, 5 decisions, 5 run records, 1 watermark that .*mine\.sqlite3 "
        r"does not have as they are .*nothing was written.*\[state\] schema"
    )
    with pytest.raises(StateFileError, match=refused):
        copy(mine, pg)
    assert {t.name: pg._conn.execute(t.count()).fetchone()[0] for t in TABLES} == counts


def test_an_earlier_copy_of_a_file_that_changed_since_is_refused(tmp_path: Path, pg: StateStore) -> None:
    """The file moved on after a copy (a daemon still ran on it: a card reinforced, a watermark
    moved): copying on top would leave the schema half the one, half the other, so nothing is."""
    path = tmp_path / "state.sqlite3"
    seed(path, 10)
    copy(path, pg)
    counts = {t.name: pg._conn.execute(t.count()).fetchone()[0] for t in TABLES}
    with StateStore.open(path) as st:
        card = st.ledger()[0]
        st.record_run_start("later", "rollup:p", T0 + timedelta(days=3))
        st.commit_rollup(
            profile="p", bank_id="bank-p", watermark=watermark(T0 + timedelta(days=3), 9),
            promoted=[], reinforced=[Reinforcement(card.document_id, ("u-later",), "p")], run_id="later",
            outcome="reinforced", detail="", counts={}, finished_at=T0 + timedelta(days=3),
        )
    with pytest.raises(StateFileError, match=r"holds 1 card, 1 watermark that .* does not have as they are"):
        copy(path, pg)
    assert {t.name: pg._conn.execute(t.count()).fetchone()[0] for t in TABLES} == counts


KILLED_COPY = textwrap.dedent(
    """
    import os, signal, sys
    from dreamer.state import pgconn

    # A fault at the transport: the process dies (SIGKILL, no cleanup) while its fourth batch's
    # INSERT is in an open transaction, before its COMMIT.
    real, calls = pgconn.PgConnection.execute, []

    def execute(self, sql, params=()):
        if sql.startswith("INSERT INTO") and self.in_transaction:
            calls.append(sql)
            if len(calls) == 4:
                real(self, sql, params)
                os.kill(os.getpid(), signal.SIGKILL)
        return real(self, sql, params)

    pgconn.PgConnection.execute = execute
    from dreamer.cli import main
    sys.exit(main(sys.argv[1:]))
    """
)


def test_a_copy_killed_halfway_finishes_on_the_next_run(
    tmp_path: Path, pg: StateStore, pg_config: StateConfig
) -> None:
    path = tmp_path / "state" / "state.sqlite3"
    path.parent.mkdir()
    seed(path, 40)
    config = tmp_path / "config.toml"
    config.write_text(
        f'state_dir = "{path.parent}"\n[embeddings]\nprovider = "none"\n'
        f'[state]\nbackend = "postgres"\ndsn = "{pg_config.dsn}"\nschema = "{pg_config.schema_name}"\n',
        encoding="utf-8",
    )
    killed = subprocess.run(
        [sys.executable, "-c", KILLED_COPY, "state", "copy", "--batch-rows", "10", "--config", str(config)],
        cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True, timeout=120,
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    # Three batches of ten cards went in whole; the fourth was rolled back with the connection.
    assert pg.ledger_size() == 30 and pg.watermark("p").created_at is None
    report = copy(path, pg, batch_rows=10)
    assert report.ok, report.checks
    with StateStore.open(path) as st:
        assert reads(pg) == reads(st)


def test_a_missing_or_foreign_file_is_one_error_naming_it(tmp_path: Path) -> None:
    with pytest.raises(StateFileError, match="no state file there"), open_source(tmp_path / "none.sqlite3"):
        pass
    garbage = tmp_path / "garbage.sqlite3"
    garbage.write_bytes(b"not a database at all" * 100)
    with pytest.raises(StateFileError, match=r"garbage\.sqlite3: not a readable state file"):
        open_source(garbage).__enter__()
    other = tmp_path / "other.sqlite3"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE photos (id INTEGER)")
    with pytest.raises(StateFileError, match="another program's"), open_source(other):
        pass
    newer = tmp_path / "newer.sqlite3"
    StateStore.open(newer).close()
    with sqlite3.connect(newer) as conn:
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    with pytest.raises(StateFileError, match="newer Dreamer"), open_source(newer):
        pass


def test_the_word_counting_trigger_is_on_after_the_copy(tmp_path: Path, pg: StateStore) -> None:
    """The copy turns it off only inside its own batches: a card committed on PostgreSQL afterwards
    has its words counted."""
    path = tmp_path / "state.sqlite3"
    seed(path, 20)
    copy(path, pg, batch_rows=6)
    [state] = pg._conn.execute("SELECT tgenabled FROM pg_trigger WHERE tgname = 'ledger_words_counted' "
                               "AND tgrelid = to_regclass('ledger_words')").fetchall()
    assert state == ("O",)
    before = pg.word_counts(["zanzibar"])
    card = replace(sketched_row("Zanzibar hosts the backup server.", 99), run_id="after")
    pg.record_run_start("after", "rollup:p", T0 + timedelta(days=9))
    pg.commit_rollup(profile="p", bank_id="bank-p", watermark=watermark(T0 + timedelta(days=9), 9),
                     promoted=[card], reinforced=[], run_id="after", outcome="promoted", detail="",
                     counts={}, finished_at=T0 + timedelta(days=9))
    assert before == {} and pg.word_counts(["zanzibar"]) == {"zanzibar": 1}


def test_without_owning_the_tables_the_trigger_counts_and_the_copy_still_matches(
    tmp_path: Path, pg: StateStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dreamer.state import copy as copying

    monkeypatch.setattr(copying, "_owns_word_index", lambda target: False)
    path = tmp_path / "state.sqlite3"
    seed(path, 20)
    assert copy(path, pg, batch_rows=6).ok
    with StateStore.open(path) as st:
        assert reads(pg)["word_counts"] == reads(st)["word_counts"] != {}
