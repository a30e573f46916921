"""The embedded store at scale: ranked recall, per-bank unit counters, the schema-3 upgrade.

Recall ranks BM25 candidates before it joins and filters them; here it is compared, result for
result, with the query it replaced (join every match, filter the JSON tags, then rank), which is kept
only in this file as the reference.
"""

from __future__ import annotations

import asyncio
import json
import random
import sqlite3
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from dreamer.backends.base import RetainItem, TagsMatch
from dreamer.backends.embedded import search
from dreamer.backends.embedded.backend import EmbeddedBackend
from dreamer.backends.embedded.schema import SCHEMA_VERSION, bank_key_range
from dreamer.backends.embedded.search import (
    STOPWORDS,
    bm25_to_score,
    candidate_limits,
    fts_match_expression,
    match_plan,
)
from dreamer.errors import PermanentBackendError

# The recall query of schema 2, the reference: every match in the bank's key range is joined to
# its unit and filtered (tags read from the JSON column) before anything is ranked.
JOIN_THEN_RANK = """
SELECT u.id, bm25(units_fts) AS rank
FROM units_fts JOIN units u ON u.seq = units_fts.rowid
WHERE units_fts MATCH ? AND units_fts.rowid BETWEEN ? AND ? AND u.bank_id = ?
  AND u.fact_type IN (SELECT value FROM json_each(?)) {tags}
ORDER BY rank, u.created_at DESC, u.id
"""
_UNTAGGED = "json_array_length(u.tags) = 0"
_OVERLAP = "EXISTS (SELECT 1 FROM json_each(u.tags) t WHERE t.value IN (SELECT value FROM json_each(?)))"
_CONTAINS_ALL = (
    "NOT EXISTS (SELECT 1 FROM json_each(?) q WHERE q.value NOT IN (SELECT value FROM json_each(u.tags)))"
)
_WITHIN = (
    "NOT EXISTS (SELECT 1 FROM json_each(u.tags) t WHERE t.value NOT IN (SELECT value FROM json_each(?)))"
)
JSON_TAG_FILTERS: dict[str, tuple[str, int]] = {
    "any": (f"AND ({_UNTAGGED} OR {_OVERLAP})", 1),
    "all": (f"AND ({_UNTAGGED} OR {_CONTAINS_ALL})", 1),
    "any_strict": (f"AND NOT {_UNTAGGED} AND {_OVERLAP}", 1),
    "all_strict": (f"AND NOT {_UNTAGGED} AND {_CONTAINS_ALL}", 1),
    "exact": (f"AND NOT {_UNTAGGED} AND {_CONTAINS_ALL} AND {_WITHIN}", 2),
}

COMMON = ["host", "backup", "nginx", "deploy", "certificate", "disk", "alert", "user"]
RARE = [f"w{i}" for i in range(400)]
FILLER = ["the", "a", "of", "on", "to", "and", "is", "with"]
TAGS = ["rollup", "profile:a", "profile:b", "rare"]


def _text(rng: random.Random) -> str:
    words: list[str] = []
    for _ in range(rng.randint(4, 14)):
        pool = COMMON if rng.random() < 0.35 else RARE
        words.append(rng.choice(pool))
        if rng.random() < 0.4:
            words.append(rng.choice(FILLER))
    return " ".join(words)


def _tags(rng: random.Random) -> tuple[str, ...]:
    roll = rng.random()
    if roll < 0.1:
        return ()
    if roll < 0.102:
        return ("rare", "rarest")
    if roll < 0.12:
        return ("rare",)
    tags = ["rollup"] if roll < 0.8 else ["rollup", rng.choice(["profile:a", "profile:b"])]
    return tuple(tags)


async def _fill(path: Path) -> None:
    rng = random.Random(20261201)
    store = await EmbeddedBackend.open(path)
    try:
        for bank, count in (("global", 3000), ("other", 500)):
            for start in range(0, count, 500):
                batch = [RetainItem(_text(rng), tags=_tags(rng)) for _ in range(min(500, count - start))]
                await store.retain(bank, batch)
    finally:
        await store.aclose()


@pytest.fixture(scope="module")
def filled_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """3,000 units in "global" and 500 in "other", random tags, texts with many equal BM25 scores."""
    path = tmp_path_factory.mktemp("scale") / "memory.sqlite3"
    asyncio.run(_fill(path))
    return path


@pytest.fixture
async def filled(filled_path: Path) -> AsyncIterator[EmbeddedBackend]:
    store = await EmbeddedBackend.open(filled_path)
    try:
        yield store
    finally:
        await store.aclose()


def _reference(
    path: Path, bank: str, query: str, tags: Sequence[str] | None, tags_match: str, limit: int | None
) -> list[tuple[str, float]]:
    match = fts_match_expression(query)
    assert match is not None
    tag_sql, uses = JSON_TAG_FILTERS[tags_match] if tags else ("", 0)
    with sqlite3.connect(path) as raw:
        bank_no = raw.execute("SELECT bank_no FROM banks WHERE bank_id = ?", (bank,)).fetchone()[0]
        first = bank_no << 40
        params: list[Any] = [match, first, first | ((1 << 40) - 1), bank, '["world", "experience"]']
        params += [json.dumps(list(tags or ()))] * uses
        rows = raw.execute(JOIN_THEN_RANK.format(tags=tag_sql), params).fetchall()
    return [(unit_id, bm25_to_score(rank)) for unit_id, rank in rows[:limit]]


QUERIES = [_text(random.Random(seed)) for seed in range(40)] + [
    "host",
    " ".join(COMMON),
    "the host and the backup",
    "w7 w8 w9",
    "nothing matches zzz",
]
FILTERS: list[tuple[tuple[str, ...] | None, TagsMatch]] = [
    (None, "any"),
    (("rollup",), "any_strict"),
    (("rare",), "any_strict"),
    (("rarest",), "any_strict"),
    (("profile:a",), "any"),
    (("rollup", "profile:b"), "all_strict"),
    (("rollup",), "exact"),
]


class TestRankedRecall:
    @pytest.mark.parametrize("limit", [1, 8, 50, None])
    async def test_recall_equals_the_join_then_rank_query(
        self, filled: EmbeddedBackend, limit: int | None
    ) -> None:
        """For 44 queries × 6 tag filters: the same ids, order and scores as the schema-2 query."""
        differing = []
        for query in QUERIES:
            for tags, tags_match in FILTERS:
                expected = _reference(filled.path, "global", query, tags, tags_match, limit)
                hits = await filled.recall(
                    "global",
                    query,
                    max_tokens=10**9,
                    types=("world", "experience"),
                    tags=tags,
                    tags_match=tags_match,
                    limit=limit,
                )
                if [(hit.id, hit.score) for hit in hits] != expected:
                    differing.append((query, tags, tags_match))
        assert differing == []

    async def test_the_comparison_covers_the_widened_and_the_exhaustive_pass(
        self, filled: EmbeddedBackend
    ) -> None:
        """At limit 8, "rare" hits lie past the first candidate set and "rarest" hits past the widened one."""
        query = " ".join(COMMON)
        ranking = [unit_id for unit_id, _ in _reference(filled.path, "global", query, None, "any", None)]
        first, widened, _ = candidate_limits(8)
        deepest = {}
        for tag in ("rare", "rarest"):
            hits = _reference(filled.path, "global", query, (tag,), "any_strict", 8)
            assert len(hits) >= 5
            deepest[tag] = max(ranking.index(unit_id) for unit_id, _ in hits)
        assert first <= deepest["rare"] < widened <= deepest["rarest"] < len(ranking)

    async def test_a_query_of_stopwords_only_still_matches(self, backend: EmbeddedBackend) -> None:
        """Stopwords are left out of the match, except when the query holds nothing else."""
        await backend.retain("bank", [RetainItem("to be or not to be"), RetainItem("the host is up")])
        assert [hit.text for hit in await backend.recall("bank", "to be or not")] == ["to be or not to be"]
        assert [hit.text for hit in await backend.recall("bank", "the host of the")] == ["the host is up"]

    def test_stopwords_are_left_out_of_the_match_expression(self) -> None:
        """Only the content words are OR-ed; a query of stopwords keeps all of its words."""
        assert fts_match_expression("The backup of the host") == '"backup" OR "host"'
        assert fts_match_expression("to be or not") == '"to" OR "be" OR "or" OR "not"'
        assert {"the", "and", "of", "to"} <= STOPWORDS


def _tier_of(path: Path, bank: str, query: str, limit: int) -> tuple[set[str], set[str]] | None:
    """(rare terms, common terms) of the query's two-tier plan in the bank, casefolded; None for one tier."""
    match = fts_match_expression(query)
    assert match is not None
    with sqlite3.connect(path) as raw:
        bank_no = raw.execute("SELECT bank_no FROM banks WHERE bank_id = ?", (bank,)).fetchone()[0]
        plan = match_plan(raw, match, *bank_key_range(bank_no), limit)
    if plan.rare is None or plan.common is None:
        return None
    terms = [{t.strip('"').casefold() for t in side.split(" OR ")} for side in (plan.rare, plan.common)]
    return terms[0], terms[1]


#: Queries whose terms FTS5 reads oddly: operators, quotes, a symbol it drops, emoji, a joiner.
HOSTILE = [
    'host ™ w7 "w8"',
    "host AND w9 OR NOT NEAR(w10) *",
    "backup ^w11 col:w12 -w13",
    "™ host",
    "host \u200d w14 😀",
]


class TestTieredRecall:
    """A bank where some query terms are common: rows holding a rarer term first, every score kept."""

    COMMON_AT = 300  # each COMMON word is on about 1,000 of the 3,000 units, each RARE one on about 45

    async def test_every_match_keeps_its_score_and_the_rare_tier_comes_first(
        self, filled: EmbeddedBackend, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """For 44 queries × 7 tag filters, unlimited and at limit 8: the reference's rows, each with
        the reference's score (to 1e-12), in the reference's order within each tier."""
        monkeypatch.setattr(search, "COMMON_MATCHES", self.COMMON_AT)
        tiered = reordered = 0
        differing = []
        for query in QUERIES + HOSTILE:
            tiers = _tier_of(filled.path, "global", query, self.COMMON_AT)
            for tags, tags_match in FILTERS:
                reference = _reference(filled.path, "global", query, tags, tags_match, None)
                by_id = dict(reference)
                texts = {}
                expected = [unit_id for unit_id, _ in reference]
                if tiers is not None:
                    rare, _ = tiers
                    with sqlite3.connect(filled.path) as raw:
                        texts = dict(
                            raw.execute("SELECT id, text FROM units WHERE bank_id = 'global'").fetchall()
                        )
                    # A stable sort: the rare tier first, each tier in the reference's order.
                    expected.sort(key=lambda unit_id: not rare & set(texts[unit_id].casefold().split()))
                    tiered += 1
                    reordered += expected != [unit_id for unit_id, _ in reference]
                for limit in (None, 8):
                    hits = await filled.recall(
                        "global",
                        query,
                        max_tokens=10**9,
                        types=("world", "experience"),
                        tags=tags,
                        tags_match=tags_match,
                        limit=limit,
                    )
                    if [hit.id for hit in hits] != expected[:limit] or any(
                        abs(hit.score - by_id[hit.id]) > 1e-12 for hit in hits
                    ):
                        differing.append((query, tags, tags_match, limit))
        assert differing == []
        # The comparison covers the two tiers: many queries are cut in two, and some change order.
        assert tiered >= 100 and reordered >= 10, (tiered, reordered)

    async def test_a_bank_without_common_terms_is_searched_in_one_tier(self, filled: EmbeddedBackend) -> None:
        """At the default threshold nothing in a 3,000-unit bank is common: one plan, one tier."""
        assert all(_tier_of(filled.path, "global", q, search.COMMON_MATCHES) is None for q in QUERIES)

    async def test_a_bank_smaller_than_the_threshold_counts_no_term(
        self, filled: EmbeddedBackend, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """No term can be common in a bank of at most COMMON_MATCHES units (its counter says so):
        a recall there counts no term's matches; in a larger bank it counts each term once."""
        statements: list[str] = []

        def trace(conn: sqlite3.Connection) -> None:
            conn.set_trace_callback(statements.append)

        def untrace(conn: sqlite3.Connection) -> None:
            conn.set_trace_callback(None)

        counted = []
        for threshold in (3000, 2999):  # "global" holds 3,000 units
            monkeypatch.setattr(search, "COMMON_MATCHES", threshold)
            statements.clear()
            await filled._call("trace", trace)
            try:
                await filled.recall("global", "host backup w7 w8", limit=8)
            finally:
                await filled._call("untrace", untrace)
            counted.append(sum("SELECT count(*) FROM (SELECT 1 FROM units_fts" in q for q in statements))
        assert counted == [0, 4]

    def test_the_plan_counts_matches_in_the_bank_only(self, filled_path: Path) -> None:
        """A term common in another bank's rows is rare in this one: the count stays in the key range."""
        match = '"host" OR "w1"'
        with sqlite3.connect(filled_path) as raw:
            numbers = dict(raw.execute("SELECT bank_id, bank_no FROM banks").fetchall())
            in_global = match_plan(raw, match, *bank_key_range(numbers["global"]), 300)
            in_other = match_plan(raw, match, *bank_key_range(numbers["other"]), 300)
        assert in_global == search.MatchPlan('"w1"', '"host"')
        assert in_other == search.MatchPlan(match, None)


@pytest.fixture
async def backend(tmp_path: Path) -> AsyncIterator[EmbeddedBackend]:
    store = await EmbeddedBackend.open(tmp_path / "memory.sqlite3")
    try:
        yield store
    finally:
        await store.aclose()


async def _activity_steps(store: EmbeddedBackend, bank: str) -> int:
    """SQLite virtual-machine steps one activity() call takes on the backend's own connection."""
    steps = 0

    def count() -> int:
        nonlocal steps
        steps += 1
        return 0

    def watch(conn: sqlite3.Connection) -> None:
        conn.set_progress_handler(count, 1)

    def unwatch(conn: sqlite3.Connection) -> None:
        conn.set_progress_handler(None, 1)

    await store._call("watch", watch)
    try:
        await store.activity([bank])
    finally:
        await store._call("unwatch", unwatch)
    return steps


def _counts(path: Path) -> tuple[dict[str, int], dict[str, int]]:
    """Each bank's counter and its units counted row by row."""
    with sqlite3.connect(path) as raw:
        counters = dict(raw.execute("SELECT bank_id, unit_count FROM banks").fetchall())
        counted = dict(raw.execute("SELECT bank_id, COUNT(*) FROM units GROUP BY bank_id").fetchall())
    return counters, {bank: counted.get(bank, 0) for bank in counters}


def _tag_rows(path: Path) -> tuple[set[tuple[str, str]], set[tuple[str, str]]]:
    """(unit id, tag) pairs in the tag table and in the units' JSON tags."""
    with sqlite3.connect(path) as raw:
        table = set(
            raw.execute("SELECT u.id, t.tag FROM unit_tags t JOIN units u ON u.seq = t.unit_key").fetchall()
        )
        stored = set(raw.execute("SELECT u.id, t.value FROM units u, json_each(u.tags) t").fetchall())
    return table, stored


class TestUnitCounters:
    async def test_counters_follow_retains_replacements_and_deletes(self, backend: EmbeddedBackend) -> None:
        """Inserts, a changed document (delete + insert), a re-retain and a raw delete keep the counts."""
        await backend.retain("one", [RetainItem(f"unit {i}") for i in range(5)])
        await backend.retain("two", [RetainItem("doc v1", document_id="d", tags=("x",))])
        await backend.retain("two", [RetainItem("doc v2", document_id="d", tags=("y",))])
        await backend.retain("two", [RetainItem("doc v2", document_id="d", tags=("z", "z"))])
        with sqlite3.connect(backend.path) as raw:
            raw.execute("DELETE FROM units WHERE text = 'unit 3'")
        counters, counted = _counts(backend.path)
        assert counters == counted == {"one": 4, "two": 1}
        activity = await backend.activity(["one", "two"])
        assert (activity["one"].unit_count, activity["two"].unit_count) == (4, 1)
        assert await backend.count_units("two") == 1
        table, stored = _tag_rows(backend.path)
        assert table == stored and {tag for _, tag in table} == {"z"}

    async def test_activity_work_does_not_grow_with_the_bank(self, tmp_path: Path) -> None:
        """activity() reads a counter: 2,000 units cost no more SQLite steps than 2."""
        steps = []
        for size in (2, 2000):
            store = await EmbeddedBackend.open(tmp_path / f"store-{size}.sqlite3")
            try:
                await store.retain("bank", [RetainItem(f"unit {i}") for i in range(size)])
                steps.append(await _activity_steps(store, "bank"))
                assert (await store.activity(["bank"]))["bank"].unit_count == size
            finally:
                await store.aclose()
        assert steps[1] == steps[0]


# The store schema as version 2 wrote it, kept verbatim so the upgrade is tested against real old
# files rather than against whatever the current code creates.
V2_SCHEMA = """
CREATE TABLE IF NOT EXISTS banks (
    bank_id       TEXT PRIMARY KEY,
    created_at    TEXT NOT NULL,
    last_write_at TEXT,
    bank_no       INTEGER
);
CREATE UNIQUE INDEX IF NOT EXISTS banks_by_no ON banks (bank_no);
CREATE TABLE IF NOT EXISTS units (
    seq         INTEGER PRIMARY KEY,
    id          TEXT NOT NULL UNIQUE,
    bank_id     TEXT NOT NULL,
    text        TEXT NOT NULL,
    fact_type   TEXT NOT NULL DEFAULT 'world',
    context     TEXT,
    document_id TEXT,
    tags        TEXT NOT NULL DEFAULT '[]',
    metadata    TEXT NOT NULL DEFAULT '{}',
    created_at  TEXT NOT NULL,
    mentioned_at TEXT,
    proof_count INTEGER NOT NULL DEFAULT 1
);
CREATE INDEX IF NOT EXISTS units_by_bank_time ON units (bank_id, created_at, id);
CREATE INDEX IF NOT EXISTS units_by_document ON units (bank_id, document_id);
CREATE TABLE IF NOT EXISTS documents (
    bank_id      TEXT NOT NULL,
    document_id  TEXT NOT NULL,
    content_hash TEXT NOT NULL,
    created_at   TEXT NOT NULL,
    updated_at   TEXT NOT NULL,
    PRIMARY KEY (bank_id, document_id)
);
CREATE VIRTUAL TABLE IF NOT EXISTS units_fts USING fts5(
    text, content='units', content_rowid='seq', tokenize='unicode61 remove_diacritics 2'
);
CREATE TRIGGER IF NOT EXISTS units_fts_insert AFTER INSERT ON units BEGIN
    INSERT INTO units_fts (rowid, text) VALUES (new.seq, new.text);
END;
CREATE TRIGGER IF NOT EXISTS units_fts_delete AFTER DELETE ON units BEGIN
    INSERT INTO units_fts (units_fts, rowid, text) VALUES ('delete', old.seq, old.text);
END;
CREATE TRIGGER IF NOT EXISTS units_fts_update AFTER UPDATE OF text ON units BEGIN
    INSERT INTO units_fts (units_fts, rowid, text) VALUES ('delete', old.seq, old.text);
    INSERT INTO units_fts (rowid, text) VALUES (new.seq, new.text);
END;
CREATE TRIGGER IF NOT EXISTS units_key_in_bank AFTER INSERT ON units
WHEN new.seq >> 40 IS NOT (SELECT bank_no FROM banks WHERE bank_id = new.bank_id)
BEGIN
    SELECT RAISE(
        ABORT, 'unit key outside its bank range: this store was upgraded; restart every Dreamer using it'
    );
END;
PRAGMA user_version = 2;
"""

V2_BANKS = {"global": 1, "profile-a": 2, "empty": 3}


def _write_v2_store(path: Path) -> None:
    """A schema-2 store written with raw SQL: bank-scoped keys, assorted tags, one bank left empty."""
    with sqlite3.connect(path, isolation_level=None) as raw:
        raw.execute("PRAGMA journal_mode = WAL")
        raw.executescript(V2_SCHEMA)
        raw.execute("BEGIN")
        for bank, number in V2_BANKS.items():
            raw.execute(
                "INSERT INTO banks VALUES (?, '2025-01-01T00:00:00.000000+00:00', NULL, ?)", (bank, number)
            )
        tag_sets = [[], ["rollup"], ["rollup", "profile:a"], ["x", "x"], ["ünï", "emoji 🙂"]]
        for bank, count in (("global", 40), ("profile-a", 25)):
            first = V2_BANKS[bank] << 40
            for i in range(count):
                created = f"2025-01-02T00:00:00.{i:06d}+00:00"
                raw.execute(
                    "INSERT INTO units (seq, id, bank_id, text, tags, metadata, created_at, mentioned_at)"
                    " VALUES (?, ?, ?, ?, ?, '{}', ?, ?)",
                    (
                        first + i + 1,
                        f"{bank}-{i}",
                        bank,
                        f"host {i % 7} backup {bank} note {i}",
                        json.dumps(tag_sets[i % len(tag_sets)], ensure_ascii=False),
                        created,
                        created,
                    ),
                )
            raw.execute("UPDATE banks SET last_write_at = ? WHERE bank_id = ?", (created, bank))
        raw.execute("COMMIT")


def _dump(path: Path) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    with sqlite3.connect(path) as raw:
        units = raw.execute("SELECT * FROM units ORDER BY seq").fetchall()
        banks = raw.execute(
            "SELECT bank_id, created_at, last_write_at, bank_no FROM banks ORDER BY bank_id"
        ).fetchall()
    return units, banks


class TestSchema3Upgrade:
    async def test_a_schema_2_store_keeps_every_row_and_gains_tags_and_counts(self, tmp_path: Path) -> None:
        """Every unit and bank row is kept as it was; the tag table and counters are filled from them."""
        path = tmp_path / "memory.sqlite3"
        _write_v2_store(path)
        before = _dump(path)
        expected = {
            (tags, tags_match): _reference(path, "global", "host backup note", tags, tags_match, None)
            for tags, tags_match in FILTERS
        }
        store = await EmbeddedBackend.open(path)
        try:
            assert _dump(path) == before
            with sqlite3.connect(path) as raw:
                assert raw.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
            table, stored = _tag_rows(path)
            assert table == stored and len(table) > 0
            counters, counted = _counts(path)
            assert counters == counted == {"global": 40, "profile-a": 25, "empty": 0}
            for (tags, tags_match), hits in expected.items():
                recalled = await store.recall(
                    "global", "host backup note", max_tokens=10**9, tags=tags, tags_match=tags_match
                )
                assert [(hit.id, hit.score) for hit in recalled] == hits
            await store.retain("empty", [RetainItem("first unit", tags=("new",))])
            assert (await store.activity(["empty"]))["empty"].unit_count == 1
        finally:
            await store.aclose()

    async def test_a_failed_upgrade_leaves_the_schema_2_store_untouched(self, tmp_path: Path) -> None:
        """A failure while filling the new table rolls the whole upgrade back."""
        path = tmp_path / "memory.sqlite3"
        _write_v2_store(path)
        with sqlite3.connect(path) as raw:
            raw.execute("UPDATE units SET tags = 'not json' WHERE id = 'global-3'")
        before = _dump(path)
        with pytest.raises(PermanentBackendError):
            await EmbeddedBackend.open(path)
        assert _dump(path) == before
        with sqlite3.connect(path) as raw:
            assert raw.execute("PRAGMA user_version").fetchone()[0] == 2
            assert raw.execute("SELECT name FROM sqlite_master WHERE name = 'unit_tags'").fetchall() == []

    async def test_a_store_from_schema_4_is_refused_and_untouched(self, tmp_path: Path) -> None:
        """A file one version ahead of this code is not opened, and not changed."""
        path = tmp_path / "memory.sqlite3"
        _write_v2_store(path)
        with sqlite3.connect(path) as raw:
            raw.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
        before = _dump(path)
        with pytest.raises(PermanentBackendError, match="newer Dreamer"):
            await EmbeddedBackend.open(path)
        assert _dump(path) == before
