"""Every bank of a real embedded store given vectors of a new model, a batch at a time: each unit
embedded once, each bank walked from where its last batch ended, progress told per bank; an
embedder failing partway raises naming the bank, and keeps the batches stored before it."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path

import anyio
import numpy as np
import pytest
from numpy.typing import NDArray

from dreamer.backends.base import RetainItem
from dreamer.backends.embedded.backend import EmbeddedBackend
from dreamer.backends.embedded.reembed import reembed_store

MODEL = "test:hashed-words:1"


def hashed(texts: Sequence[str]) -> NDArray[np.float32]:
    """A deterministic embedding of the texts' words (no model needed for the store's part)."""
    rows = np.zeros((len(texts), 16), dtype=np.float32)
    for i, text in enumerate(texts):
        for word in text.split():
            rows[i, sum(word.encode()) % 16] += 1.0
    rows[:, 0] += 0.5
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def store_with(path: Path, banks: dict[str, int]) -> None:
    async def main() -> None:
        backend = EmbeddedBackend(path)  # no embedder: every unit is written without a vector
        try:
            for bank, count in banks.items():
                items = [RetainItem(content=f"unit {i} of {bank} about host{i % 5}") for i in range(count)]
                await backend.retain(bank, items)
        finally:
            await backend.aclose()

    anyio.run(main)


def vectors(path: Path) -> dict[str, int]:
    with sqlite3.connect(path) as conn:
        return dict(conn.execute("SELECT model_id, count(*) FROM unit_vectors GROUP BY 1").fetchall())


def test_each_unit_of_each_bank_is_embedded_once(tmp_path: Path) -> None:
    path = tmp_path / "memory.sqlite3"
    store_with(path, {"alpha": 11, "beta": 4, "empty": 0})
    asked: list[int] = []
    told: list[tuple[str, int]] = []

    async def embed(texts: Sequence[str]) -> NDArray[np.float32]:
        asked.append(len(texts))
        return hashed(texts)

    done = anyio.run(
        lambda: reembed_store(path, MODEL, embed, batch=3, progress=lambda b, n: told.append((b, n)))
    )
    assert {k: v for k, v in done.items() if v} == {"alpha": 11, "beta": 4}
    assert sum(asked) == 15 and max(asked) == 3
    assert told[-1] == ("beta", 4) and ("alpha", 11) in told
    assert vectors(path) == {MODEL: 15}
    again = anyio.run(lambda: reembed_store(path, MODEL, embed, batch=3))
    assert sum(again.values()) == 0 and sum(asked) == 15


def test_a_failing_embedder_names_the_bank_and_keeps_what_was_stored(tmp_path: Path) -> None:
    path = tmp_path / "memory.sqlite3"
    store_with(path, {"alpha": 10})
    calls = 0

    async def embed(texts: Sequence[str]) -> NDArray[np.float32] | None:
        nonlocal calls
        calls += 1
        return None if calls > 2 else hashed(texts)

    with pytest.raises(RuntimeError, match="bank 'alpha'"):
        anyio.run(lambda: reembed_store(path, MODEL, embed, batch=4))
    assert vectors(path) == {MODEL: 8}

    async def working(texts: Sequence[str]) -> NDArray[np.float32]:
        return hashed(texts)

    done = anyio.run(lambda: reembed_store(path, MODEL, working, batch=4))
    assert done == {"alpha": 2} and vectors(path) == {MODEL: 10}
