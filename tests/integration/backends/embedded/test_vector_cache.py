"""The embedded store's vectors on disk: a bank's vectors past one page live in segment files
beside the store and are searched there, with the answers of the matrix held whole in memory.

Real SQLite files and real segment files. The embedder is the feature-hashing one of the hybrid
tests (a real, if simple, vector space; fast enough for a bank of many pages); pages are 64 rows
here instead of 16,384, so a few hundred units make several segments. The reference is the same
store searched through a cache without a folder, which holds every vector in memory as before.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from dreamer.backends.base import RetainItem
from dreamer.backends.embedded import vector_cache
from dreamer.backends.embedded.backend import EmbeddedBackend
from dreamer.backends.embedded.vector_cache import VectorCache
from dreamer.embeddings import segmentfile, segments
from tests.integration.backends.embedded.test_hybrid import HashingEmbedder

pytest.importorskip("numpy")

BANK = "global"
PAGE = 64
WORDS = [f"w{n}" for n in range(120)]
QUERIES = [" ".join(random.Random(n).sample(WORDS, 4)) for n in range(12)]


def _texts(count: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return [f"{' '.join(rng.sample(WORDS, 6))} unit {n}" for n in range(count)]


async def _fill(path: Path, texts: Sequence[str], cache: VectorCache | None = None) -> None:
    store = EmbeddedBackend(path, embedder=HashingEmbedder(), vectors=cache or VectorCache())
    try:
        for start in range(0, len(texts), 100):
            await store.retain(
                BANK,
                [
                    RetainItem(t, tags=["rollup"] if n % 3 else [])
                    for n, t in enumerate(texts[start : start + 100])
                ],
            )
    finally:
        await store.aclose()


async def _answers(path: Path, cache: VectorCache, **recall: Any) -> list[list[tuple[str, float, Any]]]:
    store = EmbeddedBackend(path, embedder=HashingEmbedder(), vectors=cache)
    try:
        out = []
        for query in QUERIES:
            hits = await store.recall(BANK, query, **recall)
            out.append([(h.id, round(h.score, 9), h.semantic) for h in hits])
        return out
    finally:
        await store.aclose()


def _folder(tmp_path: Path) -> Path:
    return tmp_path / "memory.sqlite3.vectors"


@pytest.fixture
async def store(tmp_path: Path) -> Path:
    path = tmp_path / "memory.sqlite3"
    await _fill(path, _texts(500))
    return path


def _paged(tmp_path: Path) -> VectorCache:
    return VectorCache(folder=_folder(tmp_path), segment_rows=PAGE)


RECALLS: list[dict[str, Any]] = [
    {"limit": 8},
    {"limit": 3, "tags": ["rollup"], "tags_match": "any_strict"},
    {"limit": 40},
]


@pytest.mark.parametrize("recall", RECALLS)
async def test_segments_answer_as_the_matrix_in_memory(
    tmp_path: Path, store: Path, recall: dict[str, Any]
) -> None:
    """500 vectors in pages of 64: seven segments on disk and fewer than a page in memory, and
    every recall (ids, fused scores, cosines) the same as the whole matrix in memory gives."""
    cache = _paged(tmp_path)
    got = await _answers(store, cache, **recall)
    assert got == await _answers(store, VectorCache(), **recall)
    # The vector side took part: the fused answers are not the full-text ones.
    words_only = EmbeddedBackend(store)
    try:
        lexical = [[h.id for h in await words_only.recall(BANK, query, **recall)] for query in QUERIES]
    finally:
        await words_only.aclose()
    assert lexical != [[hit[0] for hit in hits] for hits in got]
    bank = cache._banks[(BANK, HashingEmbedder.model_id)]
    assert bank.index is not None and len(bank.index.segments) == 7 and bank.size < PAGE
    assert bank.size + bank.index.rows == 500
    assert len(list(next(_folder(tmp_path).iterdir()).glob("seg-*"))) == 7


async def test_a_new_process_reads_only_the_rows_past_the_segments(
    tmp_path: Path, store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A second cache of the same folder (another process) takes the segments as they are and
    reads from the file only the rows they do not hold."""
    await _answers(store, _paged(tmp_path), limit=8)
    read: list[int] = []
    real = VectorCache._load

    def counting(cached: Any, rows: Sequence[Any]) -> list[int]:
        read.append(len(rows))
        return real(cached, rows)

    monkeypatch.setattr(VectorCache, "_load", staticmethod(counting))
    again = await _answers(store, _paged(tmp_path), limit=8)
    assert 0 < sum(read) < PAGE
    assert again == await _answers(store, VectorCache(), limit=8)


async def test_more_units_make_more_segments_and_are_found(tmp_path: Path, store: Path) -> None:
    """Units retained after the segments were built are searched in memory, then written out as
    a segment of their own once they fill a page; the answers stay those of the whole matrix."""
    cache = _paged(tmp_path)
    await _answers(store, cache, limit=8)
    await _fill(store, _texts(150, seed=7), cache)
    got = await _answers(store, cache, limit=8)
    assert got == await _answers(store, VectorCache(), limit=8)
    bank = cache._banks[(BANK, HashingEmbedder.model_id)]
    assert bank.index is not None and bank.index.rows + bank.size == 650 and bank.size < PAGE


async def test_a_dropped_vector_sets_the_segments_aside_and_they_are_built_again(
    tmp_path: Path, store: Path
) -> None:
    """A vector deleted from the file (a replaced document, a damaged blob) may sit in a segment:
    the bank's manifest names the drop count it was built at, so the next cache sets it aside and
    builds again, and the dropped row is never an answer."""
    await _answers(store, _paged(tmp_path), limit=8)
    with sqlite3.connect(store) as raw:
        raw.execute("DELETE FROM unit_vectors WHERE vec_no = (SELECT MIN(vec_no) FROM unit_vectors)")
    with capture_logs() as logs:
        got = await _answers(store, _paged(tmp_path), limit=8)
    assert any("set aside" in entry["event"] for entry in logs)
    assert got == await _answers(store, VectorCache(), limit=8)
    manifest = json.loads(next(_folder(tmp_path).glob("*/manifest.json")).read_text())
    assert manifest["identity"]["drops"] == 1


async def test_a_segment_removed_under_a_search_is_read_again_from_the_file(
    tmp_path: Path, store: Path
) -> None:
    """A segment file deleted after the cache opened it: the recall logs it, reads the bank
    again from the store, and answers as the whole matrix does; nothing is raised."""
    cache = _paged(tmp_path)
    await _answers(store, cache, limit=8)
    next(_folder(tmp_path).glob("*/seg-*")).unlink()
    with capture_logs() as logs:
        got = await _answers(store, cache, limit=8)
    assert any("vector segments lost" in entry["event"] for entry in logs)
    assert got == await _answers(store, VectorCache(), limit=8)


@pytest.mark.parametrize(
    "damage", ["not json", '{"format": 2}', '{"format": 2, "segments": [{"file": "../x.i8"}]}']
)
async def test_a_damaged_manifest_is_set_aside_and_built_again(
    tmp_path: Path, store: Path, damage: str
) -> None:
    """A manifest that cannot be read, is of nothing, or names a file outside its folder: set
    aside with a warning, the bank searched from the file and its segments written again."""
    await _answers(store, _paged(tmp_path), limit=8)
    manifest = next(_folder(tmp_path).glob("*/manifest.json"))
    manifest.write_text(damage)
    with capture_logs() as logs:
        got = await _answers(store, _paged(tmp_path), limit=8)
    assert any("set aside" in entry["event"] for entry in logs)
    assert got == await _answers(store, VectorCache(), limit=8)
    assert len(json.loads(manifest.read_text())["segments"]) == 7


async def test_an_older_copy_of_the_store_does_not_trust_newer_segments(tmp_path: Path, store: Path) -> None:
    """The store restored from a copy made before 200 more units were embedded, its segments left
    as the newer file wrote them, and 200 other units embedded since under the same numbers: the
    segments' probes name units the file does not hold, so they are built again from the file as
    it is, and the new units are found by their own vectors."""
    copy = tmp_path / "older.sqlite3"
    shutil.copy(store, copy)
    cache = _paged(tmp_path)
    await _fill(store, _texts(200, seed=3), cache)
    await _answers(store, cache, limit=8)
    shutil.copy(copy, store)
    for wal in tmp_path.glob("memory.sqlite3-*"):
        wal.unlink()
    await _fill(store, [f"{text} refilled" for text in _texts(200, seed=11)])
    got = await _answers(store, _paged(tmp_path), limit=8)
    assert got == await _answers(store, VectorCache(), limit=8)


async def test_recalls_prepared_together_stream_the_segments_once(
    tmp_path: Path, store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``prepare_recalls`` embeds the queries in one batch and streams the segments once for all
    of them; the recalls that follow read no segment and answer as unprepared recalls do."""
    cache = _paged(tmp_path)
    expected = await _answers(store, cache, limit=8)
    scans: list[int] = []
    real = segmentfile.nearest

    def counting(files: Any, queries: Any, want: int) -> Any:
        scans.append(len(queries))
        return real(files, queries, want)

    monkeypatch.setattr(segmentfile, "nearest", counting)
    backend = EmbeddedBackend(store, embedder=HashingEmbedder(), vectors=cache)
    try:
        await backend.prepare_recalls(BANK, QUERIES, 8)
        got = []
        for query in QUERIES:
            hits = await backend.recall(BANK, query, limit=8)
            got.append([(h.id, round(h.score, 9), h.semantic) for h in hits])
    finally:
        await backend.aclose()
    assert scans == [len(QUERIES)]
    assert got == expected
    # A vector dropped: the bank's segments are built again under the same file names, and the
    # hits found ahead in the old ones are not used (each recall streams the new segments).
    with sqlite3.connect(store) as raw:
        raw.execute("DELETE FROM unit_vectors WHERE vec_no = (SELECT MAX(vec_no) FROM unit_vectors)")
    rebuilt = await _answers(store, cache, limit=8)
    assert scans[1:] == [1] * len(QUERIES)
    assert rebuilt == await _answers(store, VectorCache(), limit=8)


async def test_without_a_folder_every_vector_stays_in_memory(tmp_path: Path, store: Path) -> None:
    """A cache given no folder writes nothing and holds the whole bank, as before segments."""
    cache = VectorCache()
    await _answers(store, cache, limit=8)
    assert cache._banks[(BANK, HashingEmbedder.model_id)].size == 500
    assert not _folder(tmp_path).exists()
    assert vector_cache.segments_folder(store) == _folder(tmp_path)


async def test_a_process_that_finds_another_built_meanwhile_reads_on_from_its_segments(
    tmp_path: Path,
) -> None:
    """Two caches of one folder (two processes) in pages of different sizes: the second reads
    past the first's segments, then finds the first's newer segment when it tries to write its own.
    It lets go of its rows and reads again from where that segment ends, so no row falls between
    the two and its answers stay those of the whole matrix."""
    path = tmp_path / "memory.sqlite3"
    await _fill(path, _texts(100))
    first = VectorCache(folder=_folder(tmp_path), segment_rows=64)
    await _answers(path, first, limit=8)  # one segment of 64 rows, 36 in memory
    second = VectorCache(folder=_folder(tmp_path), segment_rows=128)
    await _answers(path, second, limit=8)  # takes that segment, 36 in memory
    await _fill(path, _texts(100, seed=5))
    await _answers(path, first, limit=8)  # another segment: 64 + 72 rows covered, 64 in memory
    await _fill(path, _texts(100, seed=9))
    with capture_logs():
        got = await _answers(path, second, limit=8)
    assert got == await _answers(path, VectorCache(), limit=8)
    bank = second._banks[(BANK, HashingEmbedder.model_id)]
    assert bank.index is not None
    assert bank.index.rows + bank.size == 300


async def test_a_file_where_the_folder_should_be_keeps_the_rows_in_memory(
    tmp_path: Path, store: Path
) -> None:
    """A regular file in place of the segments' folder: the bank is searched in memory with the
    answers of the whole matrix, the file is left as it was, and the failure is logged once a
    page of rows, not at every recall that finds a few rows more."""
    _folder(tmp_path).write_text("not a folder")
    cache = _paged(tmp_path)
    with capture_logs() as logs:
        await _answers(store, cache, limit=8)
        for round_ in range(5):
            await _fill(store, _texts(10, seed=100 + round_))
            got = await _answers(store, cache, limit=8)
    assert got == await _answers(store, VectorCache(), limit=8)
    assert _folder(tmp_path).read_text() == "not a folder"
    assert cache._banks[(BANK, HashingEmbedder.model_id)].size == 550
    assert len([entry for entry in logs if "cannot write its folder" in entry["event"]]) == 1


async def test_a_process_of_another_user_than_the_stores_writes_no_segment(
    tmp_path: Path, store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The process's own cache of a store another user owns (root's ``dreamer recall`` on the
    service's store) searches the segments there and writes none: files the daemon could not
    read or replace. The store's owner writes them."""
    monkeypatch.setattr(segments, "SEGMENT_ROWS", PAGE)
    os.chown(store, os.geteuid() + 4242, -1)
    assert not vector_cache.shared_cache(store).writable
    assert await _answers(store, vector_cache.shared_cache(store), limit=8) == await _answers(
        store, VectorCache(), limit=8
    )
    assert not _folder(tmp_path).exists()
    os.chown(store, os.geteuid(), -1)
    copy = tmp_path / "owned.sqlite3"
    shutil.copy(store, copy)
    assert vector_cache.shared_cache(copy).writable
    await _answers(copy, vector_cache.shared_cache(copy), limit=8)
    assert list(vector_cache.segments_folder(copy).glob("*/seg-*"))
