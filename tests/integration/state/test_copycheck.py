"""The checks around a copy (:mod:`dreamer.state.copycheck`) on a real SQLite file and a real
PostgreSQL schema: the checksums are computed alike on both (byte order, any text, read in pages),
a changed row changes them, and every kind of row of another state is counted before anything is
written."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from dreamer.config.state import StateConfig
from dreamer.errors import StateFileError
from dreamer.state import LedgerCard, StateStore
from dreamer.state import copycheck as checks
from dreamer.state.copy import TABLES, copy_state, open_source
from dreamer.state.pgstore import open_postgres
from tests.support.ledger import T0, commit_run
from tests.support.state_seed import seed

pytestmark = pytest.mark.postgres

# Ids and texts whose byte order differs from a locale's, and text that is hard to quote.
HOSTILE = ["B", "a", "Z", "é", "ä-1", "Ab", "a b", "\u00e9\u0301", "😀", "'; DROP TABLE ledger; --"]


@pytest.fixture
def pg(postgres_url: str, postgres_schema: str) -> Iterator[StateStore]:
    st = open_postgres(StateConfig(backend="postgres", dsn=postgres_url, schema=postgres_schema))
    try:
        yield st
    finally:
        st.close()


def hostile_file(path: Path) -> None:
    cards = [
        LedgerCard(doc, "p", "global", f"{doc} 50% of ? and %s \\ \" $$", doc.lower(), source_ids=(f"u{i}",),
                   profiles=("p",), promoted_at=T0 + timedelta(seconds=i), last_seen_at=T0, run_id="seed")
        for i, doc in enumerate(HOSTILE)
    ]
    with StateStore.open(path) as st:
        commit_run(st, cards)


def test_the_checksums_agree_on_any_text_in_byte_order_and_in_pages(
    tmp_path: Path, pg: StateStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(checks, "PAGE_ROWS", 3)
    path = tmp_path / "state.sqlite3"
    hostile_file(path)
    with open_source(path) as source:
        report = copy_state(source, pg, source_path=path)
        ledger = next(c for c in report.checks if c.name == "ledger checksum")
        assert report.ok and ledger.sqlite == ledger.postgres and len(str(ledger.sqlite)) == 16
        paged = [r[0] for r in pg._conn.execute("SELECT document_id FROM ledger ORDER BY document_id")]
        assert paged == sorted(HOSTILE, key=lambda s: s.encode())


def test_a_changed_row_changes_the_checksum_and_the_report_says_which(tmp_path: Path, pg: StateStore) -> None:
    path = tmp_path / "state.sqlite3"
    seed(path, 8)
    with open_source(path) as source:
        copy_state(source, pg, source_path=path)
    with pg._write() as conn:  # as if the schema's own daemon had reinforced a card since
        conn.execute("UPDATE ledger SET reinforcements = reinforcements + 1 WHERE document_id = "
                     "(SELECT min(document_id) FROM ledger)")
    counts = {t.name: t.count() for t in TABLES}
    with open_source(path) as source:
        found = checks.compare(source, pg, counts, {})
    report = checks.CopyReport(path, pg.where, found)
    assert report.differing == ["ledger checksum"] and not report.ok
    doc = report.to_json()
    assert doc["ok"] is False and doc["checks"][0] == {
        "table": "ledger", "sqlite": 8, "postgres": 8, "new": 8, "ok": True
    }


def test_each_kind_of_foreign_row_is_counted_and_nothing_is_written(tmp_path: Path, pg: StateStore) -> None:
    path = tmp_path / "state.sqlite3"
    seed(path, 4)
    with open_source(path) as source:
        copy_state(source, pg, source_path=path)
    with pg._write() as conn:
        conn.execute("UPDATE runs SET outcome = 'failed' WHERE run_id = 'atlas-unfinished'")
        conn.execute("UPDATE meta SET value = 'test-v2' WHERE key = 'index_version'")
        conn.execute("UPDATE ledger_vectors SET document_id = 'gone' "
                     "WHERE seq = (SELECT max(seq) FROM ledger_vectors)")
        conn.execute("INSERT INTO decisions (run_id, profile, verdict, reason, decided_at) "
                     "VALUES ('elsewhere', 'p', 'new', 'x', '2026-01-01')")
    with open_source(path) as source, pytest.raises(StateFileError) as refused:
        checks.refuse_foreign(source, pg, path)
    assert "holds 1 vector, 1 decision, 1 run record, 1 index version that " in str(refused.value)


def test_a_fresh_schema_is_no_foreign_state(tmp_path: Path, pg: StateStore) -> None:
    path = tmp_path / "state.sqlite3"
    seed(path, 2)
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as source:
        checks.refuse_foreign(source, pg, path)
