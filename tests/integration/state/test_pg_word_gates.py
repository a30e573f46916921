"""The gate in the word index (PostgreSQL schema 3) under attack on a real PostgreSQL: a file copied
with damaged gates, copied again after its backfill, a schema upgraded by two hosts at once, an
upgrade killed halfway, and a card written by a host still running schema 2's code. In each the
judge reads every ledger card that passes the dedup gate (`tests/integration/test_word_gates.py`
has the truth it is checked against)."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import psycopg
import pytest

from dreamer.config.state import StateConfig
from dreamer.rollup.judging import backfill_gates
from dreamer.state import StateStore
from dreamer.state.copy import copy_state, open_source
from dreamer.state.pgschema import PG_SCHEMA_VERSION
from dreamer.state.pgstore import open_postgres
from tests.integration.test_word_gates import PROBES, assert_every_passing_card_found, found, texts
from tests.support.ledger import as_version_2, commit_run, sketched_row

pytestmark = pytest.mark.postgres
REPO = Path(__file__).resolve().parents[3]


def config(url: str, schema: str) -> StateConfig:
    return StateConfig(backend="postgres", dsn=url, schema=schema)


def copy(path: Path, target: StateStore, *, batch_rows: int = 5_000) -> None:
    with open_source(path) as source:
        report = copy_state(source, target, source_path=path, batch_rows=batch_rows)
    assert report.ok, report.checks


@pytest.mark.parametrize(
    ("value", "rows"),
    [("2.5", "all"), ("x'00'", "all"), ("'garbage'", "all"), ("0.5", "one")],
    ids=["fraction", "bytes", "text", "one-row-in-a-batch"],
)
def test_a_file_with_damaged_gates_copies_into_gates_postgresql_reads_as_none(
    tmp_path: Path, postgres_url: str, postgres_schema: str, value: str, rows: str
) -> None:
    """A word row's signature the file's store reads as none (a fraction, bytes, text: its card is
    read in full) is copied as none, never cast into a bigint of made-up bits (2.5 -> 2, bytes -> 0)
    that rules out the cards the gate lets through; nor does one such row among integers fail the
    copy. PostgreSQL then finds every card the file finds."""
    path = tmp_path / "state.sqlite3"
    with StateStore.open(path) as state:
        commit_run(state, [sketched_row(t, i) for i, t in enumerate(texts(60))])
        one = rows == "one"
        where = " WHERE word = (SELECT min(word) FROM ledger_words)" if one else ""
        state._conn.execute(f"UPDATE ledger_words SET signature = {value}{where}")
        where = " WHERE document_id = (SELECT min(document_id) FROM ledger_gate)" if one else ""
        state._conn.execute(f"UPDATE ledger_gate SET signature = {value}{where}")
        in_file = {t: found(state, t) for t in PROBES}
        assert_every_passing_card_found(state)
    with open_postgres(config(postgres_url, postgres_schema)) as pg:
        copy(path, pg)
        assert {t: found(pg, t) for t in PROBES} == in_file
        assert_every_passing_card_found(pg)


def test_a_copy_made_again_after_the_files_backfill_finds_every_passing_card(
    tmp_path: Path, postgres_url: str, postgres_schema: str
) -> None:
    """A file copied while its backfill had not begun (word rows without signatures), then
    backfilled and copied again: the target keeps its unsigned rows (ON CONFLICT DO NOTHING) and
    gains the gate rows, and its own backfill passes over those cards. An unsigned word row reads as
    no gate, so every passing card is still found, before and after."""
    path = tmp_path / "state.sqlite3"
    with StateStore.open(path) as state:
        commit_run(state, [sketched_row(t, i) for i, t in enumerate(texts(60))])
        state._conn.execute("DELETE FROM ledger_gate")
        state._conn.execute("UPDATE ledger_words SET signature = NULL")
        state._conn.execute("DELETE FROM meta WHERE key LIKE 'gate_backfill%'")
    with open_postgres(config(postgres_url, postgres_schema)) as pg:
        copy(path, pg, batch_rows=100)
        assert_every_passing_card_found(pg)
        with StateStore.open(path) as state:
            while not backfill_gates(state, 25):
                pass
        copy(path, pg, batch_rows=100)
        assert pg._conn.execute("SELECT count(signature) FROM ledger_words").fetchone()[0] == 0
        assert pg._conn.execute("SELECT count(*) FROM ledger_gate").fetchone()[0] == 60
        assert_every_passing_card_found(pg)
        while not backfill_gates(pg, 25):
            pass
        assert_every_passing_card_found(pg)


def test_two_hosts_upgrading_a_version_2_schema_at_once_upgrade_it_once(
    postgres_url: str, postgres_schema: str
) -> None:
    """Two hosts open a version 2 schema at the same moment: each waits for the schema's lock, one
    upgrades and the other finds it done; the word rows carry their gate rows' signatures, the
    ranges are the new indexes, and every passing card is found."""
    with open_postgres(config(postgres_url, postgres_schema)) as st:
        commit_run(st, [sketched_row(t, i) for i, t in enumerate(texts(200))])
        gates = set(st._conn.execute("SELECT document_id, signature FROM ledger_gate"))
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        as_version_2(conn, postgres_schema)
    start, errors, stores = threading.Barrier(2), [], []

    def host() -> None:
        try:
            start.wait()
            stores.append(open_postgres(config(postgres_url, postgres_schema)))
        except BaseException as exc:  # reported below
            errors.append(exc)

    hosts = [threading.Thread(target=host) for _ in range(2)]
    for h in hosts:
        h.start()
    for h in hosts:
        h.join(60)
    try:
        assert not errors and len(stores) == 2
        for st in stores:
            assert set(st._conn.execute("SELECT DISTINCT document_id, signature FROM ledger_words")) == gates
            assert_every_passing_card_found(st)
    finally:
        for st in stores:
            st.close()
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        version = conn.execute(f"SELECT value FROM \"{postgres_schema}\".meta WHERE key = 'schema_version'")
        assert version.fetchone() == (str(PG_SCHEMA_VERSION),)
        indexes = {
            r[0]
            for r in conn.execute(
                "SELECT indexname FROM pg_indexes WHERE tablename = 'ledger_words' AND schemaname = %s",
                (postgres_schema,),
            )
        }
    assert {"ledger_words_content_gate", "ledger_words_residual_gate"} <= indexes
    assert not {"ledger_words_by_content", "ledger_words_by_residual"} & indexes


KILLED_UPGRADE = textwrap.dedent(
    """
    import os, signal, sys
    import psycopg
    from dreamer.config.state import StateConfig
    from dreamer.state.pgstore import open_postgres

    # A fault at the transport: the process dies (SIGKILL, no cleanup) in the upgrade's open
    # transaction, once the column is added and the signatures copied, before the new indexes.
    real = psycopg.Connection.execute

    def execute(self, query, params=None, **kwargs):
        if isinstance(query, str) and query.startswith("DROP INDEX IF EXISTS ledger_words_by_content"):
            os.kill(os.getpid(), signal.SIGKILL)
        return real(self, query, params, **kwargs)

    psycopg.Connection.execute = execute
    open_postgres(StateConfig(backend="postgres", dsn=sys.argv[1], schema=sys.argv[2]))
    """
)


def test_an_upgrade_killed_halfway_leaves_version_2_and_runs_whole_on_the_next_open(
    postgres_url: str, postgres_schema: str
) -> None:
    """SIGKILL inside the upgrade's transaction: PostgreSQL rolls it back whole (no signature
    column, the old ranges, version 2, every row), and the next open upgrades it."""
    with open_postgres(config(postgres_url, postgres_schema)) as st:
        commit_run(st, [sketched_row(t, i) for i, t in enumerate(texts(60))])
    words = f'SELECT * FROM "{postgres_schema}".ledger_words ORDER BY 1, 2'
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        as_version_2(conn, postgres_schema)
        before = conn.execute(words).fetchall()
    killed = subprocess.run(
        [sys.executable, "-c", KILLED_UPGRADE, postgres_url, postgres_schema],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        version = conn.execute(f"SELECT value FROM \"{postgres_schema}\".meta WHERE key = 'schema_version'")
        assert version.fetchone() == ("2",)
        assert conn.execute(words).fetchall() == before
        columns = conn.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_schema = %s "
            "AND table_name = 'ledger_words'",
            (postgres_schema,),
        )
        assert "signature" not in {r[0] for r in columns}
    with open_postgres(config(postgres_url, postgres_schema)) as st:
        unsigned = st._conn.execute("SELECT count(*) FROM ledger_words WHERE signature IS NULL")
        assert unsigned.fetchone()[0] == 0
        assert_every_passing_card_found(st)


def test_a_card_a_schema_2_host_writes_after_the_upgrade_is_found(
    postgres_url: str, postgres_schema: str
) -> None:
    """A host still running schema 2's code (connected before another upgraded the schema) writes a
    card's word rows without the signature and its gate row with it: the card reads as without a
    gate, so it is read in full, and the backfill, which passes over a card with a gate row, never
    gives it a wrong one."""
    with open_postgres(config(postgres_url, postgres_schema)) as st:
        commit_run(st, [sketched_row(t, i) for i, t in enumerate(texts(60))])
        late = [sketched_row(t, 60 + i) for i, t in enumerate(texts(20, 60))]
        commit_run(st, late, run_id="late")
        for card in late:  # as schema 2's `_index_card` leaves them
            unsign = "UPDATE ledger_words SET signature = NULL WHERE document_id = ?"
            st._conn.execute(unsign, (card.document_id,))
        assert_every_passing_card_found(st)
        while not backfill_gates(st, 25):
            pass
        assert_every_passing_card_found(st)
        unsigned = st._conn.execute("SELECT DISTINCT document_id FROM ledger_words WHERE signature IS NULL")
        assert {r[0] for r in unsigned} == {c.document_id for c in late}


def test_the_copy_reads_the_files_gates_as_the_store_does(tmp_path: Path) -> None:
    """What the copy reads a word row's signature and a gate row's values as, straight from a file:
    an integer as it is, anything else as none (a word row) or -1 (a gate row), which PostgreSQL's
    store reads as damaged."""
    from dreamer.state.copy import TABLES

    path = tmp_path / "state.sqlite3"
    with StateStore.open(path) as state:
        commit_run(state, [sketched_row(t, i) for i, t in enumerate(texts(4))])
        state._conn.execute("UPDATE ledger_words SET content_n = 2.5 WHERE word = 'alpha0x'")
        state._conn.execute("UPDATE ledger_gate SET residual_n = 'x'")
    tables = {t.name: t for t in TABLES}
    with sqlite3.connect(path) as conn:
        words = conn.execute(tables["ledger_words"].select()).fetchall()
        gates = conn.execute(tables["ledger_gate"].select()).fetchall()
    assert [r[4] for r in words if r[0] == "alpha0x"] == [None]
    assert all(type(r[4]) is int for r in words if r[0] != "alpha0x")
    assert {r[2] for r in gates} == {-1} and all(type(r[3]) is int and r[3] >= 0 for r in gates)
