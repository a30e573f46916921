"""Opening a state store on a real PostgreSQL (scripts/postgres-dev): a new schema gets its tables, a
schema that is another program's or a newer Dreamer's is refused by name, an unreachable database
is one clear line, and two stores on one schema commit one at a time as two processes on one SQLite
file do."""

from __future__ import annotations

import socket
import threading
from datetime import UTC, datetime

import psycopg
import pytest
from pydantic import SecretStr

from dreamer.config.state import StateConfig
from dreamer.errors import RunBusyError, StateFileError
from dreamer.state import StateStore, Watermark
from dreamer.state.pgschema import PG_SCHEMA_VERSION
from dreamer.state.pgstore import open_postgres
from tests.support.ledger import as_version_2

pytestmark = pytest.mark.postgres
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def config(url: str, schema: str) -> StateConfig:
    return StateConfig(backend="postgres", dsn=url, schema=schema)


def test_a_new_schema_gets_its_tables_and_opens_again(postgres_url: str, postgres_schema: str) -> None:
    with open_postgres(config(postgres_url, postgres_schema)) as st:
        st.record_run_start("r1", "rollup:p", T0)
    with open_postgres(config(postgres_url, postgres_schema)) as st:
        assert [r.run_id for r in st.runs()] == ["r1"]
        assert st.path is None and st.file_moved() == "" and postgres_schema in st.where


def test_another_programs_schema_is_refused_and_left_alone(postgres_url: str, postgres_schema: str) -> None:
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{postgres_schema}"')
        conn.execute(f'CREATE TABLE "{postgres_schema}".orders (id int)')
    with pytest.raises(StateFileError, match="not a Dreamer state schema"):
        open_postgres(config(postgres_url, postgres_schema))
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        tables = conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = %s", (postgres_schema,)
        ).fetchall()
    assert tables == [("orders",)]


def test_a_newer_dreamers_schema_is_refused_by_version(postgres_url: str, postgres_schema: str) -> None:
    open_postgres(config(postgres_url, postgres_schema)).close()
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(
            f"UPDATE \"{postgres_schema}\".meta SET value = %s WHERE key = 'schema_version'",
            (str(PG_SCHEMA_VERSION + 1),),
        )
    with pytest.raises(StateFileError, match=f"newer Dreamer .*schema {PG_SCHEMA_VERSION + 1}"):
        open_postgres(config(postgres_url, postgres_schema))


def test_a_version_1_schema_gets_the_gate_table_keeping_its_rows(
    postgres_url: str, postgres_schema: str
) -> None:
    """Version 1 had no gate rows: opening it adds the table, empty, and the version; the cards
    stay, and the backfill then gives them their rows as on SQLite."""
    from dreamer.rollup.judging import backfill_gates
    from tests.support.ledger import commit_run, sketched_row

    with open_postgres(config(postgres_url, postgres_schema)) as st:
        commit_run(st, [sketched_row(f"Card {i} of host atlas{i}.", i) for i in range(12)])
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        as_version_2(conn, postgres_schema)
        conn.execute(f'DROP TABLE "{postgres_schema}".ledger_gate')
        conn.execute(f"UPDATE \"{postgres_schema}\".meta SET value = '1' WHERE key = 'schema_version'")
    with open_postgres(config(postgres_url, postgres_schema)) as st:
        assert st._conn.execute("SELECT count(*) FROM ledger_gate").fetchone()[0] == 0
        assert st._conn.execute("SELECT count(signature) FROM ledger_words").fetchone()[0] == 0
        assert len(st.ledger("global")) == 12
        while not backfill_gates(st, 5):
            pass
        assert st._conn.execute("SELECT count(*) FROM ledger_gate").fetchone()[0] == 12
        assert word_signatures(st) == gate_signatures(st)
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        version = conn.execute(
            f"SELECT value FROM \"{postgres_schema}\".meta WHERE key = 'schema_version'"
        ).fetchone()
    assert version == (str(PG_SCHEMA_VERSION),)


def word_signatures(st: StateStore) -> set[tuple[str, int]]:
    return set(st._conn.execute("SELECT document_id, signature FROM ledger_words").fetchall())


def gate_signatures(st: StateStore) -> set[tuple[str, int]]:
    return set(st._conn.execute("SELECT document_id, signature FROM ledger_gate").fetchall())


def test_a_version_2_schema_gives_its_word_index_the_gate(postgres_url: str, postgres_schema: str) -> None:
    """Version 2's word rows had no signature: the upgrade copies each card's from its gate row
    and makes the ranges indexes that hold it, as schema 9 of the SQLite file; the probe then finds
    what it found before, from the word index alone."""
    from dreamer.rollup import dedup
    from dreamer.rollup.candidates import probe_words, scans
    from dreamer.rollup.similarity import profile_text, sketch_of
    from tests.support.ledger import commit_run, sketched_row

    texts = [f"Card {i} of host atlas{i % 4} keeps port {i % 3}." for i in range(40)]
    sketch = sketch_of(profile_text(texts[5]))
    with open_postgres(config(postgres_url, postgres_schema)) as st:
        commit_run(st, [sketched_row(t, i) for i, t in enumerate(texts)])
        asked = scans(sketch, dedup.DedupThresholds(), st.word_counts(probe_words(sketch)))
        assert asked is not None
        found = st.scan_index(asked)
        assert found and None not in found.values()
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        as_version_2(conn, postgres_schema)
    with open_postgres(config(postgres_url, postgres_schema)) as st:
        assert word_signatures(st) == gate_signatures(st) and len(gate_signatures(st)) == 40
        indexes = {
            r[0]
            for r in st._conn.execute(
                "SELECT indexname FROM pg_indexes "
                "WHERE tablename = 'ledger_words' AND schemaname = current_schema()"
            )
        }
        assert {"ledger_words_content_gate", "ledger_words_residual_gate"} <= indexes
        assert not {"ledger_words_by_content", "ledger_words_by_residual"} & indexes
        st._conn.execute("DELETE FROM ledger_gate")
        assert st.scan_index(asked) == found


def test_a_damaged_schema_names_what_is_missing(postgres_url: str, postgres_schema: str) -> None:
    open_postgres(config(postgres_url, postgres_schema)).close()
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(f'DROP TABLE "{postgres_schema}".watermarks')
    with pytest.raises(StateFileError, match="missing tables: watermarks"):
        open_postgres(config(postgres_url, postgres_schema))


def test_an_unreachable_database_is_one_line_naming_it() -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dsn = f"postgresql://dreamer@127.0.0.1:{port}/nothing"
    secret = "pw-never-shown-123"
    cfg = StateConfig(backend="postgres", dsn=dsn).model_copy(update={"password": SecretStr(secret)})
    with pytest.raises(StateFileError) as caught:
        open_postgres(cfg)
    message = str(caught.value)
    assert dsn in message and "cannot connect" in message and secret not in message and "\n" not in message


def test_two_stores_on_one_schema_commit_one_at_a_time(postgres_url: str, postgres_schema: str) -> None:
    """Two hosts' commits that both read the same watermark: exactly one lands, the other is told
    the watermark moved, as two processes on one SQLite file are."""
    stores = [open_postgres(config(postgres_url, postgres_schema)) for _ in range(2)]
    outcomes: list[str] = []
    start = threading.Barrier(2)

    def commit(st: StateStore, run: str) -> None:
        st.record_run_start(run, "rollup:p", T0)
        start.wait()
        try:
            st.commit_rollup(
                profile="p",
                bank_id="b",
                watermark=Watermark(T0, {run: T0}, 1, T0),
                promoted=[],
                reinforced=[],
                run_id=run,
                outcome="idle",
                detail="",
                counts={},
                finished_at=T0,
                expected=Watermark(),
            )
            outcomes.append("committed")
        except RunBusyError:
            outcomes.append("busy")

    try:
        threads = [threading.Thread(target=commit, args=(st, f"r{i}")) for i, st in enumerate(stores)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert sorted(outcomes) == ["busy", "committed"]
        assert len(stores[0].watermark("p").boundary_ids) == 1
    finally:
        for st in stores:
            st.close()


def test_a_thread_keeps_its_own_transaction(postgres_url: str, postgres_schema: str) -> None:
    """A read on one thread while another holds a write transaction open on the same store uses
    another pooled connection: it neither joins nor waits for that transaction."""
    with open_postgres(config(postgres_url, postgres_schema)) as st:
        holding, release = threading.Event(), threading.Event()

        def long_write() -> None:
            with st._write() as conn:
                conn.execute("INSERT INTO meta (key, value) VALUES ('probe', 'x')")
                holding.set()
                release.wait(10)

        writer = threading.Thread(target=long_write)
        writer.start()
        assert holding.wait(10)
        assert st.index_version() is None  # answered while the write is open, without its row
        assert not st._conn.in_transaction
        release.set()
        writer.join(10)


def test_stores_of_one_configuration_share_a_pool_that_closes_with_the_last(
    postgres_url: str, postgres_schema: str
) -> None:
    """The daemon's store and each run's share one pool (the schema checked once); closing one
    leaves the others working, and the pool closes with the last."""
    first = open_postgres(config(postgres_url, postgres_schema))
    second = open_postgres(config(postgres_url, postgres_schema))
    assert first._conn._pool is second._conn._pool
    first.close()
    first.close()  # a second close is nothing
    second.record_run_start("r1", "rollup:p", T0)
    assert [r.run_id for r in second.runs()] == ["r1"]
    pool = second._conn._pool
    second.close()
    assert pool.closed
    with open_postgres(config(postgres_url, postgres_schema)) as third:
        assert third._conn._pool is not pool and [r.run_id for r in third.runs()] == ["r1"]


def test_a_host_stopped_inside_a_write_does_not_hold_the_others_for_ever(
    postgres_url: str, postgres_schema: str
) -> None:
    """A write transaction left open (its process stopped by SIGSTOP: from the server's side, a
    session idle in its transaction) holds the schema's write lock only until the server ends the
    session (after the lease time, at most 15 s); another host's write then goes through, and the
    stopped one's transaction fails when it wakes, having committed nothing."""
    stopped = open_postgres(config(postgres_url, postgres_schema))
    other = open_postgres(
        StateConfig(backend="postgres", dsn=postgres_url, schema=postgres_schema, pool_size=2)
    )
    holding, woke = threading.Event(), threading.Event()
    failures: list[Exception] = []

    def write_then_stop() -> None:
        try:
            with stopped._write() as conn:
                conn.execute("INSERT INTO meta (key, value) VALUES ('stopped', 'x')")
                holding.set()
                woke.wait(60)
                conn.execute("INSERT INTO meta (key, value) VALUES ('woke', 'x')")
        except Exception as exc:
            failures.append(exc)

    writer = threading.Thread(target=write_then_stop)
    writer.start()
    try:
        assert holding.wait(10)
        other.record_run_start("r1", "rollup:p", T0)  # not a write under the lock
        other.use_index_version("v1")  # a write: waits for the lock until the stopped session ends
        assert other.index_version() == "v1"
    finally:
        woke.set()
        writer.join(30)
        stopped.close()
        other.close()
    assert failures, "the stopped transaction must not commit when it wakes"
    with open_postgres(config(postgres_url, postgres_schema)) as st, st._write() as conn:
        keys = {r[0] for r in conn.execute("SELECT key FROM meta")}
    assert "stopped" not in keys and "woke" not in keys
