"""The state store's contract, run over both backends: a real SQLite file and a real PostgreSQL schema
(scripts/postgres-dev; the PostgreSQL cases skip when none is configured, and fail under
DREAMER_REQUIRE_POSTGRES=1). Everything above the store (the pipeline, status, peer cards, the
Hermes provider) sees only these calls, so what holds here holds for both."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from dreamer.config.state import StateConfig
from dreamer.errors import LeaseLostError, RunBusyError
from dreamer.state import (
    GLOBAL_SCOPE,
    Decision,
    LedgerCard,
    Reinforcement,
    StateStore,
    StoredVector,
    Watermark,
    WordScan,
)
from dreamer.state.signature import word_signature

T0 = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StateStore]:
    """An empty state store of each backend."""
    if request.param == "sqlite":
        st = StateStore.open(tmp_path / "state.sqlite3")
    else:
        from dreamer.state.pgstore import open_postgres

        url = request.getfixturevalue("postgres_url")
        schema = request.getfixturevalue("postgres_schema")
        st = open_postgres(StateConfig(backend="postgres", dsn=url, schema=schema))
    try:
        yield st
    finally:
        st.close()


def card(
    doc: str,
    text: str,
    *,
    sources: tuple[str, ...] = ("u1",),
    supersedes: str | None = None,
    profile: str = "p",
    at: datetime = T0,
) -> LedgerCard:
    return LedgerCard(
        doc,
        profile,
        "global",
        text,
        text.lower(),
        source_ids=sources,
        profiles=(profile,),
        promoted_at=at,
        last_seen_at=at,
        supersedes=supersedes,
        run_id="r1",
    )


def commit(
    st: StateStore,
    run: str,
    *,
    promoted: list[LedgerCard] = (),
    reinforced: list[Reinforcement] = (),
    expected: Watermark | None = None,
    at: datetime = T0,
    profile: str = "p",
    decisions: list[Decision] = (),
    counts: dict[str, int] | None = None,
) -> Watermark:
    st.record_run_start(run, f"rollup:{profile}", at)
    wm = Watermark(at, {f"u-{run}": at}, 1, at)
    st.commit_rollup(
        profile=profile,
        bank_id="b",
        watermark=wm,
        promoted=list(promoted),
        reinforced=list(reinforced),
        run_id=run,
        outcome="promoted",
        detail="",
        counts=counts or {"promoted": len(promoted)},
        finished_at=at,
        expected=expected,
        decisions=list(decisions),
    )
    return st.watermark(profile)


def test_a_commit_lands_whole_and_reinforcements_count_once_per_run(store: StateStore) -> None:
    wm = commit(store, "r1", promoted=[card("d1", "Sam likes tea")])
    commit(
        store,
        "r2",
        reinforced=[Reinforcement("d1", ("u9",), "q"), Reinforcement("d1", ("u8", "u1"), "q")],
        expected=wm,
        at=T0 + timedelta(days=1),
    )
    [row] = store.ledger("global")
    assert row.reinforcements == 1 and row.source_ids == ("u1", "u9", "u8") and row.profiles == ("p", "q")
    assert row.told is not None and row.told.times == 2
    assert [c.document_id for c in store.profile_cards("global", "q")] == ["d1"]
    assert store.ledger_size() == store.ledger_size("global") == 1 and store.ledger_size("other") == 0


def test_a_moved_watermark_refuses_the_commit_and_writes_nothing(store: StateStore) -> None:
    commit(store, "r1", promoted=[card("d1", "one")])
    with pytest.raises(RunBusyError):
        commit(store, "r2", promoted=[card("d2", "two")], expected=Watermark())
    assert [c.document_id for c in store.ledger()] == ["d1"]
    assert store.existing_documents(["d1", "d2"]) == {"d1"}


def test_hostile_text_reads_back_as_written(store: StateStore) -> None:
    text = "50% of '?' and %s; DROP TABLE ledger; -- é ✓ \\ \" $$"
    commit(store, "r1", promoted=[card("d?%", text, sources=("u'1", "u%s"))])
    [row] = store.cards(["d?%"])
    assert row.text == text and row.source_ids == ("u'1", "u%s")
    assert [c.document_id for c in store.cards_citing("u%s")] == ["d?%"]
    assert [c.text for c in store.candidate_cards(["d?%"])] == [text]


def test_supersession_and_reads_by_id(store: StateStore) -> None:
    commit(
        store,
        "r1",
        promoted=[card("old", "Sam lives in Paris"), card("new", "Sam lives in Rome", supersedes="old")],
    )
    assert [c.document_id for c in store.superseding(["old"])] == ["new"]
    assert store.superseding(["new"]) == []
    assert store.ranked_count("global", GLOBAL_SCOPE, superseded=True) == 2
    assert store.ranked_count("global", GLOBAL_SCOPE, superseded=False) == 1


def test_rank_chunks_page_through_a_scope_in_order(store: StateStore) -> None:
    cards = [
        card(
            f"d{i:02d}",
            f"fact {i}",
            sources=tuple(f"u{j}" for j in range(i % 4 + 1)),
            at=T0 + timedelta(minutes=i),
        )
        for i in range(25)
    ]
    commit(store, "r1", promoted=cards)
    seen, after = [], None
    while True:
        chunk, after = store.ranked_chunk("global", "p", after, 7)
        seen += [c.document_id for c in chunk]
        if after is None:
            break
    assert sorted(seen) == sorted(c.document_id for c in cards) and len(seen) == 25
    assert seen[:7] == [c.document_id for c in store.ranked_chunk("global", GLOBAL_SCOPE, None, 7)[0]]


def test_the_word_index_finds_cards_by_word_and_size(store: StateStore) -> None:
    store.use_index_version("v1")
    a = card("da", "tea time")
    commit(store, "r1", promoted=[a])
    store.store_index({"da": ("sk", ["tea", "time"], (2, 1))})
    assert store.word_counts(["tea", "coffee"]) == {"tea": 1}
    # Each id once, with its gate row: word-set sizes and signature.
    both = [WordScan("tea", "content", 1, 3), WordScan("time", "content", 0, 9)]
    assert store.scan_index(both) == {"da": (2, 1, word_signature(["tea", "time"]))}
    # More ranges than one query may hold (SQLite: 500 terms of a compound SELECT) still read each id once.
    assert store.scan_index(both * 600).keys() == {"da"}
    assert store.gate_backfill_left() == 0, "indexed with its gate row: nothing for the backfill"
    assert store.scan_index([WordScan("tea", "content", 3, 5)]) == {}
    found = store.ledger_candidates("global", ids=["da"], normalized=["nothing"])
    assert [(c.document_id, c.sketch) for c in found] == [("da", "sk")]
    assert store.unindexed("global") == []
    store.use_index_version("v2")  # a new analysis empties the index
    assert store.word_counts(["tea"]) == {} and [c.document_id for c in store.unindexed("global")] == ["da"]


def test_an_upgrade_of_the_stored_sketches_goes_over_every_card_once_per_version(store: StateStore) -> None:
    """In document-id order from a cursor, a batch at a time; only the sketch is written; once done
    nothing is read until another version, which starts again from the first card."""
    commit(store, "r1", promoted=[card(f"d{i}", f"Card {i}.") for i in range(5)])
    first = store.sketch_upgrade(2, "v1")
    assert first is not None and [doc for doc, _, _ in first] == ["d0", "d1"]
    store.store_sketches({"d1": "s-new\tx"}, version="v1", after="d1")
    rest = store.sketch_upgrade(10, "v1")
    assert rest is not None and [doc for doc, _, _ in rest] == ["d2", "d3", "d4"]
    store.store_sketches({}, version="v1", after=None)
    assert store.sketch_upgrade(10, "v1") is None
    again = store.sketch_upgrade(10, "v2")
    assert again is not None and len(again) == 5
    read = {c.document_id: c for c in store.candidate_cards(["d1", "d2"])}
    assert read["d1"].sketch == "s-new\tx" and read["d1"].text == "Card 1." and read["d2"].sketch is None


def test_vectors_by_model_with_a_new_seq_when_replaced(store: StateStore) -> None:
    commit(store, "r1", promoted=[card("d1", "one"), card("d2", "two")])
    assert store.last_vector_seq() == 0
    blob = bytes(range(16))
    store.store_vectors(
        {
            "d1": StoredVector("m", 4, blob),
            "d2": StoredVector("m", 4, blob),
            "gone": StoredVector("m", 4, blob),
        }
    )
    first = store.vectors_since("global", "m", 4, 0)
    assert [r.document_id for r in first] == ["d1", "d2"] and first[0].blob == blob
    store.store_vectors({"d1": StoredVector("m", 4, blob[::-1])})
    again = store.vectors_since("global", "m", 4, first[-1].seq)
    assert [(r.document_id, r.blob) for r in again] == [("d1", blob[::-1])]
    assert store.last_vector_seq() == again[0].seq
    assert store.vector_models() == [("m", 4, 2)]
    assert [c.document_id for c in store.stale_vectors("global", "other", None, 10)] == ["d1", "d2"]
    assert store.stale_vectors("global", "m", 4, 10) == []
    assert [c.document_id for c in store.stale_vectors("global", "m", 8, 1)] == ["d1"]
    # A pass over the whole ledger by document id, from where the last batch ended.
    commit(store, "r2", promoted=[card("d0", "zero"), card("d3", "three")])
    assert [c.document_id for c in store.stale_vectors_after("m", 4, "", 10)] == ["d0", "d3"]
    assert [c.document_id for c in store.stale_vectors_after("m", 4, "d0", 10)] == ["d3"]
    assert [c.document_id for c in store.stale_vectors_after("other", 4, "d0", 2)] == ["d1", "d2"]
    assert [c.document_id for c in store.stale_vectors_after("m", 8, "d1", 5)] == ["d2", "d3"]
    where = "(bytea)" if store.dialect.name == "postgres" else "in the state file"
    assert store.vector_storage().startswith("float16 bytes ") and where in store.vector_storage()
    # Listed lookups, by card and by seq: only the listed cards' current vectors, in seq order,
    # a replaced vector's old seq gone, another model's or length's never.
    by_card = store.vectors_of("global", "m", 4, ["d2", "d1", "gone", "d2"])
    assert [(r.document_id, r.blob) for r in by_card] == [("d2", blob), ("d1", blob[::-1])]
    seqs = [first[0].seq, first[1].seq, again[0].seq]
    assert [r.document_id for r in store.vectors_by_seq("global", "m", 4, seqs)] == ["d2", "d1"]
    assert store.vectors_of("global", "m", 8, ["d1"]) == store.vectors_of("other", "m", 4, ["d1"]) == []


def test_runs_decisions_and_their_sums(store: StateStore) -> None:
    decided = Decision(
        run_id="r1",
        profile="p",
        unit_id="u1",
        verdict="promoted",
        reason="new",
        document_id="d1",
        matched_id=None,
        scores={"jaccard": 0.5},
        decided_at=T0,
    )
    commit(
        store,
        "r1",
        promoted=[card("d1", "one")],
        decisions=[decided],
        counts={"promoted": 1, "llm_tokens": 7},
    )
    commit(store, "r2", expected=store.watermark("p"), counts={"llm_tokens": 5})
    assert [r.run_id for r in store.runs()] == ["r2", "r1"]  # one start time: the later insert first
    assert store.llm_tokens_since(T0) == 12 and store.llm_tokens_since(T0, except_run="r2") == 7
    [total] = store.run_totals()
    assert (total.runs, total.promoted, total.sums["llm_tokens"]) == (2, 1, 12)
    assert store.consecutive("rollup:p", "promoted") == 2
    assert store.unit_decisions("u1") == [decided] and store.card_decisions("d1") == [decided]
    assert store.decision_count() == 1


def test_a_lease_is_one_owners_until_it_expires_and_a_takeover_raises_its_token(store: StateStore) -> None:
    a = store.take_lease("profile:p", "host-a", 0.6)
    assert a is not None and a.token == 1 and 0 < a.left_s <= 0.6
    assert store.take_lease("profile:p", "host-b", 30) is None
    assert store.take_lease("profile:p", "host-a", 30).token == 1  # kept, not taken over
    store.release_lease("profile:p", "host-a")
    b = store.take_lease("profile:p", "host-b", 30)
    assert b is not None and b.token == 2
    [holder] = store.holders("profile:")
    assert (holder.owner, holder.token) == ("host-b", 2) and holder.left_s > 20
    assert store.holders("upstream:") == []


def test_a_heartbeat_renews_only_leases_not_yet_lost(store: StateStore) -> None:
    store.take_lease("profile:p", "host-a", 0.3)
    store.take_lease("profile:q", "host-a", 30)
    time.sleep(0.4)
    kept = store.heartbeat("host-a", "a.example:1", 30)
    assert [lease.name for lease in kept] == ["profile:q"]
    assert [h.owner for h in store.live_hosts()] == ["host-a"]
    store.leave("host-a")
    assert store.live_hosts() == [] and store.take_lease("profile:q", "host-b", 30) is not None


def test_a_commit_with_a_lost_lease_writes_nothing(store: StateStore) -> None:
    lease = store.take_lease("profile:p", "host-a", 0.3)
    assert lease is not None
    time.sleep(0.4)
    taken = store.take_lease("profile:p", "host-b", 30)
    assert taken is not None and taken.token == 2
    with store.fenced([lease]), pytest.raises(LeaseLostError, match="host-b"):
        commit(store, "r1", promoted=[card("d1", "one")])
    assert store.ledger() == [] and store.watermark("p") == Watermark()
    with store.fenced([taken]):
        commit(store, "r2", promoted=[card("d1", "one")])
    assert [c.document_id for c in store.ledger()] == ["d1"]
