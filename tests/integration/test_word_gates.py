"""The gate in the word index (schema 9) under attack: every state a file can be in (upgraded from
schema 8 halfway through its backfill, cards promoted again, re-indexed for a new index version,
indexed late, rows of one card half signed, an upgrade killed halfway) still has the judge read
every ledger card that passes the dedup gate, and every word row's signature is its card's.

The truth each test checks against is the gate itself, run on every card of the bank as the judge
reads it (`passes_gate` on its stored sketch, or its text's): what `card_candidates` finds through
the word index must be exactly those cards."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
from dataclasses import replace
from pathlib import Path

from dreamer.rollup import dedup
from dreamer.rollup.candidates import index_words, passes_gate, probe_words
from dreamer.rollup.judging import backfill_gates, card_candidates, index_pending
from dreamer.rollup.similarity import Sketch, profile_text, sketch_of, sketch_text
from dreamer.state import SCHEMA_VERSION, StateStore
from dreamer.state.signature import word_signature
from tests.support.ledger import as_schema_8, commit_run, sketched_row

REPO = Path(__file__).resolve().parents[2]
FRAME = "{who} keeps {a} with {b} on {c} at port {port} since {i}."
PEOPLE = ["Caroline", "Melanie", "John", "Gina", "Nate"]


def texts(n: int, start: int = 0) -> list[str]:
    """Cards of one frame: each shares most of its words with a few others, some with many."""
    return [
        FRAME.format(
            who=PEOPLE[i % 5], a=f"alpha{i % 6}x", b=f"beta{i % 4}x", c=f"gamma{i % 7}x", port=1000 + i % 3,
            i=i,
        )
        for i in range(start, start + n)
    ]


# New cards close to several ledger cards (none of the same text, which is read by its text), one
# close to one or two, one close to none.
PROBES = [
    *(
        FRAME.format(
            who=PEOPLE[i % 5], a=f"alpha{i % 6}x", b=f"beta{i % 4}x", c=f"gamma{i % 7}x", port=1000 + i % 3,
            i=9000 + i,
        )
        for i in range(6)
    ),
    "Gina keeps alpha3x with beta3x.",
    "Caroline keeps alpha1x.",
    "Nate keeps alpha4x on gamma2x at port 1001 since 7.",
    "Something else entirely, about beta2x only.",
]


def passing(state: StateStore, text: str) -> set[str]:
    """The cards of the bank that pass the gate of a new card of ``text``, each read in full."""
    sketch = sketch_of(profile_text(text))
    return {
        c.document_id
        for c in state.ledger("global")
        if passes_gate(sketch, Sketch.loads(c.sketch) or sketch_text(c.text), dedup.DedupThresholds())
    }


def found(state: StateStore, text: str) -> set[str]:
    """The cards the judge reads for a new card of ``text`` (through the word index)."""
    sketch = sketch_of(profile_text(text))
    counts = state.word_counts(probe_words(sketch))
    return {c.card_id for c in card_candidates(state, "global", sketch, dedup.DedupThresholds(), counts)}


def assert_every_passing_card_found(state: StateStore) -> None:
    for text in PROBES:
        want = passing(state, text)
        assert found(state, text) == want, text
    assert any(passing(state, t) for t in PROBES)


def signatures(state: StateStore) -> dict[str, set[int | None]]:
    """Each card's word rows' signatures."""
    out: dict[str, set[int | None]] = {}
    for doc, signature in state._conn.execute("SELECT document_id, signature FROM ledger_words"):
        out.setdefault(doc, set()).add(signature)
    return out


def assert_signed_as_their_cards(state: StateStore, *, whole: bool = True) -> None:
    """Every word row's signature is NULL or its card's (the signature of its stored sketch's
    words), and (``whole``) a card with a gate row has it in each of its word rows."""
    gated = {r[0] for r in state._conn.execute("SELECT document_id FROM ledger_gate")}
    sketches = dict(state._conn.execute("SELECT document_id, sketch FROM ledger").fetchall())
    for doc, seen in signatures(state).items():
        sketch = Sketch.loads(sketches[doc])
        assert sketch is not None
        own = word_signature(index_words(sketch))
        assert seen <= {None, own}, doc
        if whole and doc in gated:
            assert seen == {own}, doc


def test_a_file_upgraded_halfway_through_its_backfill_finds_every_passing_card_at_each_step(
    tmp_path: Path,
) -> None:
    """A schema 8 file whose backfill had reached half its cards: after the upgrade the first half's
    word rows carry their signatures and the rest none; every card passing the gate is found after
    the upgrade, after each backfill batch and after commits made between batches."""
    path = tmp_path / "state.sqlite3"
    with StateStore.open(path) as state:
        commit_run(state, [sketched_row(t, i) for i, t in enumerate(texts(60))])
        ids = sorted(r[0] for r in state._conn.execute("SELECT document_id FROM ledger"))
        cursor = ids[29]
        state._conn.execute("DELETE FROM ledger_gate WHERE document_id > ?", (cursor,))
        state._conn.execute("DELETE FROM meta WHERE key LIKE 'gate_backfill%'")
        state._conn.execute("INSERT INTO meta (key, value) VALUES ('gate_backfill_after', ?)", (cursor,))
    as_schema_8(path)
    with StateStore.open(path) as state:
        signed = signatures(state)
        assert all(None not in signed[d] for d in ids[:30]) and all(signed[d] == {None} for d in ids[30:])
        assert_signed_as_their_cards(state)
        assert_every_passing_card_found(state)
        done, n = False, 60
        while not done:
            done = backfill_gates(state, 7)
            commit_run(state, [sketched_row(t, n + i) for i, t in enumerate(texts(3, n))], run_id=f"r{n}")
            n += 3
            assert_signed_as_their_cards(state)
            assert_every_passing_card_found(state)
        assert None not in set().union(*signatures(state).values())


def test_a_card_promoted_again_keeps_its_word_rows_as_its_card(tmp_path: Path) -> None:
    """A promotion redone (the same cards committed again, as after a crash once written upstream)
    changes no word row; a card that lost its gate (a file indexed before gate rows) gets it in
    every word row by the redone promotion, and the backfill passes over it."""
    path = tmp_path / "state.sqlite3"
    rows = [sketched_row(t, i) for i, t in enumerate(texts(40))]
    with StateStore.open(path) as state:
        commit_run(state, rows)
        before = state._conn.execute("SELECT * FROM ledger_words ORDER BY 1, 2").fetchall()
        ledger = state._conn.execute("SELECT * FROM ledger ORDER BY 1").fetchall()
        commit_run(state, rows, run_id="again")
        assert state._conn.execute("SELECT * FROM ledger_words ORDER BY 1, 2").fetchall() == before
        lost = [r.document_id for r in rows[::4]]
        for doc in lost:
            state._conn.execute("DELETE FROM ledger_gate WHERE document_id = ?", (doc,))
            state._conn.execute("UPDATE ledger_words SET signature = NULL WHERE document_id = ?", (doc,))
        state._conn.execute("DELETE FROM meta WHERE key LIKE 'gate_backfill%'")
        assert_every_passing_card_found(state)
        commit_run(state, rows[::4], run_id="third")
        assert state._conn.execute("SELECT * FROM ledger_words ORDER BY 1, 2").fetchall() == before
        assert state._conn.execute("SELECT * FROM ledger ORDER BY 1").fetchall() == ledger
        while not backfill_gates(state, 9):
            pass
        assert state._conn.execute("SELECT * FROM ledger_words ORDER BY 1, 2").fetchall() == before
        assert_every_passing_card_found(state)


def test_a_new_index_version_halfway_through_the_backfill_reindexes_every_card_with_its_gate(
    tmp_path: Path,
) -> None:
    """The index emptied for a new index version while the backfill is halfway: the cards are
    indexed again, each word row with its card's signature, and the rest of the backfill passes
    over them; the cards of another bank (indexed by its own roll-up) stay read in full until then.
    Every passing card is found at each step."""
    path = tmp_path / "state.sqlite3"
    with StateStore.open(path) as state:
        rows = [sketched_row(t, i) for i, t in enumerate(texts(50))]
        elsewhere = [replace(r, document_id=r.document_id + "-x", upstream_bank="other") for r in rows[:10]]
        commit_run(state, [*rows, *elsewhere])
        state._conn.execute("DELETE FROM ledger_gate")
        state._conn.execute("UPDATE ledger_words SET signature = NULL")
        state._conn.execute("DELETE FROM meta WHERE key LIKE 'gate_backfill%'")
        assert backfill_gates(state, 20) is False
        state.use_index_version("older")  # the index was built with another analysis
        index_pending(state, "global")
        assert state._conn.execute("SELECT count(*) FROM ledger WHERE indexed = 0").fetchone()[0] == 10
        assert_signed_as_their_cards(state)
        assert None not in set().union(*signatures(state).values())
        assert_every_passing_card_found(state)
        while not backfill_gates(state, 20):
            pass
        index_pending(state, "other")
        assert_signed_as_their_cards(state)
        assert None not in set().union(*signatures(state).values())
        assert_every_passing_card_found(state)


def test_cards_written_before_the_index_are_indexed_with_their_gate(tmp_path: Path) -> None:
    """Cards from before the word index (not indexed, no sketch or one of an older version) get
    their words with their signature from `store_index`, whatever the backfill's state; until then,
    and after, every passing card is found."""
    path = tmp_path / "state.sqlite3"
    with StateStore.open(path) as state:
        commit_run(state, [sketched_row(t, i) for i, t in enumerate(texts(40))])
        ids = sorted(r[0] for r in state._conn.execute("SELECT document_id FROM ledger"))
        old = ids[::3]
        for i, doc in enumerate(old):
            state._conn.execute("DELETE FROM ledger_words WHERE document_id = ?", (doc,))
            state._conn.execute("DELETE FROM ledger_gate WHERE document_id = ?", (doc,))
            sketch = None if i % 2 else "s1\tolder\tsketch\twords"
            state._conn.execute(
                "UPDATE ledger SET indexed = 0, sketch = ? WHERE document_id = ?", (sketch, doc)
            )
        assert_every_passing_card_found(state)
        index_pending(state, "global")
        assert not state._conn.execute("SELECT 1 FROM ledger WHERE indexed = 0").fetchall()
        assert_signed_as_their_cards(state)
        assert None not in set().union(*signatures(state).values())
        assert {r[0] for r in state._conn.execute("SELECT document_id FROM ledger_gate")} >= set(old)
        assert_every_passing_card_found(state)


def test_a_card_whose_word_rows_are_half_signed_is_found_whichever_row_is_read_first(
    tmp_path: Path,
) -> None:
    """The probe keeps the first row it reads of a card: with one of each two word rows of every
    card without its signature (and then the other), each card is read as without a gate or by its
    own signature, never ruled out by a row of another's."""
    path = tmp_path / "state.sqlite3"
    with StateStore.open(path) as state:
        commit_run(state, [sketched_row(t, i) for i, t in enumerate(texts(50))])
        full = {t: found(state, t) for t in PROBES}
        for parity in (0, 1):
            state._conn.execute(
                "UPDATE ledger_words SET signature = ("
                "SELECT g.signature FROM ledger_gate AS g WHERE g.document_id = ledger_words.document_id)"
            )
            state._conn.execute(
                "UPDATE ledger_words SET signature = NULL WHERE (length(word) + unicode(word)) % 2 = ?",
                (parity,),
            )
            assert_signed_as_their_cards(state, whole=False)
            assert {t: found(state, t) for t in PROBES} == full
            assert_every_passing_card_found(state)


KILLED_UPGRADE = textwrap.dedent(
    """
    import os, signal, sqlite3, sys
    from pathlib import Path

    # A fault at the transport: the process dies (SIGKILL, no cleanup) while the upgrade's copy of
    # the gate rows' signatures into the word rows is running, inside its transaction.
    real = sqlite3.connect

    def connect(*args, **kwargs):
        conn = real(*args, **kwargs)
        armed = []

        def trace(sql):
            if sql.lstrip().startswith("UPDATE ledger_words SET signature"):
                armed.append(sql)

        def progress():
            if armed:
                os.kill(os.getpid(), signal.SIGKILL)
            return 0

        conn.set_trace_callback(trace)
        conn.set_progress_handler(progress, 50)
        return conn

    sqlite3.connect = connect
    from dreamer.state import StateStore
    StateStore.open(Path(sys.argv[1]))
    """
)


def test_an_upgrade_killed_halfway_leaves_schema_8_and_runs_whole_on_the_next_open(tmp_path: Path) -> None:
    """SIGKILL while the upgrade to schema 9 writes the word rows' signatures: the file is schema 8
    as it was (no column, the old ranges, every row), and the next open upgrades it as if nothing
    had happened; every passing card is found."""
    path = tmp_path / "state.sqlite3"
    with StateStore.open(path) as state:
        commit_run(state, [sketched_row(t, i) for i, t in enumerate(texts(120))])
    as_schema_8(path)
    with sqlite3.connect(path) as conn:
        tables = ("ledger", "ledger_words", "ledger_gate", "ledger_word_counts")
        before = {t: conn.execute(f"SELECT * FROM {t} ORDER BY 1, 2").fetchall() for t in tables}
    killed = subprocess.run(
        [sys.executable, "-c", KILLED_UPGRADE, str(path)],
        cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True, timeout=60,
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == 8
        assert "signature" not in {r[1] for r in conn.execute("PRAGMA table_info(ledger_words)")}
        names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
        assert {"ledger_words_by_content", "ledger_words_by_residual"} <= names
        assert not {"ledger_words_content_gate", "ledger_words_residual_gate"} & names
        assert {t: conn.execute(f"SELECT * FROM {t} ORDER BY 1, 2").fetchall() for t in tables} == before
    with StateStore.open(path) as state:
        assert state._conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert_signed_as_their_cards(state)
        assert None not in set().union(*signatures(state).values())
        assert_every_passing_card_found(state)
