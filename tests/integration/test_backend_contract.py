"""The MemoryBackend contract, run against every backend: embedded (SQLite) and a real Hindsight.

One suite, so both backends answer the same questions the same way. A real Hindsight extracts facts
with an LLM (here the deterministic stub in ``tests/llmstub``) and consolidates them into
observations in the background, so one retained item may become several units: the assertions say
"at least one unit whose text contains X" and compare timestamps of ``world`` facts only (the
observations consolidation keeps rewriting are not stable between two reads).

The Hindsight cases need ``DREAMER_TEST_HINDSIGHT_URL`` (and ``DREAMER_TEST_HINDSIGHT_API_KEY``);
``scripts/hindsight-dev up`` starts one and prints both.
"""

from __future__ import annotations

import functools
import importlib
import os
import uuid
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from dreamer.backends.base import MemoryBackend, MemoryUnit, RetainItem, RetainResult
from dreamer.backends.hindsight.backend import HindsightBackend
from dreamer.config import HindsightBackendConfig
from dreamer.errors import PermanentBackendError
from dreamer.retry import RetryPolicy, call_with_retry
from dreamer.rollup.cards import CARD_KINDS, CARDS_SCHEMA
from tests.hindsight_fixtures import HINDSIGHT_API_KEY_VAR, HINDSIGHT_URL_VAR, required_env

#: Other test sessions may share the test server, and its admission control can then answer a retain
#: with 503 + Retry-After; the daemon retries those, and so do these tests.
SHARED_SERVER_RETRY = RetryPolicy(max_attempts=20, base_delay_s=0.5, max_delay_s=5.0, retry_after_cap_s=5.0)


class SharedServerHindsight(HindsightBackend):
    """The Hindsight backend with retains retried the way the daemon retries them."""

    async def retain(self, bank_id: str, items: Sequence[RetainItem]) -> RetainResult:
        async def once() -> RetainResult:
            return await HindsightBackend.retain(self, bank_id, items)

        return await call_with_retry("retain", once, SHARED_SERVER_RETRY)


class Backends:
    """Makes backends of one kind that all see the same store, and closes them afterwards."""

    def __init__(self, kind: str, tmp_path: Path) -> None:
        self.kind = kind
        self.tmp_path = tmp_path
        self.opened: list[MemoryBackend] = []

    def make(self, *, page_size: int | None = None) -> MemoryBackend:
        """A new backend; ``page_size`` sets Hindsight's list page (the embedded store has none)."""
        backend: MemoryBackend
        if self.kind in ("embedded", "embedded-hybrid"):
            try:
                embedded = importlib.import_module("dreamer.backends.embedded.backend")
            except ImportError as exc:
                pytest.skip(f"the embedded backend is not available yet: {exc}")
            embedder = _local_embedder() if self.kind == "embedded-hybrid" else None
            backend = embedded.EmbeddedBackend(self.tmp_path / "memory.sqlite3", embedder=embedder)
        else:
            url = required_env(HINDSIGHT_URL_VAR)
            key = os.environ.get(HINDSIGHT_API_KEY_VAR)
            config = HindsightBackendConfig(
                url=url,
                api_key=SecretStr(key) if key else None,
                page_size=page_size or 100,
                read_timeout_s=120.0,
                reflect_timeout_s=300.0,
            )
            backend = SharedServerHindsight(config)
        self.opened.append(backend)
        return backend

    async def aclose(self) -> None:
        for backend in self.opened:
            await backend.aclose()


@functools.cache
def _local_embedder() -> Any:
    """The in-process model, loaded once: the embedded store's hybrid recall keeps the contract too."""
    pytest.importorskip("tokenizers")
    pytest.importorskip("safetensors")
    from dreamer.embeddings.local import LocalEmbedder

    try:
        return LocalEmbedder()
    except ImportError as exc:  # pragma: no cover - CI installs the model package
        pytest.skip(str(exc))


@pytest.fixture(
    params=[
        "embedded",
        "embedded-hybrid",
        pytest.param("hindsight", marks=[pytest.mark.hindsight, pytest.mark.slow]),
    ]
)
async def backends(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backends]:
    made = Backends(request.param, tmp_path)
    try:
        yield made
    finally:
        await made.aclose()


@pytest.fixture
def backend(backends: Backends) -> MemoryBackend:
    return backends.make()


@pytest.fixture
def bank() -> str:
    """A bank id no earlier run has used (a real server keeps every bank: nothing is ever deleted)."""
    return f"contract-{uuid.uuid4().hex[:16]}"


def token() -> str:
    """A word that occurs nowhere else, to find what one test wrote."""
    return "zq" + uuid.uuid4().hex[:10]


async def world_units(
    backend: MemoryBackend, bank_id: str, since: datetime | None = None
) -> list[MemoryUnit]:
    return await backend.list_units_since(bank_id, since, fact_types=["world"])


def of_document(units: Sequence[MemoryUnit], document_id: str) -> list[MemoryUnit]:
    return [u for u in units if u.document_id == document_id]


class TestRetainCreatesBanks:
    async def test_first_retain_creates_the_bank(self, backend: MemoryBackend, bank: str) -> None:
        """An unknown bank exists after one retain, holding at least one unit of that document."""
        marker = token()
        assert not (await backend.activity([bank]))[bank].exists
        result = await backend.retain(
            bank, [RetainItem(content=f"Quentin keeps a {marker} notebook.", document_id="doc-1")]
        )
        assert (result.bank_id, result.items_count) == (bank, 1)
        activity = (await backend.activity([bank]))[bank]
        assert activity.exists and activity.unit_count >= 1 and activity.last_write_at is not None
        units = of_document(await backend.list_units_since(bank, None), "doc-1")
        assert any(marker in u.text for u in units)
        assert all(u.bank_id == bank for u in units)

    async def test_empty_batch_creates_nothing(self, backend: MemoryBackend, bank: str) -> None:
        """Retaining no items stores nothing and leaves the bank unknown."""
        assert (await backend.retain(bank, [])).items_count == 0
        assert not (await backend.activity([bank]))[bank].exists


class TestIdempotentRetain:
    async def test_same_document_same_content_is_a_no_op(self, backend: MemoryBackend, bank: str) -> None:
        """Resending a document with identical content keeps exactly the same unit ids."""
        item = RetainItem(
            content=f"Quentin repairs {token()} clocks. He works in Lyon.",
            document_id="card-abc",
            tags=("src:research",),
            metadata={"card_id": "abc"},
        )
        await backend.retain(bank, [item])
        first = of_document(await world_units(backend, bank), "card-abc")
        await backend.retain(bank, [item])
        second = of_document(await world_units(backend, bank), "card-abc")
        assert first and sorted(u.id for u in first) == sorted(u.id for u in second)
        assert all(u.tags == ("src:research",) and dict(u.metadata) == {"card_id": "abc"} for u in second)


class TestTags:
    async def test_recall_filters_by_tags(self, backend: MemoryBackend, bank: str) -> None:
        """any_strict keeps only tagged matches, any adds untagged ones, all_strict needs every tag."""
        word = token()
        await backend.retain(
            bank,
            [
                RetainItem(
                    content=f"The {word} alpha report is ready.", tags=("topic:alpha",), document_id="a"
                ),
                RetainItem(content=f"The {word} beta report is late.", tags=("topic:beta",), document_id="b"),
                RetainItem(content=f"The {word} plain report is lost.", document_id="c"),
            ],
        )
        strict = await backend.recall(bank, f"{word} report", tags=["topic:alpha"], tags_match="any_strict")
        assert strict and all("topic:alpha" in hit.tags for hit in strict)
        assert any("alpha" in hit.text for hit in strict)
        loose = await backend.recall(bank, f"{word} report", tags=["topic:alpha"], tags_match="any")
        assert all(not hit.tags or "topic:alpha" in hit.tags for hit in loose)
        assert any(not hit.tags for hit in loose)
        both = await backend.recall(
            bank, f"{word} report", tags=["topic:alpha", "topic:beta"], tags_match="all_strict"
        )
        assert both == []
        everything = await backend.recall(bank, f"{word} report")
        assert {"alpha", "beta", "plain"} <= {w for hit in everything for w in hit.text.split()}
        assert all(0.0 <= hit.score <= 1.0 for hit in everything)
        assert all(hit.semantic is None or 0.0 <= hit.semantic <= 1.0 for hit in everything)

    async def test_recall_limit(self, backend: MemoryBackend, bank: str) -> None:
        """limit caps the number of hits, best first."""
        word = token()
        await backend.retain(bank, [RetainItem(content=f"{word} number {i} is noted.") for i in range(4)])
        # Not compared with an unlimited recall hit by hit: Hindsight consolidates in the background,
        # so observations can join the ranking between two calls.
        assert len(await backend.recall(bank, word)) > 2
        limited = await backend.recall(bank, word, limit=2)
        assert len(limited) == 2 and limited[0].score >= limited[1].score


class TestActivity:
    async def test_count_grows_and_last_write_moves(self, backend: MemoryBackend, bank: str) -> None:
        """A later retain raises unit_count and moves last_write_at forward."""
        await backend.retain(bank, [RetainItem(content=f"Quentin met {token()} on Monday.")])
        before = (await backend.activity([bank]))[bank]
        await backend.retain(bank, [RetainItem(content=f"Quentin called {token()} on Tuesday.")])
        after = (await backend.activity([bank, f"{bank}-none"]))[bank]
        assert after.unit_count > before.unit_count
        assert before.last_write_at is not None and after.last_write_at is not None
        assert after.last_write_at > before.last_write_at

    async def test_many_banks_in_one_call(self, backends: Backends, bank: str) -> None:
        """activity answers for every bank asked, walking the server's bank list in small pages."""
        backend = backends.make(page_size=10)
        others = [f"{bank}-{i}" for i in range(3)]
        for other in others[:2]:
            await backend.retain(other, [RetainItem(content=f"Quentin likes {token()}.")])
        result = await backend.activity(others)
        assert [result[b].exists for b in others] == [True, True, False]


class TestListSince:
    async def _two_batches(self, backend: MemoryBackend, bank: str) -> None:
        await backend.retain(
            bank,
            [
                RetainItem(content=f"Quentin owns {token()} boats. The boats are red.", document_id="d1"),
                RetainItem(content=f"Quentin sails on {token()} lake.", document_id="d2"),
            ],
        )
        await backend.retain(
            bank,
            [
                RetainItem(content=f"Quentin sold {token()} boats. He kept one.", document_id="d3"),
                RetainItem(content=f"Quentin bought {token()} sails.", document_id="d4"),
            ],
        )

    async def test_since_is_inclusive_and_ordered(self, backend: MemoryBackend, bank: str) -> None:
        """For every stored timestamp t, listing since t gives exactly the units at or after t, in order."""
        await self._two_batches(backend, bank)
        everything = await world_units(backend, bank)
        assert len(everything) >= 4
        assert [(u.created_at, u.id) for u in everything] == sorted((u.created_at, u.id) for u in everything)
        for moment in sorted({u.created_at for u in everything}):
            listed = await world_units(backend, bank, moment)
            assert [u.id for u in listed] == [u.id for u in everything if u.created_at >= moment]

    async def test_pages_add_up_to_the_whole(self, backends: Backends, bank: str) -> None:
        """Listing in pages of two (ties included) gives the same units as one big page."""
        await self._two_batches(backends.make(), bank)
        whole = await world_units(backends.make(page_size=100), bank)
        paged = await world_units(backends.make(page_size=2), bank)
        assert len(whole) >= 4 and [u.id for u in paged] == [u.id for u in whole]

    async def test_exclude_tags(self, backend: MemoryBackend, bank: str) -> None:
        """Units carrying an excluded tag are left out."""
        await backend.retain(
            bank,
            [
                RetainItem(content=f"Quentin wrote {token()} cards.", tags=("rollup",), document_id="r"),
                RetainItem(content=f"Quentin read {token()} books.", tags=("src:research",), document_id="s"),
            ],
        )
        units = await backend.list_units_since(bank, None, exclude_tags=["rollup"])
        assert units and all("rollup" not in u.tags for u in units)
        assert of_document(units, "s") and not of_document(units, "r")

    async def test_future_since_is_empty(self, backend: MemoryBackend, bank: str) -> None:
        """Nothing was written after now."""
        await backend.retain(bank, [RetainItem(content=f"Quentin naps {token()}.")])
        assert await backend.list_units_since(bank, datetime(2100, 1, 1, tzinfo=UTC)) == []


class TestContent:
    async def test_unicode_round_trips(self, backend: MemoryBackend, bank: str) -> None:
        """Non-ASCII text, tags and metadata come back unchanged."""
        marker = token()
        await backend.retain(
            bank,
            [
                RetainItem(
                    content=f"Zoë flew from Zürich to 東京 with {marker} — naïve café ☕ 🚀.",
                    tags=("ort:zürich",),
                    metadata={"note": "überprüft ✓"},
                    document_id="unicode-ü",
                )
            ],
        )
        units = of_document(await world_units(backend, bank), "unicode-ü")
        assert any("東京" in u.text and "Zürich" in u.text and marker in u.text for u in units)
        assert all(u.tags == ("ort:zürich",) and dict(u.metadata) == {"note": "überprüft ✓"} for u in units)

    async def test_fifty_kilobyte_text(self, backend: MemoryBackend, bank: str) -> None:
        """A 50 KB item is stored; its text is findable afterwards."""
        marker = token()
        filler = " ".join(f"word{i}" for i in range(150))
        content = " ".join(f"Section {n} about {marker} says {filler}." for n in range(60))
        assert len(content.encode()) >= 50_000
        await backend.retain(bank, [RetainItem(content=content, document_id="big")])
        units = of_document(await world_units(backend, bank), "big")
        assert units and any(marker in u.text for u in units)

    async def test_metadata_must_be_strings(self, backend: MemoryBackend, bank: str) -> None:
        """A non-string metadata value is a PermanentBackendError and nothing is stored."""
        bad: Any = {"count": 3}
        with pytest.raises(PermanentBackendError):
            await backend.retain(bank, [RetainItem(content=f"Quentin counts {token()}.", metadata=bad)])
        assert not (await backend.activity([bank]))[bank].exists


class TestUnknownBank:
    async def test_reads_are_empty_not_errors(self, backend: MemoryBackend, bank: str) -> None:
        """Activity, list, recall and reflect on an unknown bank answer empty, and create nothing."""
        assert not (await backend.activity([bank]))[bank].exists
        assert await backend.list_units_since(bank, None) == []
        assert await backend.recall(bank, "anything at all") == []
        reflected = await backend.reflect(bank, "What do you know?")
        assert reflected.based_on == ()
        assert not (await backend.activity([bank]))[bank].exists


class TestReflect:
    async def test_cards_schema_gives_cards_with_source_ids(self, backend: MemoryBackend, bank: str) -> None:
        """Reflect with the roll-up's cards schema returns cards whose source ids are stored units."""
        word = token()
        await backend.retain(
            bank,
            [
                RetainItem(content=f"Quentin maintains the {word} server. It runs Debian.", document_id="x"),
                RetainItem(content=f"Quentin backs up the {word} server nightly.", document_id="y"),
            ],
        )
        result = await backend.reflect(
            bank, f"What do we know about the {word} server?", response_schema=CARDS_SCHEMA
        )
        assert result.used_llm == backend.reflect_uses_llm
        assert result.structured is not None, result.structured_error
        cards = result.structured["cards"]
        assert isinstance(cards, list) and cards
        known = {u.id for u in await backend.list_units_since(bank, None)}
        for card in cards:
            assert isinstance(card["text"], str) and card["text"]
            assert card["kind"] in CARD_KINDS
            assert set(card["source_ids"]) <= known
        assert any(card["source_ids"] for card in cards)
        assert result.based_on and {b.id for b in result.based_on} <= known
