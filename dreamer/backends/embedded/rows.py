"""The embedded store's rows as the contract's values: units, recall hits, bank activity, and the
unit vectors a write stores.

Pure conversions, kept apart from the backend class so the shape of a stored row is read in one
place (the columns are :data:`.schema.UNIT_COLUMNS`).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from dreamer.backends.base import BankActivity, MemoryUnit, RecallItem
from dreamer.backends.embedded.schema import parse_time
from dreamer.backends.embedded.search import bm25_to_score

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

__all__ = ["activity_from_rows", "blobs", "recall_item_from_row", "unit_from_row"]


def activity_from_rows(wanted: Sequence[str], rows: Mapping[str, sqlite3.Row]) -> dict[str, BankActivity]:
    """The activity of each wanted bank from its counters' row; a bank without one does not exist."""
    result: dict[str, BankActivity] = {}
    for bank_id in wanted:
        row = rows.get(bank_id)
        if row is None:
            result[bank_id] = BankActivity(bank_id, unit_count=0, last_write_at=None, exists=False)
        else:
            result[bank_id] = BankActivity(
                bank_id,
                unit_count=int(row["unit_count"]),
                last_write_at=parse_time(row["last_write_at"]),
            )
    return result


def unit_from_row(row: sqlite3.Row) -> MemoryUnit:
    """A stored unit as the contract's :class:`MemoryUnit`."""
    created = parse_time(row["created_at"])
    assert created is not None  # the column is NOT NULL
    return MemoryUnit(
        id=row["id"],
        bank_id=row["bank_id"],
        text=row["text"],
        fact_type=row["fact_type"],
        created_at=created,
        mentioned_at=parse_time(row["mentioned_at"]),
        document_id=row["document_id"],
        context=row["context"],
        tags=tuple(json.loads(row["tags"])),
        metadata=json.loads(row["metadata"]),
        proof_count=int(row["proof_count"]),
    )


def blobs(keys: Sequence[int | None], vectors: NDArray[np.float32]) -> list[tuple[int, bytes]]:
    """(unit key, float16 blob) for each item that wrote a unit."""
    from dreamer.embeddings.vectors import to_blob

    return [(key, to_blob(vector)) for key, vector in zip(keys, vectors, strict=True) if key is not None]


def recall_item_from_row(
    row: sqlite3.Row, *, score: float | None = None, semantic: float | None = None
) -> RecallItem:
    """A search hit as a :class:`RecallItem`; without ``score``, the hit's BM25 rank scaled to [0, 1]."""
    return RecallItem(
        id=row["id"],
        bank_id=row["bank_id"],
        text=row["text"],
        fact_type=row["fact_type"],
        score=bm25_to_score(float(row["rank"])) if score is None else score,
        semantic=semantic,
        document_id=row["document_id"],
        tags=tuple(json.loads(row["tags"])),
        metadata=json.loads(row["metadata"]),
        mentioned_at=parse_time(row["mentioned_at"]),
    )
