"""Counting a store's statements: what each one is called, and that each is counted once."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Sequence
from typing import Any

from bench.hosts.counting import CountingConnection, StatementCounter, role, statement_kind
from dreamer.state.dialect import POSTGRES, SQLITE


class TestStatementKind:
    def test_transaction_verbs_alone(self) -> None:
        """BEGIN (with its options), COMMIT and ROLLBACK are their verb."""
        assert statement_kind("BEGIN IMMEDIATE") == "BEGIN"
        assert statement_kind(POSTGRES.begin_read) == "BEGIN"
        assert statement_kind("  COMMIT") == "COMMIT"
        assert statement_kind("ROLLBACK") == "ROLLBACK"

    def test_verb_and_table(self) -> None:
        """A statement is its verb and its table, not a table a later clause names (DO UPDATE)."""
        upsert = "INSERT INTO leases (name, owner) VALUES (?, ?) ON CONFLICT (name) DO UPDATE SET owner = 1"
        assert statement_kind(upsert) == "INSERT leases"
        assert statement_kind("UPDATE leases SET expires_at = 0 WHERE owner = ?") == "UPDATE leases"
        assert statement_kind("DELETE FROM hosts WHERE owner = ?") == "DELETE hosts"

    def test_a_clock_function_is_no_table(self) -> None:
        """PostgreSQL's clock (``extract(epoch FROM clock_timestamp())``) before the FROM of the
        table does not name the statement."""
        sql = f"SELECT owner, expires_at - {POSTGRES.now} FROM hosts WHERE expires_at > {POSTGRES.now}"
        assert statement_kind(sql) == "SELECT hosts"
        assert statement_kind(f"SELECT name FROM leases WHERE x > {SQLITE.now}") == "SELECT leases"

    def test_a_function_select(self) -> None:
        """A SELECT of a function alone is that function: the schema's advisory lock."""
        assert statement_kind("SELECT pg_advisory_xact_lock(42)") == "SELECT pg_advisory_xact_lock"


class _Fake:
    def __init__(self) -> None:
        self.sent: list[str] = []
        self.in_transaction = False

    def execute(self, sql: str, params: Sequence[Any] = ()) -> str:
        self.sent.append(sql)
        return "rows"

    def executemany(self, sql: str, rows: Any) -> None:
        self.sent.append(f"many {len(list(rows))}")


class TestCountingConnection:
    def test_every_statement_counted_and_passed_on(self) -> None:
        """Each execute is counted once under the thread's role and its answer returned unchanged."""
        inner, counter = _Fake(), StatementCounter()
        conn = CountingConnection(inner, counter)
        assert conn.execute("BEGIN") == "rows"
        with role("beat"):
            conn.execute("UPDATE leases SET x = 1")
        conn.execute("COMMIT")
        counts, seconds = counter.snapshot()
        assert counts == {("run", "BEGIN"): 1, ("beat", "UPDATE leases"): 1, ("run", "COMMIT"): 1}
        assert set(seconds) == set(counts)
        assert inner.sent == ["BEGIN", "UPDATE leases SET x = 1", "COMMIT"]

    def test_an_executemany_is_one_and_an_empty_one_none(self) -> None:
        """A batch counts as one round trip (psycopg pipelines it); an empty one sends nothing."""
        inner, counter = _Fake(), StatementCounter()
        conn = CountingConnection(inner, counter)
        conn.executemany("INSERT INTO decisions (a) VALUES (?)", iter([(1,), (2,)]))
        conn.executemany("INSERT INTO decisions (a) VALUES (?)", [])
        assert counter.snapshot()[0] == {("run", "INSERT decisions (many)"): 1}
        assert inner.sent == ["many 2", "many 0"]

    def test_roles_are_per_thread(self) -> None:
        """Another thread's statements keep their own role while this one is in ``beat``."""
        counter = StatementCounter()
        conn = CountingConnection(_Fake(), counter)
        with role("beat"):
            worker = threading.Thread(target=conn.execute, args=("COMMIT",))
            worker.start()
            worker.join()
            conn.execute("BEGIN")
        assert counter.snapshot()[0] == {("run", "COMMIT"): 1, ("beat", "BEGIN"): 1}

    def test_wraps_a_real_sqlite_connection(self) -> None:
        """What the store reads of a sqlite3 connection besides execute still answers."""
        raw = sqlite3.connect(":memory:", isolation_level=None)
        conn = CountingConnection(raw, StatementCounter())
        conn.execute("BEGIN")
        assert conn.in_transaction
        conn.execute("COMMIT")
        assert not conn.in_transaction
        assert conn.total_changes == raw.total_changes
        conn.close()
