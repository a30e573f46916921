"""Units' vectors as the embedded store holds them, read back by what a search of the codes
found: each one's exact cosine by its stored number, and the unit it belongs to. Real SQLite
files; the feature-hashing embedder of the hybrid tests."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np

from dreamer.backends.base import RetainItem
from dreamer.backends.embedded.backend import EmbeddedBackend
from dreamer.backends.embedded.schema import connect
from dreamer.backends.embedded.vector_store import exact_by_vec_no, unit_ids
from tests.integration.backends.embedded.test_hybrid import HashingEmbedder

TEXTS = ["the backup job runs nightly", "Evan bought a red bicycle", "Sam paints landscapes"]


async def _store(tmp_path: Path) -> Path:
    path = tmp_path / "memory.sqlite3"
    backend = EmbeddedBackend(path, embedder=HashingEmbedder())
    try:
        await backend.retain("global", [RetainItem(text) for text in TEXTS])
    finally:
        await backend.aclose()
    return path


def _rows(path: Path) -> list[tuple[int, int, str, bytes]]:
    with sqlite3.connect(path) as raw:
        return raw.execute(
            "SELECT v.vec_no, v.unit_key, u.id, v.vector FROM unit_vectors v"
            " JOIN units u ON u.seq = v.unit_key ORDER BY v.vec_no"
        ).fetchall()


async def test_the_cosines_of_stored_vectors_by_their_numbers(tmp_path: Path) -> None:
    """Each number found gives its unit's key and the float16 vector's own cosine; a number no
    longer stored (dropped since the search), a damaged blob, another model's vector and a number
    never stored are left out."""
    path = await _store(tmp_path)
    rows = _rows(path)
    query = (await HashingEmbedder().embed(["a red bicycle"]))[0]
    with sqlite3.connect(path) as raw:
        raw.execute("DELETE FROM unit_vectors WHERE vec_no = ?", (rows[0][0],))
        raw.execute("UPDATE unit_vectors SET vector = x'0102' WHERE vec_no = ?", (rows[2][0],))
    conn = connect(path)
    try:
        found = exact_by_vec_no(conn, HashingEmbedder.model_id, [r[0] for r in rows] + [999], query)
        assert exact_by_vec_no(conn, "another:model", [r[0] for r in rows], query) == {}
        assert exact_by_vec_no(conn, HashingEmbedder.model_id, [], query) == {}
    finally:
        conn.close()
    expected = float(np.frombuffer(rows[1][3], dtype="<f2").astype(np.float32) @ query)
    assert found == {rows[1][1]: expected}


async def test_the_units_of_stored_vectors(tmp_path: Path) -> None:
    """Each stored number names its unit's id (a random UUID, what a segment's probe checks); a
    number not stored names nothing."""
    path = await _store(tmp_path)
    rows = _rows(path)
    conn = connect(path)
    try:
        assert unit_ids(conn, [rows[0][0], rows[2][0], 12345]) == {
            rows[0][0]: rows[0][2],
            rows[2][0]: rows[2][2],
        }
        assert unit_ids(conn, []) == {}
    finally:
        conn.close()
