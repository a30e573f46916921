"""Ledger rows for tests that seed a real state file: a sketched, indexed row as a roll-up writes
it, and one committed run that promotes (and reinforces) cards."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from dreamer.rollup.candidates import index_words, word_sizes
from dreamer.rollup.existing import stored_sketch
from dreamer.state import LedgerCard, Reinforcement, StateStore, Watermark
from dreamer.text import card_document_id, normalize_text

if TYPE_CHECKING:
    import psycopg

T0 = datetime(2026, 11, 1, tzinfo=UTC)


def sketched_row(text: str, i: int, *, suffix: str = "") -> LedgerCard:
    """A ledger row of profile "p" for ``text``, promoted ``i`` seconds after `T0`, with the
    sketch and word-index entries a roll-up stores; ``suffix`` makes repeated texts distinct."""
    sketch = stored_sketch(text)  # with its sentences', as promote.ledger_row writes it
    return LedgerCard(
        document_id=card_document_id("p", text) + suffix,
        profile="p",
        upstream_bank="global",
        text=text,
        normalized=normalize_text(text),
        promoted_at=T0 + timedelta(seconds=i),
        last_seen_at=T0,
        run_id="seed",
        sketch=sketch.dumps(),
        words=tuple(sorted(index_words(sketch))),
        word_sizes=word_sizes(sketch),
    )


def commit_run(
    state: StateStore,
    promoted: Sequence[LedgerCard],
    *,
    reinforced: Sequence[Reinforcement] = (),
    run_id: str = "seed",
    profile: str = "p",
    bank_id: str = "b",
    watermark: Watermark | None = None,
    at: datetime = T0,
    expected: Watermark | None = None,
) -> None:
    """One run of ``profile`` that started and committed ``promoted`` and ``reinforced`` at ``at``
    (the watermark moves to ``watermark``, by default ``at``; ``expected`` as `commit_rollup`)."""
    state.record_run_start(run_id, f"rollup:{profile}", at)
    state.commit_rollup(
        profile=profile,
        bank_id=bank_id,
        watermark=watermark if watermark is not None else Watermark(at),
        promoted=list(promoted),
        reinforced=list(reinforced),
        run_id=run_id,
        outcome="promoted",
        detail="",
        counts={},
        finished_at=at,
        expected=expected,
    )


def without_gates(conn: sqlite3.Connection) -> None:
    """Forget every card's gate, as a file indexed before gate rows has it: no gate row and no
    signature in its word rows (the backfill writes both)."""
    conn.execute("DELETE FROM ledger_gate")
    conn.execute("UPDATE ledger_words SET signature = NULL")


def as_schema_8(path: Path) -> None:
    """The state file as schema 8 left it: gate rows, and word ranges without their signatures."""
    with sqlite3.connect(path) as conn:
        conn.execute("DROP INDEX ledger_words_content_gate")
        conn.execute("DROP INDEX ledger_words_residual_gate")
        conn.execute("ALTER TABLE ledger_words DROP COLUMN signature")
        conn.execute("CREATE INDEX ledger_words_by_content ON ledger_words (word, content_n)")
        conn.execute("CREATE INDEX ledger_words_by_residual ON ledger_words (word, residual_n)")
        conn.execute("PRAGMA user_version = 8")


def as_version_2(conn: psycopg.Connection, schema: str) -> None:
    """The PostgreSQL state ``schema`` as version 2 left it: word ranges without their cards'
    signatures (schema 8 of the file, `as_schema_8`)."""
    conn.execute(f'DROP INDEX "{schema}".ledger_words_content_gate, "{schema}".ledger_words_residual_gate')
    conn.execute(f'ALTER TABLE "{schema}".ledger_words DROP COLUMN signature')
    conn.execute(f'CREATE INDEX ledger_words_by_content ON "{schema}".ledger_words (word, content_n)')
    conn.execute(f'CREATE INDEX ledger_words_by_residual ON "{schema}".ledger_words (word, residual_n)')
    conn.execute(f"UPDATE \"{schema}\".meta SET value = '2' WHERE key = 'schema_version'")
