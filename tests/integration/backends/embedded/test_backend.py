"""The embedded SQLite backend: what only it has to get right.

The semantics both backends share live in ``test_backend_contract.py``. Here: the store file (WAL,
busy timeout, closing), FTS5 query escaping against hostile input, batch atomicity, the write-time
``created_at`` order, Hindsight's ``tags_match`` modes, the extractive reflect, and several
processes sharing one file.
"""

from __future__ import annotations

import itertools
import os
import sqlite3
import sys
import threading
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import anyio
import jsonschema  # type: ignore[import-untyped]
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from dreamer.backends.base import MemoryBackend, RetainItem
from dreamer.backends.embedded.backend import EmbeddedBackend
from dreamer.backends.embedded.schema import SCHEMA_VERSION
from dreamer.backends.embedded.search import bm25_to_score, fts_match_expression
from dreamer.errors import PermanentBackendError

REPO_ROOT = Path(__file__).resolve().parents[4]

HOSTILE_QUERIES = [
    '"',
    '""',
    '"unterminated',
    "AND",
    "OR OR OR",
    "NOT",
    "a AND",
    "NEAR(alpha beta, 2)",
    "NEAR",
    "*",
    "alp*",
    "text:alpha",
    "units_fts:alpha",
    "{text}: alpha",
    "^alpha",
    "-alpha",
    "+alpha",
    "(alpha",
    "alpha)",
    "alpha' OR 1=1 --",
    "'; DROP TABLE units; --",
    "\x00alpha\x00",
    "\ud800alpha",
    "alpha\u200bbeta",
    "🙂🙂",
    "\u0301\u0301",
    "x" * 20_000,
    " ".join(f"w{i}" for i in range(5_000)),
    "日本語 العربية עברית",
]


@pytest.fixture
async def backend(tmp_path: Path) -> AsyncIterator[EmbeddedBackend]:
    store = await EmbeddedBackend.open(tmp_path / "store" / "memory.sqlite3")
    try:
        yield store
    finally:
        await store.aclose()


def _items(*texts: str, **fields: Any) -> list[RetainItem]:
    return [RetainItem(text, **fields) for text in texts]


class TestStoreFile:
    async def test_satisfies_the_memory_backend_protocol(self, backend: EmbeddedBackend) -> None:
        """The backend is a MemoryBackend named "embedded" whose reflect uses no LLM."""
        assert isinstance(backend, MemoryBackend)
        assert backend.name == "embedded" and backend.reflect_uses_llm is False

    async def test_creates_parent_directories_and_uses_wal(self, tmp_path: Path) -> None:
        """Opening creates missing directories; the file is in WAL mode with a -wal file while open."""
        path = tmp_path / "a" / "b" / "memory.sqlite3"
        store = await EmbeddedBackend.open(path)
        try:
            await store.retain("bank", _items("alpha"))
            assert Path(f"{path}-wal").exists()
            with sqlite3.connect(path) as raw:
                assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        finally:
            await store.aclose()

    async def test_constructor_does_no_io(self, tmp_path: Path) -> None:
        """Building the backend touches nothing; the first call creates the file."""
        path = tmp_path / "later" / "memory.sqlite3"
        store = EmbeddedBackend(path)
        assert not path.parent.exists()
        try:
            assert await store.count_units("bank") == 0
            assert path.exists()
        finally:
            await store.aclose()

    async def test_a_file_that_is_not_a_store_is_a_permanent_error(self, tmp_path: Path) -> None:
        """Pointing the backend at a non-SQLite file fails with a PermanentBackendError naming the path."""
        path = tmp_path / "notes.txt"
        path.write_text("not a database, just some text " * 100)
        with pytest.raises(PermanentBackendError, match=r"notes\.txt"):
            await EmbeddedBackend.open(path)

    async def test_a_store_from_a_newer_schema_is_refused(self, tmp_path: Path) -> None:
        """A file whose schema version is newer than this code's is not touched."""
        path = tmp_path / "memory.sqlite3"
        with sqlite3.connect(path) as raw:
            raw.execute("PRAGMA user_version = 99")
        with pytest.raises(PermanentBackendError, match="newer Dreamer"):
            await EmbeddedBackend.open(path)

    async def test_closed_backend_refuses_calls_and_close_is_idempotent(self, tmp_path: Path) -> None:
        """After aclose every call raises PermanentBackendError, and aclose may be called again."""
        store = await EmbeddedBackend.open(tmp_path / "memory.sqlite3")
        await store.aclose()
        await store.aclose()
        with pytest.raises(PermanentBackendError, match="closed"):
            await store.recall("bank", "alpha")

    async def test_a_writer_waits_for_another_connections_write_lock(self, backend: EmbeddedBackend) -> None:
        """While another connection holds the write lock, retain waits (busy_timeout) and then succeeds."""
        raw = sqlite3.connect(backend.path, isolation_level=None, check_same_thread=False)
        raw.execute("BEGIN IMMEDIATE")
        released = threading.Event()

        async def release_later() -> None:
            await anyio.sleep(0.3)
            raw.execute("COMMIT")
            released.set()

        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(release_later)
                await backend.retain("bank", _items("written after the lock was released"))
            assert released.is_set()
            assert await backend.count_units("bank") == 1
        finally:
            raw.close()


class TestQueryEscaping:
    @pytest.mark.parametrize("query", HOSTILE_QUERIES)
    async def test_hostile_queries_never_raise(self, backend: EmbeddedBackend, query: str) -> None:
        """FTS5 operators, quotes, NULs, surrogates and huge queries are searched as plain words."""
        await backend.retain("bank", _items("alpha beta gamma", "AND OR NOT NEAR are words too"))
        hits = await backend.recall("bank", query)
        assert all(0.0 <= hit.score <= 1.0 for hit in hits)
        assert await backend.count_units("bank") == 2

    async def test_operator_words_match_literally(self, backend: EmbeddedBackend) -> None:
        """Querying "NEAR" or "AND" finds units containing those words instead of being FTS5 syntax."""
        await backend.retain("bank", _items("salt and pepper near the sea", "unrelated"))
        for query in ("NEAR", "AND", 'and "near"'):
            assert [hit.text for hit in await backend.recall("bank", query)] == [
                "salt and pepper near the sea"
            ]

    @pytest.mark.parametrize("query", ["", "   ", "!!! ... ???", "\x00", "\u0301", '"" ()'])
    async def test_a_query_without_indexable_terms_returns_nothing(
        self, backend: EmbeddedBackend, query: str
    ) -> None:
        """Blank or punctuation-only queries return [] rather than an error."""
        await backend.retain("bank", _items("alpha"))
        assert await backend.recall("bank", query) == []

    @settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(query=st.text(max_size=200))
    def test_any_text_gives_a_valid_match_expression(self, query: str) -> None:
        """For any text the expression is None or a MATCH SQLite accepts."""
        expression = fts_match_expression(query)
        if expression is None:
            return
        with sqlite3.connect(":memory:") as conn:
            conn.execute("CREATE VIRTUAL TABLE t USING fts5(x, tokenize='unicode61 remove_diacritics 2')")
            conn.execute("INSERT INTO t (x) VALUES ('alpha')")
            conn.execute("SELECT rowid FROM t WHERE t MATCH ?", (expression,)).fetchall()

    async def test_terms_are_or_ed_and_more_matches_rank_higher(self, backend: EmbeddedBackend) -> None:
        """A unit matching both terms outranks units matching one; partial matches still come back."""
        await backend.retain(
            "bank", _items("python only here", "rust only here", "python and rust together", "neither")
        )
        hits = await backend.recall("bank", "python rust")
        assert hits[0].text == "python and rust together"
        assert {hit.text for hit in hits} == {
            "python only here",
            "rust only here",
            "python and rust together",
        }
        assert [hit.score for hit in hits] == sorted((hit.score for hit in hits), reverse=True)

    async def test_case_and_diacritics_are_ignored(self, backend: EmbeddedBackend) -> None:
        """ "CAFE" finds "Café au lait" and "naïve" finds "NAIVE"."""
        await backend.retain("bank", _items("Café au lait", "NAIVE approach"))
        assert [hit.text for hit in await backend.recall("bank", "CAFE")] == ["Café au lait"]
        assert [hit.text for hit in await backend.recall("bank", "naïve")] == ["NAIVE approach"]

    async def test_equal_scores_break_ties_newest_first_and_stably(self, backend: EmbeddedBackend) -> None:
        """Identical texts tie on BM25; they come back newest first, the same way every time."""
        await backend.retain("bank", _items("same words"))
        await backend.retain("bank", _items("same words"))
        await backend.retain("bank", _items("same words"))
        units = await backend.all_units("bank")
        first = await backend.recall("bank", "same words")
        assert [hit.id for hit in first] == [unit.id for unit in reversed(units)]
        assert [hit.id for hit in await backend.recall("bank", "same words")] == [hit.id for hit in first]


class TestRetain:
    async def test_a_batch_with_one_invalid_item_stores_nothing(self, backend: EmbeddedBackend) -> None:
        """A non-string metadata value is a 422-like PermanentBackendError and no item is stored."""
        bad = RetainItem("bad", metadata={"n": 1})  # type: ignore[dict-item]
        with pytest.raises(PermanentBackendError) as caught:
            await backend.retain("bank", [RetainItem("good one"), bad, RetainItem("good two")])
        assert caught.value.status == 422
        assert "items[1].metadata['n']" in caught.value.detail
        assert await backend.count_units("bank") == 0
        assert (await backend.activity(["bank"]))["bank"].exists is False

    async def test_a_batch_failing_inside_the_transaction_is_rolled_back(
        self, backend: EmbeddedBackend
    ) -> None:
        """When the database refuses the third item, the first two are not kept either."""
        await backend.retain("bank", _items("already there"))
        with sqlite3.connect(backend.path) as raw:
            raw.execute(
                "CREATE TRIGGER poison BEFORE INSERT ON units WHEN new.text = 'poison'"
                " BEGIN SELECT RAISE(ABORT, 'poisoned'); END"
            )
        with pytest.raises(PermanentBackendError, match="poisoned"):
            await backend.retain("bank", _items("first", "second", "poison", "fourth"))
        with pytest.raises(PermanentBackendError):
            await backend.retain("other", _items("new bank", "poison"))
        assert [unit.text for unit in await backend.all_units("bank")] == ["already there"]
        assert (await backend.activity(["other"]))["other"].exists is False

    async def test_lone_surrogates_are_refused(self, backend: EmbeddedBackend) -> None:
        """Text that cannot be UTF-8 encoded is a 422-like error, not a crash."""
        with pytest.raises(PermanentBackendError) as caught:
            await backend.retain("bank", _items("broken \ud800 text"))
        assert caught.value.status == 422

    async def test_large_and_unusual_unicode_round_trips(self, backend: EmbeddedBackend) -> None:
        """50 KB texts, NULs, emoji, RTL and combining marks come back byte for byte and are searchable."""
        big = ("lorem ipsum dolor " * 3000)[:50_000] + " needle"
        odd = "nul\x00inside 🙂 emoji עברית e\u0301 \U0010fffd end"
        await backend.retain("bank", [RetainItem(big), RetainItem(odd, metadata={"ключ": "значение 🙂"})])
        units = await backend.all_units("bank")
        assert [unit.text for unit in units] == [big, odd]
        assert units[1].metadata == {"ключ": "значение 🙂"}
        assert [hit.text for hit in await backend.recall("bank", "needle")] == [big]
        assert [hit.text for hit in await backend.recall("bank", "עברית")] == [odd]

    async def test_created_at_is_write_time_and_timestamp_is_mentioned_at(
        self, backend: EmbeddedBackend
    ) -> None:
        """An item's timestamp becomes mentioned_at (naive = UTC); created_at is when it was written."""
        before = datetime.now(UTC)
        past = datetime(2020, 5, 1, 12, 0, tzinfo=timezone(timedelta(hours=2)))
        await backend.retain(
            "bank",
            [
                RetainItem("aware", timestamp=past),
                RetainItem("naive", timestamp=datetime(2021, 1, 1)),
                RetainItem("none"),
            ],
        )
        aware, naive, none = await backend.all_units("bank")
        assert aware.mentioned_at == past
        assert naive.mentioned_at == datetime(2021, 1, 1, tzinfo=UTC)
        assert all(unit.created_at >= before for unit in (aware, naive, none))
        assert none.mentioned_at == none.created_at

    async def test_created_at_strictly_increases_in_write_order(self, backend: EmbeddedBackend) -> None:
        """Within a bank every unit gets a later created_at than the one written before it."""
        for batch in range(5):
            await backend.retain("bank", _items(*(f"batch {batch} item {i}" for i in range(20))))
        units = await backend.all_units("bank")
        assert [unit.text for unit in units] == [f"batch {b} item {i}" for b in range(5) for i in range(20)]
        stamps = [unit.created_at for unit in units]
        assert all(earlier < later for earlier, later in itertools.pairwise(stamps))

    async def test_identical_document_updates_tags_and_metadata_in_place(
        self, backend: EmbeddedBackend
    ) -> None:
        """Re-retaining a document with identical content keeps the unit and refreshes tags/metadata."""
        await backend.retain("bank", [RetainItem("card", document_id="d", tags=("a",), metadata={"v": "1"})])
        [before] = await backend.all_units("bank")
        await backend.retain("bank", [RetainItem("card", document_id="d", tags=("b",), metadata={"v": "2"})])
        [after] = await backend.all_units("bank")
        assert (after.id, after.created_at) == (before.id, before.created_at)
        assert (after.tags, after.metadata) == (("b",), {"v": "2"})

    async def test_changed_document_replaces_only_its_own_units(self, backend: EmbeddedBackend) -> None:
        """New content under an existing document id replaces that document's unit and nothing else."""
        await backend.retain(
            "bank", [RetainItem("old", document_id="d"), RetainItem("keep", document_id="k")]
        )
        await backend.retain("other", [RetainItem("old", document_id="d")])
        await backend.retain("bank", [RetainItem("new", document_id="d")])
        assert [unit.text for unit in await backend.all_units("bank")] == ["keep", "new"]
        assert [unit.text for unit in await backend.all_units("other")] == ["old"]
        assert await backend.recall("bank", "old") == []

    async def test_empty_batch_does_not_create_the_bank(self, backend: EmbeddedBackend) -> None:
        """Retaining nothing reports zero items and leaves the bank unknown."""
        result = await backend.retain("bank", [])
        assert result.items_count == 0
        assert (await backend.activity(["bank"]))["bank"].exists is False


class TestTagsMatch:
    @pytest.mark.parametrize(
        ("tags", "mode", "expected"),
        [
            (["a"], "any", {"untagged", "a", "a+b"}),
            (["a", "c"], "any", {"untagged", "a", "a+b", "c"}),
            (["a"], "any_strict", {"a", "a+b"}),
            (["a", "b"], "all", {"untagged", "a+b"}),
            (["a", "b"], "all_strict", {"a+b"}),
            (["a"], "exact", {"a"}),
            (["b", "a"], "exact", {"a+b"}),
            ([], "exact", {"untagged"}),
            ([], "any_strict", {"untagged", "a", "b", "a+b", "c"}),
            (None, "all", {"untagged", "a", "b", "a+b", "c"}),
        ],
    )
    async def test_modes_follow_hindsight(
        self, backend: EmbeddedBackend, tags: list[str] | None, mode: Any, expected: set[str]
    ) -> None:
        """any/all include untagged units, the strict modes do not, exact compares tag sets."""
        await backend.retain(
            "bank",
            [
                RetainItem("memo untagged"),
                RetainItem("memo a", tags=("a",)),
                RetainItem("memo b", tags=("b",)),
                RetainItem("memo a+b", tags=("a", "b")),
                RetainItem("memo c", tags=("c",)),
            ],
        )
        hits = await backend.recall("bank", "memo", tags=tags, tags_match=mode)
        assert {hit.text.removeprefix("memo ") for hit in hits} == expected

    async def test_list_units_since_excludes_any_excluded_tag(self, backend: EmbeddedBackend) -> None:
        """A unit carrying any excluded tag is left out; untagged units stay."""
        await backend.retain(
            "bank",
            [
                RetainItem("plain"),
                RetainItem("card", tags=("rollup", "src:x")),
                RetainItem("x", tags=("src:x",)),
            ],
        )
        units = await backend.list_units_since("bank", None, exclude_tags=("rollup",))
        assert [unit.text for unit in units] == ["plain", "x"]


class TestReflect:
    async def test_matching_query_is_based_on_the_best_hits(self, backend: EmbeddedBackend) -> None:
        """Reflect answers with the recall hits for the query, as bullet lines, without an LLM."""
        await backend.retain("bank", _items("Alice prefers Python", "Bob likes hiking"))
        result = await backend.reflect("bank", "python")
        assert result.text == "- Alice prefers Python"
        assert [unit.text for unit in result.based_on] == ["Alice prefers Python"]
        assert result.used_llm is False and result.structured is None

    async def test_unmatched_query_falls_back_to_the_most_recent_units(
        self, backend: EmbeddedBackend
    ) -> None:
        """A query matching nothing is answered from the newest units, newest first."""
        await backend.retain("bank", _items("first"))
        await backend.retain("bank", _items("second"))
        result = await backend.reflect("bank", "Summarise durable knowledge!")
        assert [unit.text for unit in result.based_on] == ["second", "first"]
        assert result.text == "- second\n- first"

    async def test_card_schema_is_filled_with_one_card_per_unit(self, backend: EmbeddedBackend) -> None:
        """A pydantic-made list-of-cards schema ($ref, extra required field) is filled and validates."""

        class Card(BaseModel):
            text: str
            kind: str
            source_ids: list[str]
            confidence: float

        class Cards(BaseModel):
            title: str
            cards: list[Card]

        await backend.retain("bank", _items("Alice prefers Python", "Bob likes hiking"))
        schema = Cards.model_json_schema()
        result = await backend.reflect("bank", "zzz nothing matches", response_schema=schema)
        assert result.structured is not None and result.structured_error is None
        jsonschema.validate(result.structured, schema)
        cards = result.structured["cards"]
        assert [(card["text"], card["kind"], card["source_ids"]) for card in cards] == [
            (unit.text, "fact", [unit.id]) for unit in result.based_on
        ]

    async def test_other_schemas_get_a_structured_error(self, backend: EmbeddedBackend) -> None:
        """A schema that is not a list of cards yields no structured output and says why."""
        await backend.retain("bank", _items("Alice prefers Python"))
        result = await backend.reflect(
            "bank",
            "python",
            response_schema={"type": "object", "properties": {"summary": {"type": "string"}}},
        )
        assert result.structured is None and result.structured_error
        assert result.text == "- Alice prefers Python"

    async def test_unknown_bank_gives_an_empty_answer(self, backend: EmbeddedBackend) -> None:
        """Reflecting on a bank that does not exist answers nothing rather than failing."""
        result = await backend.reflect("nobody", "anything")
        assert (result.text, result.based_on) == ("", ())


class TestActivity:
    async def test_many_banks_in_one_call(self, backend: EmbeddedBackend) -> None:
        """Known banks report counts and the newest created_at; unknown ones exists=False."""
        await backend.retain("one", _items("a", "b"))
        await backend.retain("two", _items("c"))
        activity = await backend.activity(["one", "two", "missing", "one"])
        assert set(activity) == {"one", "two", "missing"}
        assert (activity["one"].unit_count, activity["two"].unit_count) == (2, 1)
        assert activity["one"].last_write_at == (await backend.all_units("one"))[-1].created_at
        assert (activity["missing"].exists, activity["missing"].unit_count) == (False, 0)
        assert activity["missing"].last_write_at is None


WRITER = """
import sys
from pathlib import Path

import anyio

from dreamer.backends.base import RetainItem
from dreamer.backends.embedded.backend import EmbeddedBackend
from dreamer.backends.embedded.schema import SCHEMA_VERSION


async def main(path: str, bank: str, name: str, batches: int, size: int) -> None:
    store = await EmbeddedBackend.open(Path(path))
    try:
        for batch in range(batches):
            items = [RetainItem(f"{name} batch {batch} item {i}", tags=(name,)) for i in range(size)]
            await store.retain(bank, items)
    finally:
        await store.aclose()


anyio.run(main, sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))
"""


async def _run_writer(path: Path, bank: str, name: str, batches: int, size: int) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    result = await anyio.run_process(
        [sys.executable, "-c", WRITER, str(path), bank, name, str(batches), str(size)],
        env=env,
        check=False,
    )
    assert result.returncode == 0, result.stderr.decode()


class TestSharedFile:
    async def test_readers_see_whole_batches_while_another_process_writes(self, tmp_path: Path) -> None:
        """Concurrent readers (two instances, several tasks) only ever see complete batches, in order."""
        path = tmp_path / "memory.sqlite3"
        batches, size = 25, 4
        reader_a = await EmbeddedBackend.open(path)
        reader_b = EmbeddedBackend(path)
        snapshots: list[list[str]] = []
        done = anyio.Event()

        async def read(store: EmbeddedBackend) -> None:
            while True:
                finished = done.is_set()
                units = await store.list_units_since("bank", None)
                snapshots.append([unit.text for unit in units])
                await store.activity(["bank"])
                await store.recall("bank", "batch item")
                if finished:
                    return

        async def write() -> None:
            await _run_writer(path, "bank", "w", batches, size)
            done.set()

        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(write)
                for store in (reader_a, reader_a, reader_b):
                    tg.start_soon(read, store)
            final = [unit.text for unit in await reader_a.all_units("bank")]
        finally:
            await reader_a.aclose()
            await reader_b.aclose()

        assert final == [f"w batch {b} item {i}" for b in range(batches) for i in range(size)]
        assert all(len(seen) % size == 0 and seen == final[: len(seen)] for seen in snapshots)

    async def test_two_writer_processes_lose_nothing_and_keep_order(self, tmp_path: Path) -> None:
        """Two processes writing the same bank both succeed; created_at strictly increases across them."""
        path = tmp_path / "memory.sqlite3"
        async with anyio.create_task_group() as tg:
            tg.start_soon(_run_writer, path, "bank", "daemon", 15, 3)
            tg.start_soon(_run_writer, path, "bank", "cli", 15, 3)
        store = await EmbeddedBackend.open(path)
        try:
            units = await store.all_units("bank")
        finally:
            await store.aclose()
        assert len(units) == 90
        for name in ("daemon", "cli"):
            mine = [unit.text for unit in units if unit.tags == (name,)]
            assert mine == [f"{name} batch {b} item {i}" for b in range(15) for i in range(3)]
        stamps = [unit.created_at for unit in units]
        assert all(earlier < later for earlier, later in itertools.pairwise(stamps))


class TestRecallLimits:
    async def test_max_tokens_trims_but_keeps_the_best_hit(self, backend: EmbeddedBackend) -> None:
        """Hits stop before the one that would exceed max_tokens, yet the best hit always comes back."""
        await backend.retain("bank", _items("needle " + "x" * 4000, "needle short", "needle tiny"))
        everything = await backend.recall("bank", "needle", max_tokens=100_000)
        assert [hit.text[:12] for hit in everything] == ["needle tiny", "needle short", "needle xxxxx"]
        assert await backend.recall("bank", "needle", max_tokens=10) == everything[:2]
        assert await backend.recall("bank", "needle", max_tokens=1) == everything[:1]

    async def test_limit_and_types_filter_hits(self, backend: EmbeddedBackend) -> None:
        """limit caps the hit count; types keeps only the listed fact types (all units are "world")."""
        await backend.retain("bank", _items("needle one", "needle two", "needle three"))
        assert len(await backend.recall("bank", "needle", limit=2)) == 2
        assert await backend.recall("bank", "needle", limit=0) == []
        assert await backend.recall("bank", "needle", types=["observation"]) == []
        assert len(await backend.recall("bank", "needle", types=["world"])) == 3


# The store schema as version 1 wrote it (one rowid sequence for all banks), kept verbatim so the
# upgrade is tested against real old files rather than against whatever the current code creates.
V1_SCHEMA = """
PRAGMA journal_mode = WAL;
CREATE TABLE IF NOT EXISTS banks (
    bank_id       TEXT PRIMARY KEY,
    created_at    TEXT NOT NULL,
    last_write_at TEXT
);
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
PRAGMA user_version = 1;
"""

# The search version 1 ran: match in the shared index, then filter by bank.
UNSCOPED_SEARCH = """
SELECT u.id, bm25(units_fts) AS rank
FROM units_fts JOIN units u ON u.seq = units_fts.rowid
WHERE units_fts MATCH ? AND u.bank_id = ?
ORDER BY rank, u.created_at DESC, u.id
"""

V1_BANKS = {
    "profile-a": [f"host atlas runs nginx on port {8000 + i}, backup job {i} nightly" for i in range(12)],
    "profile-b": [f"the backup of host vega goes to restic repository {i}" for i in range(7)],
    "global": ["nginx serves every host", "restic backs up atlas and vega", "unrelated gardening note"],
}
QUERIES = ["nginx host", "backup restic vega", "atlas port 8003", "gardening", "nothing matches this"]


def _write_v1_store(path: Path, *, first_seq: int | None = None) -> None:
    """A version-1 store written with raw SQL, banks interleaved as concurrent profiles would be."""
    start = datetime(2024, 1, 1, tzinfo=UTC)
    with sqlite3.connect(path, isolation_level=None) as raw:
        raw.executescript(V1_SCHEMA)
        raw.execute("BEGIN")
        for number, bank in enumerate(V1_BANKS):
            created = (start + timedelta(minutes=number)).isoformat(timespec="microseconds")
            raw.execute("INSERT INTO banks VALUES (?, ?, NULL)", (bank, created))
        rows = [(index, bank, text) for bank, texts in V1_BANKS.items() for index, text in enumerate(texts)]
        rows.sort(key=lambda row: (row[0], row[1]))
        for step, (index, bank, text) in enumerate(rows):
            seq = None if first_seq is None or step > 0 else first_seq
            created = (start + timedelta(hours=1, microseconds=step)).isoformat(timespec="microseconds")
            raw.execute(
                "INSERT INTO units (seq, id, bank_id, text, document_id, tags, metadata, created_at,"
                " mentioned_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    seq,
                    f"{bank}-{index}",
                    bank,
                    text,
                    f"doc-{bank}-{index}",
                    '["t"]',
                    '{"k": "v"}',
                    created,
                    created,
                ),
            )
            raw.execute("UPDATE banks SET last_write_at = ? WHERE bank_id = ?", (created, bank))
        raw.execute("COMMIT")


def _unscoped_hits(path: Path) -> dict[tuple[str, str], list[tuple[str, float]]]:
    """Every bank's hits for QUERIES by the unscoped search, as (id, score) best first."""
    with sqlite3.connect(path) as raw:
        hits: dict[tuple[str, str], list[tuple[str, float]]] = {}
        for bank in V1_BANKS:
            for query in QUERIES:
                match = fts_match_expression(query)
                rows = raw.execute(UNSCOPED_SEARCH, (match, bank)).fetchall()
                hits[bank, query] = [(unit_id, bm25_to_score(rank)) for unit_id, rank in rows]
        return hits


async def _recalled(store: EmbeddedBackend) -> dict[tuple[str, str], list[tuple[str, float]]]:
    return {
        (bank, query): [(hit.id, hit.score) for hit in await store.recall(bank, query, max_tokens=10**9)]
        for bank in V1_BANKS
        for query in QUERIES
    }


def _raw_dump(path: Path) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]], int]:
    """Units and banks exactly as stored, and the schema version."""
    with sqlite3.connect(path) as raw:
        units = raw.execute("SELECT * FROM units ORDER BY seq").fetchall()
        banks = raw.execute("SELECT * FROM banks ORDER BY bank_id").fetchall()
        return units, banks, int(raw.execute("PRAGMA user_version").fetchone()[0])


async def _vm_steps(store: EmbeddedBackend, bank: str, query: str) -> int:
    """SQLite virtual-machine steps one recall takes on the backend's own connection."""
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
        await store.recall(bank, query)
    finally:
        await store._call("unwatch", unwatch)
    return steps


class TestBankScopedRecall:
    async def test_recall_equals_the_unscoped_search_item_for_item(self, backend: EmbeddedBackend) -> None:
        """Items, order and scores are exactly those of matching the whole index and filtering by bank."""
        for index in range(12):
            for bank, texts in V1_BANKS.items():
                if index < len(texts):
                    await backend.retain(bank, [RetainItem(texts[index])])
        expected = _unscoped_hits(backend.path)
        assert any(len(hits) > 1 for hits in expected.values())
        assert await _recalled(backend) == expected

    async def test_recall_work_does_not_grow_with_other_banks(self, tmp_path: Path) -> None:
        """1,980 more matching units in another bank add fewer than 1,980 SQLite steps to a recall."""
        steps = []
        for other_size in (20, 2000):
            store = await EmbeddedBackend.open(tmp_path / f"store-{other_size}.sqlite3")
            try:
                await store.retain("global", _items("nginx serves every host", "restic backs up hosts"))
                await store.retain(
                    "profile", _items(*(f"host {i} runs nginx and restic" for i in range(other_size)))
                )
                steps.append(await _vm_steps(store, "global", "host nginx restic"))
                assert len(await store.recall("global", "host nginx restic")) == 2
            finally:
                await store.aclose()
        # Matching then filtering took several steps per unit of every bank; what remains is BM25
        # counting each term's rows in the whole index, a few steps per index page, not per unit.
        assert steps[1] - steps[0] < 2000 - 20

    async def test_a_unit_outside_its_bank_key_range_is_refused(self, backend: EmbeddedBackend) -> None:
        """An insert without a bank-scoped key, as older code would write it, aborts and changes nothing."""
        await backend.retain("first", _items("alpha"))
        await backend.retain("second", _items("beta"))
        before = _raw_dump(backend.path)
        with sqlite3.connect(backend.path) as raw, pytest.raises(sqlite3.IntegrityError, match="restart"):
            raw.execute(
                "INSERT INTO units (id, bank_id, text, created_at) VALUES ('x', 'first', 'gamma', '2024')"
            )
        assert _raw_dump(backend.path) == before
        assert [hit.text for hit in await backend.recall("first", "alpha gamma")] == ["alpha"]


class TestSchemaUpgrade:
    async def test_a_version_1_store_is_upgraded_and_recalls_as_before(self, tmp_path: Path) -> None:
        """Opening a version-1 file keeps every unit and field; recall returns the same hits and scores."""
        path = tmp_path / "memory.sqlite3"
        _write_v1_store(path)
        expected = _unscoped_hits(path)
        old_units, _, _ = _raw_dump(path)
        store = await EmbeddedBackend.open(path)
        try:
            units, banks, version = _raw_dump(path)
            assert version == SCHEMA_VERSION
            assert sorted(unit[1:] for unit in units) == sorted(unit[1:] for unit in old_units)
            assert [bank[3] for bank in sorted(banks, key=lambda bank: bank[1])] == [1, 2, 3]
            assert await _recalled(store) == expected
            listed = await store.all_units("profile-a")
            assert [unit.id for unit in listed] == [f"profile-a-{i}" for i in range(12)]
            assert listed[0].tags == ("t",) and listed[0].metadata == {"k": "v"}

            await store.retain("global", _items("nginx proxies the new host"))
            await store.retain("new-bank", _items("nginx on a brand new bank"))
            assert (await store.recall("global", "proxies"))[0].text == "nginx proxies the new host"
            assert [hit.text for hit in await store.recall("new-bank", "nginx")] == [
                "nginx on a brand new bank"
            ]
            assert (await store.activity(["global"]))["global"].unit_count == 4
        finally:
            await store.aclose()

    async def test_version_1_keys_above_the_key_range_are_renumbered(self, tmp_path: Path) -> None:
        """Old keys as large as the new bank-scoped ones still upgrade without a collision or a loss."""
        path = tmp_path / "memory.sqlite3"
        _write_v1_store(path, first_seq=(2 << 40) + 1)
        expected = _unscoped_hits(path)
        store = await EmbeddedBackend.open(path)
        try:
            assert await store.count_units("profile-a") == 12
            assert await _recalled(store) == expected
        finally:
            await store.aclose()

    async def test_a_failed_upgrade_leaves_the_version_1_store_untouched(self, tmp_path: Path) -> None:
        """When the upgrade fails midway nothing of it is kept; once the cause is gone it succeeds."""
        path = tmp_path / "memory.sqlite3"
        _write_v1_store(path)
        expected = _unscoped_hits(path)
        with sqlite3.connect(path) as raw:
            raw.execute(
                "CREATE TRIGGER refuse_renumbering BEFORE UPDATE OF seq ON units"
                " BEGIN SELECT RAISE(ABORT, 'renumbering refused'); END"
            )
        before = _raw_dump(path)
        with pytest.raises(PermanentBackendError, match="renumbering refused"):
            await EmbeddedBackend.open(path)
        assert _raw_dump(path) == before
        assert _unscoped_hits(path) == expected

        with sqlite3.connect(path) as raw:
            raw.execute("DROP TRIGGER refuse_renumbering")
        store = await EmbeddedBackend.open(path)
        try:
            assert await _recalled(store) == expected
        finally:
            await store.aclose()

    async def test_concurrent_openers_upgrade_the_file_once(self, tmp_path: Path) -> None:
        """Two backends opening a version-1 file while its write lock is held both end on the current one."""
        path = tmp_path / "memory.sqlite3"
        _write_v1_store(path)
        expected = _unscoped_hits(path)
        raw = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        raw.execute("BEGIN IMMEDIATE")
        stores: list[EmbeddedBackend] = []

        async def open_one() -> None:
            stores.append(await EmbeddedBackend.open(path))

        async def release_later() -> None:
            await anyio.sleep(0.3)
            raw.execute("COMMIT")

        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(open_one)
                tg.start_soon(open_one)
                tg.start_soon(release_later)
            assert _raw_dump(path)[2] == SCHEMA_VERSION
            for store in stores:
                assert await _recalled(store) == expected
        finally:
            raw.close()
            for store in stores:
                await store.aclose()
