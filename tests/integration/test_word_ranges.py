"""The word index as a roll-up reads it (schema 4): each side's set size beside the word, how many
cards hold each word, and the upgrade of a schema-3 file that builds both."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from dreamer.rollup import dedup
from dreamer.rollup.candidates import passes_gate, probe_words, scans
from dreamer.rollup.similarity import profile_text, sketch_of
from dreamer.state import APPLICATION_ID, SCHEMA_VERSION, StateStore, schema
from dreamer.text import card_document_id
from tests.support.ledger import T0, commit_run, sketched_row

FRAME = "The {a} service on host {b} keeps its {c} cache on port {port} since build {i}."


def counted(state: StateStore) -> dict[str, int]:
    return dict(state._conn.execute("SELECT word, cards FROM ledger_word_counts"))


def grouped(state: StateStore) -> dict[str, int]:
    return dict(state._conn.execute("SELECT word, COUNT(*) FROM ledger_words GROUP BY word"))


def test_word_counts_follow_every_commit_and_an_index_reset(tmp_path: Path) -> None:
    """The per-word card counts equal the index's own, after new cards, a card committed twice (its
    words are not counted twice) and a new index version (which empties both)."""
    texts = [FRAME.format(a=f"w{i % 7}", b=f"h{i % 3}", c="zz", port=80 + i % 2, i=i) for i in range(40)]
    with StateStore.open(tmp_path / "state.sqlite3") as state:
        state.use_index_version("s1")
        commit_run(state, [sketched_row(t, i) for i, t in enumerate(texts[:30])])
        commit_run(state, [sketched_row(t, i) for i, t in enumerate(texts[20:], start=20)], run_id="again")
        assert counted(state) == grouped(state)
        assert counted(state)["servic"] == 40
        assert state.word_counts(["servic", "zz", "never-seen"]) == {"servic": 40, "zz": 40}
        state.use_index_version("s2")
        assert counted(state) == {} == grouped(state)


def test_a_common_word_is_read_only_for_cards_short_enough_to_pass_through_it(tmp_path: Path) -> None:
    """Cards of one frame share seven of their twelve words, below the gate: a new card reads the
    frame words' cards only at the sizes that could pass (none of the frame's), yet still finds a
    short card made of frame words alone, and every card the gate passes."""
    frame_cards = [
        FRAME.format(a=f"alpha{i}x", b=f"beta{i}x", c=f"gamma{i}x", port=1000 + i, i=i) for i in range(300)
    ]
    # Share a rare word with the new card: one passes the gate (same frame), one does not.
    near = FRAME.format(a="omegax", b="beta7x", c="sigmax", port=1007, i=7)
    short = "The service on host keeps its cache on port since build."
    texts = [*frame_cards, near, short]
    new = FRAME.format(a="alpha7x", b="beta7x", c="gamma7y", port=1007, i=9999)
    thresholds = dedup.DedupThresholds()
    with StateStore.open(tmp_path / "state.sqlite3") as state:
        commit_run(state, [sketched_row(t, i) for i, t in enumerate(texts)])
        sketch = sketch_of(profile_text(new))
        asked = scans(sketch, thresholds, state.word_counts(probe_words(sketch)))
        assert asked is not None
        found = set(state.scan_index(asked))
        ids = {card_document_id("p", t): t for t in texts}
        passing = {d for d, t in ids.items() if passes_gate(sketch, sketch_of(profile_text(t)), thresholds)}
        assert card_document_id("p", short) in passing and card_document_id("p", near) in passing
        assert passing <= found
        assert len(found) < 20, "the frame words must not be read for cards of the frame's size"


def test_upgrade_from_schema_3_builds_the_ranges_and_counts_keeping_every_row(tmp_path: Path) -> None:
    """A schema-3 file (word index without counts) upgrades in one transaction: every row stays, the
    counts equal the index's, and the next card committed is counted."""
    path = tmp_path / "state.sqlite3"
    with sqlite3.connect(path) as conn:
        conn.executescript(schema._SCHEMA + schema._INDEXES + schema._VECTORS)
        conn.execute("ALTER TABLE ledger_words DROP COLUMN signature")  # schema 9's
        conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        conn.execute("PRAGMA user_version = 3")
        conn.executemany(
            "INSERT INTO ledger (document_id, profile, upstream_bank, text, normalized, promoted_at, "
            "last_seen_at, run_id, indexed) VALUES (?, 'p', 'global', ?, ?, ?, ?, 'r', 1)",
            [(f"d{i}", f"Card {i}.", f"card {i}", T0.isoformat(), T0.isoformat()) for i in range(30)],
        )
        conn.executemany(
            "INSERT INTO ledger_words VALUES (?, ?, 2, 1)",
            [(w, f"d{i}") for i in range(30) for w in ("card", str(i))],
        )
        before = {
            t: conn.execute(f"SELECT * FROM {t} ORDER BY 1, 2").fetchall() for t in ("ledger", "ledger_words")
        }
    with StateStore.open(path) as state:
        assert counted(state) == grouped(state) and counted(state)["card"] == 30
        commit_run(state, [sketched_row("Card thirty.", 30)])
        assert state.word_counts(["card"]) == {"card": 31}
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        after = {t: conn.execute(f"SELECT * FROM {t} ORDER BY 1, 2").fetchall() for t in before}
        # Schema 9's signature: none for cards without a gate row (the gate backfill writes both).
        assert {r[4] for r in after["ledger_words"] if r[1] in {f"d{i}" for i in range(30)}} == {None}
        after["ledger_words"] = [r[:4] for r in after["ledger_words"]]
        plan = conn.execute(
            "EXPLAIN QUERY PLAN SELECT document_id, content_n, residual_n, signature FROM ledger_words "
            "INDEXED BY ledger_words_content_gate "
            "WHERE word = 'card' AND content_n BETWEEN 1 AND 3"
        ).fetchall()
    assert [r for r in after["ledger"] if r[0] != card_document_id("p", "Card thirty.")] == before["ledger"]
    assert set(before["ledger_words"]) <= set(after["ledger_words"])
    assert "COVERING INDEX ledger_words_content_gate" in str(plan)


def test_wrong_word_counts_cost_reads_but_lose_no_card(tmp_path: Path) -> None:
    """Counts that rank the words backwards (as a damaged or hand-edited counts table would) make a
    probe read more cards, never miss one the gate passes."""
    frame_cards = [
        FRAME.format(a=f"alpha{i}x", b=f"beta{i}x", c=f"gamma{i}x", port=1000 + i, i=i) for i in range(200)
    ]
    new = FRAME.format(a="alpha7x", b="beta7x", c="gamma7y", port=1007, i=9999)
    thresholds = dedup.DedupThresholds()
    with StateStore.open(tmp_path / "state.sqlite3") as state:
        commit_run(state, [sketched_row(t, i) for i, t in enumerate(frame_cards)])
        state._conn.execute("UPDATE ledger_word_counts SET cards = 1000000 - cards")
        sketch = sketch_of(profile_text(new))
        asked = scans(sketch, thresholds, state.word_counts(probe_words(sketch)))
        assert asked is not None
        found = set(state.scan_index(asked))
        passing = {
            card_document_id("p", t)
            for t in frame_cards
            if passes_gate(sketch, sketch_of(profile_text(t)), thresholds)
        }
        assert passing and passing <= found
        assert len(found) > 100, "the frame words, now ranked rarest, are read in full"
