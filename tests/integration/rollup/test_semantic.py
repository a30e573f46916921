"""Semantic dedup end to end, on the embedded store and on the real Hindsight test server: the
embedder's cosine reinforces a paraphrase, a changed value stays a conflict, an embeddings server
that is down defers the run, and a model change re-embeds without mixing vectors.

The embedder is the openai provider talking to a real OpenAI-compatible server on 127.0.0.1
(tests/support/embeddings_server.py, the real MiniLM model); the embedded store also runs the
local provider in-process.
"""

from __future__ import annotations

import io
import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dreamer.backends import open_backend
from dreamer.backends.base import MemoryBackend, RetainItem
from dreamer.commands.status import status_command
from dreamer.config import Config
from dreamer.embeddings import segments
from dreamer.embeddings.vectors import from_blob
from dreamer.rollup.report import RollupReport
from dreamer.service.runner import run_rollups_now
from dreamer.state import StateStore
from tests.hindsight_fixtures import HINDSIGHT_API_KEY_VAR
from tests.support import configs
from tests.support.embedding_model import local_embedder
from tests.support.embeddings_server import EmbeddingsServer, serve

GRANDMA = "Maria's grandma passed away last week, causing her to go through a tough time."
GRANDMOTHER = "Maria's grandmother passed away last week."
NEXTCLOUD = "Nextcloud runs version 28.0 on host atlas behind nginx."
NEXTCLOUD_NEW = "Nextcloud runs version 29.0 on host atlas behind nginx."
OTHERS = [
    "Grafana listens on port 3000 on host hermes-mon.",
    "The user prefers answers with links to the upstream documentation.",
]


@pytest.fixture(scope="module")
def embeddings_server() -> Iterator[EmbeddingsServer]:
    with serve(local_embedder()) as running:
        yield running


@pytest.fixture(params=["embedded", "hindsight"])
def backend_kind(request: pytest.FixtureRequest) -> str:
    if request.param == "hindsight":
        request.getfixturevalue("server")  # skips without the Hindsight test server
    return str(request.param)


@pytest.fixture
def marker(backend_kind: str, request: pytest.FixtureRequest) -> str:
    return str(request.getfixturevalue("fresh_bank_id")) if backend_kind == "hindsight" else "t"


def make_config(
    tmp_path: Path,
    backend_kind: str,
    marker: str,
    embeddings: dict[str, Any],
    request: pytest.FixtureRequest,
) -> Config:
    writable = {"access": "read_write"}
    sections: dict[str, Any] = {
        "state_dir": "state",
        "slot": {"acquire_timeout_s": 5, "poll_interval_s": 0.05},
        "retry": {"max_attempts": 2, "base_delay_s": 0.01, "max_delay_s": 0.05},
        "rollup": {"use_reflect": "never", "post_consolidate": False},
        "peer_card": {"enabled": False},
        "embeddings": embeddings,
    }
    bank_id = configs.default_bank_id
    if backend_kind == "hindsight":
        url = str(request.getfixturevalue("server"))
        sections["backend"] = {
            "kind": "hindsight",
            "hindsight": {"url": url, "api_key_env": HINDSIGHT_API_KEY_VAR, "read_timeout_s": 120.0},
        }
        bank_id = lambda alias: f"{marker}-{alias}"  # noqa: E731
    data = configs.config_data(
        {"global": {}, "shared": {}, "research": writable}, ("research",), bank_id=bank_id, **sections
    )
    return configs.loaded(tmp_path, data)


def openai(server: EmbeddingsServer, model: str = "all-minilm-l6-v2", **extra: Any) -> dict[str, Any]:
    return {"provider": "openai", "url": server.url, "model": model, "timeout_s": 60.0, **extra}


def texts(marker: str, *sentences: str) -> list[str]:
    # On Hindsight every sentence carries the test's marker, as the other Hindsight tests do.
    return [s if marker == "t" else f"{s[:-1]} ({marker})." for s in sentences]


async def seed(cfg: Config, sentences: list[str]) -> None:
    backend: MemoryBackend = open_backend(cfg)
    try:
        await backend.retain(cfg.bank_id("research"), [RetainItem(content=s) for s in sentences])
    finally:
        await backend.aclose()


async def roll(cfg: Config) -> RollupReport:
    (report,) = await run_rollups_now(cfg, ["research"])
    return report


def vector_models(cfg: Config) -> list[tuple[str, int, int]]:
    with StateStore.open(cfg.state_path) as state:
        return state.vector_models()


class TestSemanticDedup:
    async def test_a_paraphrase_with_few_shared_words_reinforces(
        self,
        tmp_path: Path,
        backend_kind: str,
        marker: str,
        embeddings_server: EmbeddingsServer,
        request: pytest.FixtureRequest,
    ) -> None:
        """Promoted once, then told in other words: the embedder's cosine makes it a duplicate of
        the ledger card (the word index alone would not even find that card)."""
        cfg = make_config(tmp_path, backend_kind, marker, openai(embeddings_server), request)
        await seed(cfg, texts(marker, GRANDMA, *OTHERS))
        first = await roll(cfg)
        assert first.outcome == "promoted", first.reason
        assert first.embedder.startswith("openai all-minilm-l6-v2")
        assert vector_models(cfg) == [("openai:all-minilm-l6-v2", 384, first.promoted)]
        await seed(cfg, texts(marker, GRANDMOTHER))
        second = await roll(cfg)
        plan = {p.text: p for p in second.plan}
        (grandmother,) = [p for text, p in plan.items() if "grandmother" in text]
        assert grandmother.verdict == "duplicate", grandmother.reason
        assert grandmother.scores.get("cosine", 0) >= 0.8
        assert second.promoted == 0 and second.outcome == "reinforced", second.reason

    async def test_a_paraphrase_of_a_card_in_an_on_disk_segment_reinforces_it(
        self,
        tmp_path: Path,
        embeddings_server: EmbeddingsServer,
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        """With segments of three rows, the second run's judge turns the first run's three vectors
        into a segment under ``<state_dir>/vectors`` before it searches: the stored card is found
        through the segment (no longer in memory) and the paraphrase reinforces it, with the
        cosine the exact search gives."""
        monkeypatch.setattr(segments, "SEGMENT_ROWS", 3)
        cfg = make_config(tmp_path, "embedded", "t", openai(embeddings_server), None)  # type: ignore[arg-type]
        await seed(cfg, [GRANDMA, *OTHERS])
        assert (await roll(cfg)).promoted == 3
        assert not list(cfg.vector_index_dir.glob("*/seg-*.i8"))
        await seed(cfg, [GRANDMOTHER])
        second = await roll(cfg)
        assert [p.name for p in cfg.vector_index_dir.glob("*/seg-*.i8")] == ["seg-1-3.i8"]
        (grandmother,) = [p for p in second.plan if "grandmother" in p.text]
        assert grandmother.verdict == "duplicate", grandmother.reason
        grandma, grandmother_vector = (await local_embedder().embed([GRANDMA, GRANDMOTHER]))
        assert grandmother.scores["cosine"] == pytest.approx(float(grandma @ grandmother_vector), abs=5e-3)
        assert second.outcome == "reinforced", second.reason
        text, doc = io.StringIO(), io.StringIO()
        await status_command(cfg, as_json=False, out=text)
        await status_command(cfg, as_json=True, out=doc)
        index = json.loads(doc.getvalue())["embeddings"]["vector_index"]
        assert index == {"folder": str(cfg.vector_index_dir), "segments": 1, "vectors": 3}
        assert f"3 indexed in 1 on-disk segments ({cfg.vector_index_dir})" in text.getvalue()
        # The embedded store's recall turned the global bank's three card vectors into a segment too.
        in_store = json.loads(doc.getvalue())["embeddings"]["store_vector_index"]
        folder = cfg.embedded_path.with_name(f"{cfg.embedded_path.name}.vectors")
        assert in_store == {"folder": str(folder), "segments": 1, "vectors": 3}
        assert f"the embedded store's: 3 in 1 on-disk segments ({folder})" in text.getvalue()

    async def test_a_paraphrase_of_one_sentence_of_a_stored_card_reinforces_it(
        self,
        tmp_path: Path,
        backend_kind: str,
        marker: str,
        embeddings_server: EmbeddingsServer,
        request: pytest.FixtureRequest,
    ) -> None:
        """A stored card of two sentences, then one of them told in other words: the embedder's
        cosine with that sentence (embedded for the batch, as the card is among the nearest) makes
        it a duplicate of the card, which the whole texts' cosine would not."""
        cfg = make_config(tmp_path, backend_kind, marker, openai(embeddings_server), request)
        two = " ".join(texts(marker, GRANDMA, "Maria volunteers at a homeless shelter on weekends."))
        await seed(cfg, [two])
        first = await roll(cfg)
        assert first.outcome == "promoted" and first.promoted == 1, first.reason
        await seed(cfg, texts(marker, GRANDMOTHER))
        before = len(embeddings_server.embedding_requests())
        second = await roll(cfg)
        (grandmother,) = [p for p in second.plan if "grandmother" in p.text]
        assert grandmother.verdict == "duplicate", grandmother.reason
        assert "sentence 1 of promoted card" in grandmother.reason
        sent = [set(r["input"]) for r in embeddings_server.embedding_requests()[before:]]
        assert any(texts(marker, GRANDMA)[0] in batch for batch in sent), sent
        assert second.outcome == "reinforced", second.reason

    async def test_the_batchs_cards_are_embedded_in_one_request(
        self,
        tmp_path: Path,
        backend_kind: str,
        marker: str,
        embeddings_server: EmbeddingsServer,
        request: pytest.FixtureRequest,
    ) -> None:
        """A run sends its cards to the embeddings server in one request, each text once, with the
        sentences of a card of two: the upstream recalls (hybrid on the embedded store, one query
        per card) and the judge (which compares the sentences one at a time) find them in the
        embedder's cache instead of embedding one card per call, or the sentences at the judge's
        own embedding, where a run's memory peaks."""
        cfg = make_config(tmp_path, backend_kind, marker, openai(embeddings_server), request)
        said = texts(marker, GRANDMA, "Maria volunteers at a homeless shelter on weekends.")
        await seed(cfg, [" ".join(said), *texts(marker, NEXTCLOUD, *OTHERS)])
        before = len(embeddings_server.embedding_requests())
        report = await roll(cfg)
        assert report.outcome == "promoted", report.reason
        cards = {p.text for p in report.plan}
        assert " ".join(said) in cards, cards
        sent = [set(r["input"]) for r in embeddings_server.embedding_requests()[before:]]
        with_cards = [batch for batch in sent if batch & cards]
        assert len(cards) >= 3 and len(with_cards) == 1 and cards <= with_cards[0], (cards, sent)
        assert set(said) <= with_cards[0] and [batch for batch in sent if batch & set(said)] == with_cards

    async def test_changed_version_is_a_conflict(
        self,
        tmp_path: Path,
        backend_kind: str,
        marker: str,
        embeddings_server: EmbeddingsServer,
        request: pytest.FixtureRequest,
    ) -> None:
        """A cosine near 1 does not merge a changed version: the new card is a conflict."""
        cfg = make_config(tmp_path, backend_kind, marker, openai(embeddings_server), request)
        await seed(cfg, texts(marker, NEXTCLOUD))
        assert (await roll(cfg)).outcome == "promoted"
        await seed(cfg, texts(marker, NEXTCLOUD_NEW))
        report = await roll(cfg)
        (card,) = [p for p in report.plan if "29.0" in p.text]
        assert card.verdict == "conflict", card.reason
        assert "version" in card.changed
        assert report.promoted == 1

    async def test_server_down_defers_the_run(
        self,
        tmp_path: Path,
        backend_kind: str,
        marker: str,
        embeddings_server: EmbeddingsServer,
        request: pytest.FixtureRequest,
    ) -> None:
        """An embeddings server answering 503 after every retry defers the run: the watermark,
        the ledger and the upstream bank stay as they were; the next run, with the server back,
        promotes the cards."""
        cfg = make_config(tmp_path, backend_kind, marker, openai(embeddings_server), request)
        await seed(cfg, texts(marker, GRANDMA, *OTHERS))
        embeddings_server.fail("unavailable", retry_after="0")
        try:
            report = await roll(cfg)
        finally:
            embeddings_server.heal()
        assert report.outcome == "deferred", report.reason
        assert "embed" in report.reason
        with StateStore.open(cfg.state_path) as state:
            assert state.watermark("research").created_at is None
            assert state.ledger_size() == 0
        backend = open_backend(cfg)
        try:
            upstream = await backend.list_units_since(cfg.bank_id("global"), None)
        finally:
            await backend.aclose()
        assert upstream == []
        again = await roll(cfg)
        assert again.outcome == "promoted", again.reason

    async def test_a_model_change_re_embeds_lazily_without_mixing(
        self,
        tmp_path: Path,
        backend_kind: str,
        marker: str,
        embeddings_server: EmbeddingsServer,
        request: pytest.FixtureRequest,
    ) -> None:
        """After embeddings.model changes, each run re-embeds at most reembed_batch ledger cards;
        until a card has a vector of the new model it is compared lexically only, so a paraphrase
        of it is not merged by a cosine of the old model; once re-embedded, it is."""
        cfg = make_config(tmp_path, backend_kind, marker, openai(embeddings_server, "model-a"), request)
        await seed(cfg, texts(marker, GRANDMA, *OTHERS))
        first = await roll(cfg)
        assert vector_models(cfg) == [("openai:model-a", 384, first.promoted)] and first.promoted == 3
        cfg_b = make_config(
            tmp_path, backend_kind, marker, openai(embeddings_server, "model-b", reembed_batch=1), request
        )
        await seed(cfg_b, texts(marker, "The user's favourite editor is Helix."))
        second = await roll(cfg_b)
        assert second.reembedded == 1
        # The new card (model b) and one re-embedded card; two old cards keep model a's vectors.
        assert sorted(vector_models(cfg_b)) == [("openai:model-a", 384, 2), ("openai:model-b", 384, 2)]
        # The grandma card is the oldest, so the one re-embedded: a paraphrase of it now merges.
        await seed(cfg_b, texts(marker, GRANDMOTHER))
        third = await roll(cfg_b)
        (grandmother,) = [p for p in third.plan if "grandmother" in p.text]
        assert grandmother.verdict == "duplicate", grandmother.reason


class TestLexicalWithoutEmbedder:
    async def test_provider_none_keeps_the_paraphrase_apart_and_says_so(self, tmp_path: Path) -> None:
        """With provider 'none' the same paraphrase is a new card, and the report says the dedup
        was lexical only (the semantic tests above would fail without the embedder)."""
        cfg = make_config(tmp_path, "embedded", "t", {"provider": "none"}, None)  # type: ignore[arg-type]
        await seed(cfg, [GRANDMA])
        await roll(cfg)
        await seed(cfg, [GRANDMOTHER])
        report = await roll(cfg)
        assert report.embedder == "none (lexical dedup only)"
        assert report.promoted == 1 and report.plan[0].verdict == "new"
        assert vector_models(cfg) == []

    async def test_local_provider_reinforces_in_process(self, tmp_path: Path) -> None:
        """provider 'local' (the in-process model) reinforces the paraphrase on the embedded store."""
        local_embedder()
        cfg = make_config(tmp_path, "embedded", "t", {"provider": "local"}, None)  # type: ignore[arg-type]
        await seed(cfg, [GRANDMA])
        await roll(cfg)
        await seed(cfg, [GRANDMOTHER])
        report = await roll(cfg)
        assert report.embedder == "local all-MiniLM-L6-v2"
        assert report.outcome == "reinforced", [p.to_json() for p in report.plan]
        ((model, dimension, count),) = vector_models(cfg)
        assert model.startswith("local:all-MiniLM-L6-v2:") and (dimension, count) == (384, 1)


def stored_vectors(cfg: Config) -> dict[str, tuple[int, bytes]]:
    with sqlite3.connect(cfg.state_path) as conn:
        rows = conn.execute("SELECT document_id, dimension, vector FROM ledger_vectors").fetchall()
    return {doc: (dimension, blob) for doc, dimension, blob in rows}


class TestDamagedAndChangedVectors:
    @pytest.mark.parametrize("damage", ["truncated", "scaled", "not-a-number"])
    async def test_a_damaged_stored_vector_is_left_out_and_embedded_again(
        self, tmp_path: Path, embeddings_server: EmbeddingsServer, damage: str
    ) -> None:
        """A stored vector of the wrong length, not of unit length (which would give cosines far
        above 1) or holding NaN is never compared: the run does not fail, and the card gets a
        sound vector again."""
        cfg = make_config(tmp_path, "embedded", "t", openai(embeddings_server), None)  # type: ignore[arg-type]
        await seed(cfg, [GRANDMA, *OTHERS])
        assert (await roll(cfg)).promoted == 3
        doc, (dimension, blob) = sorted(stored_vectors(cfg).items())[0]
        good = np.frombuffer(blob, dtype="<f2")
        bad = {
            "truncated": blob[:10],
            "scaled": (good * 100).astype("<f2").tobytes(),
            "not-a-number": np.full(dimension, np.nan, dtype="<f2").tobytes(),
        }[damage]
        with sqlite3.connect(cfg.state_path) as conn:
            conn.execute("UPDATE ledger_vectors SET vector = ? WHERE document_id = ?", (bad, doc))
        await seed(cfg, ["The user's favourite editor is Helix."])
        report = await roll(cfg)
        assert report.outcome == "promoted", report.reason
        assert report.reembedded == 1
        for dimension, blob in stored_vectors(cfg).values():
            assert from_blob(blob, dimension) is not None

    async def test_a_server_whose_model_changed_length_between_runs_re_embeds_the_ledger(
        self, tmp_path: Path, embeddings_server: EmbeddingsServer
    ) -> None:
        """When the server answers another length than the stored vectors' (same model name, a new
        process, as with `dreamer rollup` from cron), the first run re-embeds the ledger cards
        (up to reembed_batch) instead of leaving them without a comparable vector for ever."""
        cfg = make_config(tmp_path, "embedded", "t", openai(embeddings_server), None)  # type: ignore[arg-type]
        await seed(cfg, [GRANDMA, *OTHERS])
        assert (await roll(cfg)).promoted == 3
        embeddings_server.dimensions = 128
        try:
            await seed(cfg, ["The user's favourite editor is Helix."])
            report = await roll(cfg)
        finally:
            embeddings_server.dimensions = None
        assert report.outcome == "promoted", report.reason
        assert report.reembedded == 3
        assert vector_models(cfg) == [("openai:all-minilm-l6-v2", 128, 4)]
