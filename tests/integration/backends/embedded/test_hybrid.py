"""Hybrid recall in the embedded store: units' vectors stored on retain, full text fused with vectors.

Real SQLite files and the real in-process model (all-MiniLM-L6-v2 in numpy). A second, deliberately
different embedder (feature hashing) stands in for "another model"; the embedders that fail or answer
garbage wrap the real one to inject faults the model itself cannot produce.
"""

from __future__ import annotations

import hashlib
import os
import re
import sqlite3
import sys
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import numpy as np
import pytest
from numpy.typing import NDArray
from structlog.testing import capture_logs

from dreamer.backends.base import RetainItem
from dreamer.backends.embedded.backend import EmbeddedBackend
from dreamer.backends.embedded.schema import SCHEMA_VERSION
from dreamer.embeddings import Embedder
from dreamer.embeddings.local import LocalEmbedder, default_model_dir
from tests.integration.backends.embedded.test_backend import HOSTILE_QUERIES

pytest.importorskip("tokenizers")
pytest.importorskip("safetensors")

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures"
REPO_ROOT = Path(__file__).resolve().parents[4]

BANK = "global"
DOCS = [
    "Maria's grandmother died last week",
    "The backup job runs nightly on host atlas",
    "Evan bought a new red bicycle",
    "The team shipped version 2.3 on Friday",
    "Sam enjoys painting landscapes with watercolors",
    "Caroline adopted a puppy from the shelter",
]
#: Shares no content word with "Caroline adopted a puppy from the shelter" (a, was, the, from are stopwords).
PARAPHRASE = "a dog was taken home from the animal rescue"
PARAPHRASED = DOCS[5]


@pytest.fixture(scope="module")
def minilm() -> LocalEmbedder:
    try:
        return LocalEmbedder(default_model_dir())
    except ImportError as exc:  # pragma: no cover - CI installs the model package
        pytest.skip(str(exc))


class HashingEmbedder:
    """A real, different vector space: signed hashing of lowercased words (another model id)."""

    model_id = "test:hashing-64"
    dimension = 64

    async def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in re.findall(r"\w+", text.lower()):
                digest = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=8).digest(), "little")
                out[row, digest % self.dimension] += 1.0 if digest >> 63 else -1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        result: NDArray[np.float32] = (out / np.clip(norms, 1e-12, None)).astype(np.float32)
        return result

    async def aclose(self) -> None:
        return None


class FaultyEmbedder:
    """The real model behind a switch: raises, or answers garbage, while ``fault`` is set.

    A fault injector: the in-process model cannot be made to fail on demand.
    """

    def __init__(self, inner: LocalEmbedder) -> None:
        self.inner = inner
        self.fault: str | None = None
        self.calls = 0

    @property
    def model_id(self) -> str:
        return self.inner.model_id

    @property
    def dimension(self) -> int | None:
        return self.inner.dimension

    async def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        self.calls += 1
        if self.fault == "raise":
            raise ConnectionError("embeddings server down")
        vectors = await self.inner.embed(texts)
        if self.fault == "nan":
            vectors[:, 0] = np.nan
        if self.fault == "short":
            return vectors[:-1]
        return vectors

    async def aclose(self) -> None:
        return None


async def _open(path: Path, embedder: Embedder | None, **kwargs: Any) -> EmbeddedBackend:
    store = EmbeddedBackend(path, embedder=embedder, **kwargs)
    await store._call("open", lambda _conn: None)
    return store


async def _written_by(path: Path, embedder: Embedder) -> Path:
    """A store at ``path`` holding DOCS, embedded by ``embedder``."""
    first = await _open(path, embedder)
    try:
        await first.retain(BANK, [RetainItem(text) for text in DOCS])
    finally:
        await first.aclose()
    return path


@pytest.fixture
async def hybrid(tmp_path: Path, minilm: LocalEmbedder) -> AsyncIterator[EmbeddedBackend]:
    store = await _open(tmp_path / "memory.sqlite3", minilm)
    try:
        yield store
    finally:
        await store.aclose()


def _vector_rows(path: Path) -> list[tuple[int, str, bytes]]:
    with sqlite3.connect(path) as raw:
        return raw.execute(
            "SELECT unit_key, model_id, vector FROM unit_vectors ORDER BY unit_key, model_id"
        ).fetchall()


def _ids(hits: Sequence[Any]) -> list[str]:
    return [hit.id for hit in hits]


class TestParaphrases:
    async def test_a_paraphrase_sharing_no_content_word_is_found(
        self, hybrid: EmbeddedBackend, tmp_path: Path
    ) -> None:
        """Full text alone finds nothing for the paraphrase; hybrid recall puts the unit first."""
        await hybrid.retain(BANK, [RetainItem(text) for text in DOCS])
        plain = await _open(hybrid.path, None)
        try:
            assert await plain.recall(BANK, PARAPHRASE) == []
        finally:
            await plain.aclose()
        hits = await hybrid.recall(BANK, PARAPHRASE, limit=3)
        assert hits and hits[0].text == PARAPHRASED

    async def test_the_grandmother_paraphrase_ranks_first(self, hybrid: EmbeddedBackend) -> None:
        """'Maria lost her grandma' finds 'Maria's grandmother died last week' first."""
        await hybrid.retain(BANK, [RetainItem(text) for text in DOCS])
        await hybrid.retain(BANK, [RetainItem("Maria moved to a flat in Lisbon")])
        hits = await hybrid.recall(BANK, "Maria lost her grandma", limit=3)
        assert hits[0].text == DOCS[0]

    async def test_the_cosine_is_the_stored_vectors_not_its_codes(
        self, hybrid: EmbeddedBackend, minilm: LocalEmbedder
    ) -> None:
        """The bank's matrix holds int8 codes, but every cosine a hit carries is the stored
        float16 vector's own, to float32 rounding: the codes only choose which units to rescore."""
        await hybrid.retain(BANK, [RetainItem(text, document_id=f"doc-{i}") for i, text in enumerate(DOCS)])
        query = (await minilm.embed(["puppy shelter bicycle"]))[0]
        hits = await hybrid.recall(BANK, "puppy shelter bicycle")
        with sqlite3.connect(hybrid.path) as conn:
            blobs = dict(
                conn.execute(
                    "SELECT u.id, v.vector FROM unit_vectors v JOIN units u ON u.seq = v.unit_key "
                    "WHERE v.model_id = ?",
                    (minilm.model_id,),
                )
            )
        scored = [hit for hit in hits if hit.semantic is not None]
        assert scored
        for hit in scored:
            stored = np.frombuffer(blobs[hit.id], dtype="<f2").astype(np.float32)
            assert hit.semantic == pytest.approx(float(stored @ query), abs=1e-6)

    async def test_hits_keep_their_labels_and_carry_the_cosine(
        self, hybrid: EmbeddedBackend, minilm: LocalEmbedder
    ) -> None:
        """Bank, document, tags, metadata and times are as full text gives them; semantic is the cosine."""
        stamp = datetime(2025, 3, 1, tzinfo=UTC)
        await hybrid.retain(
            BANK,
            [
                RetainItem(
                    text,
                    document_id=f"doc-{i}",
                    tags=("rollup", f"t{i}"),
                    metadata={"k": str(i)},
                    timestamp=stamp,
                )
                for i, text in enumerate(DOCS)
            ],
        )
        plain = await _open(hybrid.path, None)
        try:
            lexical = {hit.id: hit for hit in await plain.recall(BANK, "puppy shelter bicycle")}
        finally:
            await plain.aclose()
        hits = await hybrid.recall(BANK, "puppy shelter bicycle")
        assert set(lexical) <= set(_ids(hits))
        query = (await minilm.embed(["puppy shelter bicycle"]))[0]
        for hit in hits:
            unit = lexical.get(hit.id)
            if unit is not None:
                for field in (
                    "bank_id",
                    "text",
                    "fact_type",
                    "document_id",
                    "tags",
                    "metadata",
                    "mentioned_at",
                ):
                    assert getattr(hit, field) == getattr(unit, field), field
            assert 0.0 < hit.score <= 1.0
            expected = float((await minilm.embed([hit.text]))[0] @ query)
            assert hit.semantic == pytest.approx(expected, abs=3e-3)
        assert [hit.score for hit in hits] == sorted((hit.score for hit in hits), reverse=True)

    async def test_filters_apply_to_the_nearest_vectors(self, hybrid: EmbeddedBackend) -> None:
        """A unit found only by its vector still obeys tags and fact types."""
        await hybrid.retain(
            BANK, [RetainItem(PARAPHRASED, tags=("pets",)), RetainItem(DOCS[2], tags=("rollup",))]
        )
        assert PARAPHRASED in [h.text for h in await hybrid.recall(BANK, PARAPHRASE, tags=["pets"])]
        strict = await hybrid.recall(BANK, PARAPHRASE, tags=["rollup"], tags_match="any_strict")
        assert PARAPHRASED not in [h.text for h in strict]
        assert await hybrid.recall(BANK, PARAPHRASE, types=["experience"]) == []

    async def test_limit_and_max_tokens_still_trim(self, hybrid: EmbeddedBackend) -> None:
        """``limit`` caps the fused list and ``max_tokens`` stops before the hit that would exceed it."""
        await hybrid.retain(BANK, [RetainItem(text) for text in DOCS])
        assert len(await hybrid.recall(BANK, "host backup version bicycle puppy", limit=2)) == 2
        assert len(await hybrid.recall(BANK, "host backup version bicycle puppy", max_tokens=1)) == 1

    async def test_other_banks_are_never_returned(self, hybrid: EmbeddedBackend) -> None:
        """The vector side is confined to the recalled bank."""
        await hybrid.retain("profile", [RetainItem(PARAPHRASED)])
        await hybrid.retain(BANK, [RetainItem(DOCS[1])])
        assert all(hit.bank_id == BANK for hit in await hybrid.recall(BANK, PARAPHRASE))
        assert await hybrid.recall("missing", PARAPHRASE) == []


class TestHostileInput:
    async def test_hostile_queries_and_a_huge_limit_never_raise(self, hybrid: EmbeddedBackend) -> None:
        """Operators, lone surrogates, 20,000 characters, 5,000 words: hybrid recall answers, never raises."""
        await hybrid.retain(BANK, [RetainItem(text) for text in DOCS])
        for query in HOSTILE_QUERIES:
            hits = await hybrid.recall(BANK, query, limit=10**9)
            assert all(hit.bank_id == BANK for hit in hits)
            assert all(hit.semantic is None or -1.01 <= hit.semantic <= 1.01 for hit in hits)


class TestWithoutEmbedder:
    async def test_results_are_unchanged_by_stored_vectors(
        self, tmp_path: Path, minilm: LocalEmbedder
    ) -> None:
        """A backend without an embedder recalls exactly as before, whether or not the file holds vectors."""
        path = tmp_path / "memory.sqlite3"
        plain = await _open(path, None)
        queries = ["host atlas backup", "puppy", "version Friday team", "the", PARAPHRASE]
        try:
            await plain.retain(BANK, [RetainItem(text, tags=("rollup",)) for text in DOCS])
            before = [await plain.recall(BANK, q) for q in queries]
            hybrid = await _open(path, minilm)
            try:
                await hybrid.embed_backlog(BANK, 100)
            finally:
                await hybrid.aclose()
            assert len(_vector_rows(path)) == len(DOCS)
            after = [await plain.recall(BANK, q) for q in queries]
        finally:
            await plain.aclose()
        assert after == before
        assert all(hit.semantic is None for hits in after for hit in hits)

    async def test_retain_without_embedder_stores_no_vectors(self, tmp_path: Path) -> None:
        """No embedder, no vector rows (and numpy is never needed for the store)."""
        plain = await _open(tmp_path / "memory.sqlite3", None)
        try:
            await plain.retain(BANK, [RetainItem(DOCS[0])])
            assert await plain.embed_backlog(BANK, 10) == 0
        finally:
            await plain.aclose()
        assert _vector_rows(tmp_path / "memory.sqlite3") == []


class TestEmbedderFaults:
    async def test_a_failing_embedder_during_retain_loses_no_unit(
        self, tmp_path: Path, minilm: LocalEmbedder
    ) -> None:
        """Retain stores the units without vectors; the next recall embeds them and finds the paraphrase."""
        faulty = FaultyEmbedder(minilm)
        store = await _open(tmp_path / "memory.sqlite3", faulty)
        try:
            faulty.fault = "raise"
            with capture_logs() as logs:
                await store.retain(BANK, [RetainItem(text) for text in DOCS])
            assert await store.count_units(BANK) == len(DOCS)
            assert _vector_rows(store.path) == []
            assert any(entry["event"].startswith("embedding failed") for entry in logs)
            faulty.fault = None
            hits = await store.recall(BANK, PARAPHRASE, limit=3)
            assert hits[0].text == PARAPHRASED
            assert len(_vector_rows(store.path)) == len(DOCS)
        finally:
            await store.aclose()

    @pytest.mark.parametrize("fault", ["raise", "nan", "short"])
    async def test_a_failing_embedder_during_recall_falls_back_to_full_text(
        self, tmp_path: Path, minilm: LocalEmbedder, fault: str
    ) -> None:
        """Down, NaN or too few vectors: recall answers what full text alone answers, with no error."""
        faulty = FaultyEmbedder(minilm)
        store = await _open(tmp_path / "memory.sqlite3", faulty)
        plain = await _open(tmp_path / "memory.sqlite3", None)
        try:
            await store.retain(BANK, [RetainItem(text) for text in DOCS])
            faulty.fault = fault
            for query in ("host atlas", PARAPHRASE):
                assert await store.recall(BANK, query) == await plain.recall(BANK, query)
            await store.retain(BANK, [RetainItem("one more unit about the host")])
            assert await store.count_units(BANK) == len(DOCS) + 1
            assert len(_vector_rows(store.path)) == len(DOCS)
        finally:
            await store.aclose()
            await plain.aclose()


WRITER = """
import sys
from pathlib import Path

import anyio

from dreamer.backends.base import RetainItem
from dreamer.backends.embedded.backend import EmbeddedBackend
from dreamer.embeddings.local import LocalEmbedder


async def main(path: str, bank: str, text: str) -> None:
    store = await EmbeddedBackend.open(Path(path), embedder=LocalEmbedder())
    try:
        await store.retain(bank, [RetainItem(text)])
    finally:
        await store.aclose()


anyio.run(main, sys.argv[1], sys.argv[2], sys.argv[3])
"""


class TestStoredVectors:
    async def test_damaged_blobs_are_skipped_with_a_warning_and_embedded_again(
        self, hybrid: EmbeddedBackend
    ) -> None:
        """A truncated blob and a NaN blob never reach the search; the units are re-embedded."""
        await hybrid.retain(BANK, [RetainItem(text) for text in DOCS])
        rows = _vector_rows(hybrid.path)
        nan_blob = np.full(384, np.nan, dtype="<f2").tobytes()
        with sqlite3.connect(hybrid.path) as raw:
            raw.execute("UPDATE unit_vectors SET vector = x'0102' WHERE unit_key = ?", (rows[5][0],))
            raw.execute("UPDATE unit_vectors SET vector = ? WHERE unit_key = ?", (nan_blob, rows[0][0]))
        fresh = await _open(hybrid.path, hybrid.embedder)
        try:
            with capture_logs() as logs:
                hits = await fresh.recall(BANK, PARAPHRASE, limit=3)
            assert any("damaged" in entry["event"] for entry in logs)
            assert all(hit.semantic is None or np.isfinite(hit.semantic) for hit in hits)
            await fresh.recall(BANK, PARAPHRASE)
            repaired = _vector_rows(hybrid.path)
            assert len(repaired) == len(DOCS)
            assert all(
                len(blob) == 768 and np.isfinite(np.frombuffer(blob, "<f2")).all() for _, _, blob in repaired
            )
            assert (await fresh.recall(BANK, PARAPHRASE, limit=1))[0].text == PARAPHRASED
        finally:
            await fresh.aclose()

    async def test_loading_a_large_bank_holds_its_matrix_and_little_more(self, tmp_path: Path) -> None:
        """A bank of 6,000 vectors of 384 dimensions is loaded a small chunk at a time and each
        chunk quantised with one temporary: what the load allocates beyond the matrix it keeps (3 MB
        of codes, scales and keys) stays under 4 MB. Read 8,192 rows at a time, as before, it took
        21 MB more (at 100k vectors the load held 105 MB where the matrix is 40)."""
        import tracemalloc

        from dreamer.backends.embedded.schema import connect
        from dreamer.backends.embedded.vector_cache import VectorCache

        embedder = HashingEmbedder()
        embedder.dimension = 384
        path = tmp_path / "memory.sqlite3"
        store = await _open(path, embedder)
        try:
            for start in range(0, 6000, 1000):
                await store.retain(
                    BANK, [RetainItem(f"unit {n} of the large bank") for n in range(start, start + 1000)]
                )
        finally:
            await store.aclose()
        conn = connect(path)
        try:
            cache = VectorCache()
            tracemalloc.start()
            refreshed = cache.refresh(conn, BANK, embedder.model_id, 384)
            kept, peak = tracemalloc.get_traced_memory()
            tracemalloc.stop()
        finally:
            conn.close()
        assert refreshed.bank is not None and refreshed.bank.size == 6000
        assert peak - kept < 4_000_000, (peak, kept)

    async def test_a_model_change_never_mixes_vectors(self, tmp_path: Path, minilm: LocalEmbedder) -> None:
        """Under a new model, units are embedded again in bounded batches and found by full text meanwhile."""
        path = await _written_by(tmp_path / "memory.sqlite3", minilm)
        other = HashingEmbedder()
        second = await _open(path, other, backlog_batch=2)
        try:
            hits = await second.recall(BANK, "host atlas backup")
            by_model = [model for _, model, _ in _vector_rows(path)]
            assert by_model.count(other.model_id) == 2 and by_model.count(minilm.model_id) == len(DOCS)
            embedded = {key for key, model, _ in _vector_rows(path) if model == other.model_id}
            query = (await other.embed(["host atlas backup"]))[0]
            for hit in hits:
                if hit.semantic is not None:  # only the new model's cosines, never MiniLM's
                    assert hit.semantic == pytest.approx(
                        float((await other.embed([hit.text]))[0] @ query), abs=3e-3
                    )
            assert sum(hit.semantic is not None for hit in hits) <= len(embedded)
            assert any(hit.text == DOCS[1] for hit in hits)  # found by full text meanwhile
            assert await second.embed_backlog(BANK, 100) == len(DOCS) - 2
            assert [m for _, m, _ in _vector_rows(path)].count(other.model_id) == len(DOCS)
        finally:
            await second.aclose()
        back = await _open(path, minilm)
        try:
            assert (await back.recall(BANK, PARAPHRASE, limit=1))[0].text == PARAPHRASED
            assert await back.embed_backlog(BANK, 100) == 0
        finally:
            await back.aclose()

    async def test_two_recalls_at_once_embed_each_backlog_unit_once(
        self, tmp_path: Path, minilm: LocalEmbedder
    ) -> None:
        """Two recalls sent at once under a new model (the roll-up sends two): one backlog batch is
        embedded at a time, so the second recall embeds the next batch, not the first one again.
        The embedder dwells in each backlog call, long enough for the other recall to reach its own
        if nothing held it back."""
        path = await _written_by(tmp_path / "memory.sqlite3", minilm)
        embedded: list[str] = []

        class Dwelling(HashingEmbedder):
            async def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
                if set(texts) <= set(DOCS):
                    embedded.extend(texts)
                    await anyio.sleep(0.3)
                return await super().embed(texts)

        other = Dwelling()
        second = await _open(path, other, backlog_batch=2)
        try:
            async with anyio.create_task_group() as group:
                for query in ("host atlas backup", "red bicycle"):
                    group.start_soon(second.recall, BANK, query)
            assert len(embedded) == 4 and len(set(embedded)) == 4, embedded
            assert [m for _, m, _ in _vector_rows(path)].count(other.model_id) == 4
        finally:
            await second.aclose()

    async def test_another_processes_writes_reach_the_cached_matrix(self, hybrid: EmbeddedBackend) -> None:
        """A unit retained (with its vector) by another process is found by its vector on the next recall."""
        await hybrid.retain(BANK, [RetainItem(text) for text in DOCS[:5]])
        assert PARAPHRASED not in [h.text for h in await hybrid.recall(BANK, PARAPHRASE)]
        done = await anyio.run_process(
            [sys.executable, "-c", WRITER, str(hybrid.path), BANK, PARAPHRASED],
            env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
            check=False,
        )
        assert done.returncode == 0, done.stderr.decode()
        assert len(_vector_rows(hybrid.path)) == 6  # the writer stored the vector itself
        hits = await hybrid.recall(BANK, PARAPHRASE, limit=1)
        assert hits[0].text == PARAPHRASED and hits[0].semantic is not None

    async def test_backends_of_one_file_share_the_matrix(
        self, hybrid: EmbeddedBackend, minilm: LocalEmbedder
    ) -> None:
        """A second backend on the same file in the same process searches the matrix the first loaded."""
        await hybrid.retain(BANK, [RetainItem(text) for text in DOCS])
        await hybrid.recall(BANK, PARAPHRASE)
        second = await _open(hybrid.path, minilm)
        try:
            assert (await second.recall(BANK, PARAPHRASE, limit=1))[0].text == PARAPHRASED
            assert second._vectors() is hybrid._vectors()
        finally:
            await second.aclose()

    @pytest.mark.parametrize(("old_fillers", "new_fillers"), [(20, 0), (0, 40)])
    async def test_a_store_replaced_at_the_same_path_is_never_searched_stale(
        self, tmp_path: Path, minilm: LocalEmbedder, old_fillers: int, new_fillers: int
    ) -> None:
        """A new file at the same path is read afresh even through the old file's cache (a reused inode)."""
        path = tmp_path / "memory.sqlite3"
        first = await _open(path, minilm)
        try:
            await first.retain(BANK, [RetainItem(text) for text in DOCS])
            await first.retain(BANK, [RetainItem(f"filler note number {i}") for i in range(old_fillers)])
            assert (await first.recall(BANK, PARAPHRASE, limit=1))[0].text == PARAPHRASED
            old_cache = first._vectors()
        finally:
            await first.aclose()
        for leftover in tmp_path.iterdir():
            leftover.unlink()
        second = await _open(path, minilm)
        second._cache = old_cache  # as if the new file had been given the old one's inode
        try:
            await second.retain(
                BANK, [RetainItem("Evan bought a new red bicycle"), RetainItem("Sam adopted a kitten")]
            )
            await second.retain(
                BANK, [RetainItem(f"quarterly invoice {i} was paid") for i in range(new_fillers)]
            )
            hits = await second.recall(BANK, PARAPHRASE, limit=2)
            assert [hit.text for hit in hits][:1] == ["Sam adopted a kitten"]
            assert all(hit.text not in DOCS[2:] for hit in hits)  # nothing of the old file's
        finally:
            await second.aclose()

    async def test_a_replaced_document_takes_its_vector_with_it(self, hybrid: EmbeddedBackend) -> None:
        """Re-retaining a document with new content drops the old unit's vector: no stale semantic hit."""
        await hybrid.retain(BANK, [RetainItem(text) for text in DOCS[:5]])
        await hybrid.retain(BANK, [RetainItem(PARAPHRASED, document_id="d")])
        assert (await hybrid.recall(BANK, PARAPHRASE, limit=1))[0].text == PARAPHRASED
        await hybrid.retain(BANK, [RetainItem("The quarterly invoice was paid late", document_id="d")])
        assert PARAPHRASED not in [h.text for h in await hybrid.recall(BANK, PARAPHRASE)]
        assert len(_vector_rows(hybrid.path)) == await hybrid.count_units(BANK) == 6


class TestSchemaUpgrade:
    def _write_v3_store(self, path: Path) -> None:
        start = datetime(2025, 1, 1, tzinfo=UTC)
        with sqlite3.connect(path, isolation_level=None) as raw:
            raw.executescript((FIXTURES / "embedded_schema_v3.sql").read_text(encoding="utf-8"))
            raw.execute("BEGIN")
            raw.execute(
                "INSERT INTO banks (bank_id, created_at, bank_no) VALUES (?, ?, 1)", (BANK, start.isoformat())
            )
            for number, text in enumerate(DOCS, start=1):
                created = (start + timedelta(seconds=number)).isoformat(timespec="microseconds")
                raw.execute(
                    "INSERT INTO units (seq, id, bank_id, text, tags, created_at, mentioned_at)"
                    " VALUES (?, ?, ?, ?, '[\"rollup\"]', ?, ?)",
                    ((1 << 40) + number, f"u{number}", BANK, text, created, created),
                )
            raw.execute("UPDATE banks SET last_write_at = ? WHERE bank_id = ?", (created, BANK))
            raw.execute("COMMIT")

    async def test_a_version_3_store_is_upgraded_keeping_every_row(
        self, tmp_path: Path, minilm: LocalEmbedder
    ) -> None:
        """Units, tags and counts survive the upgrade as they were; recall is unchanged; vectors then work."""
        path = tmp_path / "memory.sqlite3"
        self._write_v3_store(path)
        with sqlite3.connect(path) as raw:
            units = raw.execute("SELECT * FROM units ORDER BY seq").fetchall()
            tags = raw.execute("SELECT * FROM unit_tags ORDER BY unit_key").fetchall()
            counts = raw.execute("SELECT bank_id, unit_count FROM banks").fetchall()
        plain = await _open(path, None)
        try:
            with sqlite3.connect(path) as raw:
                assert raw.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
                assert raw.execute("SELECT * FROM units ORDER BY seq").fetchall() == units
                assert raw.execute("SELECT * FROM unit_tags ORDER BY unit_key").fetchall() == tags
                assert raw.execute("SELECT bank_id, unit_count FROM banks").fetchall() == counts
                assert raw.execute("SELECT vector_drops FROM banks").fetchall() == [(0,)]
            assert _ids(await plain.recall(BANK, "puppy shelter")) == ["u6"]
        finally:
            await plain.aclose()
        store = await _open(path, minilm)
        try:
            assert (await store.recall(BANK, PARAPHRASE, limit=1))[0].id == "u6"
            await store.retain(BANK, [RetainItem("Evan sold the bicycle")])
            assert len(_vector_rows(path)) == len(DOCS) + 1
        finally:
            await store.aclose()

    async def test_a_failed_upgrade_leaves_the_version_3_store_untouched(self, tmp_path: Path) -> None:
        """An upgrade that fails midway keeps nothing of itself: version, columns and rows as before."""
        path = tmp_path / "memory.sqlite3"
        self._write_v3_store(path)
        with sqlite3.connect(path) as raw:
            raw.execute("CREATE VIEW unit_vectors AS SELECT 1")  # the new table's name is taken
            before = raw.execute("SELECT sql FROM sqlite_master ORDER BY name").fetchall()
        from dreamer.errors import PermanentBackendError

        with pytest.raises(PermanentBackendError):
            await EmbeddedBackend.open(path)
        with sqlite3.connect(path) as raw:
            assert raw.execute("PRAGMA user_version").fetchone()[0] == 3
            assert raw.execute("SELECT sql FROM sqlite_master ORDER BY name").fetchall() == before
