"""Units' vectors as the embedded store holds them: ``unit_vectors`` rows (unit key, model id,
float16 blob) stored, dropped and read back, and the backlog of units without one.

The cosines a recall reports are read here from the stored blobs (:func:`exact_cosines`,
:func:`exact_by_vec_no`), never from the codes that chose the hits, so they are the float16
vectors' own. :func:`backlog` lists a bank's units without a vector of the model, newest first.
numpy is only imported when a vector is handled, so a store without an embedder never needs it.

Why: ``docs/design/embedded-store.md`` (Hybrid recall).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

from dreamer.backends.embedded.schema import bank_key_range

if TYPE_CHECKING:
    import sqlite3

    import numpy as np
    from numpy.typing import NDArray

__all__ = [
    "backlog",
    "drop_other_models",
    "drop_vectors",
    "exact_by_vec_no",
    "exact_cosines",
    "store_vectors",
    "unit_ids",
]


def unit_ids(conn: sqlite3.Connection, vec_nos: Sequence[int]) -> dict[int, str]:
    """The id of the unit each of these stored vectors belongs to (a random UUID: a probe that
    another file, or an older copy of this one refilled since, cannot hold by chance)."""
    rows = conn.execute(
        "SELECT v.vec_no, u.id FROM json_each(?) k CROSS JOIN unit_vectors v ON v.vec_no = k.value"
        " CROSS JOIN units u ON u.seq = v.unit_key",
        (json.dumps(sorted(set(vec_nos))),),
    ).fetchall()
    return {int(vec_no): str(unit_id) for vec_no, unit_id in rows}


def exact_cosines(
    conn: sqlite3.Connection,
    model_id: str,
    keys: Sequence[int],
    query: NDArray[np.float32],
    *,
    by: Literal["unit_key", "vec_no"] = "unit_key",
) -> dict[int, float]:
    """The cosine to ``query`` of the stored vector of ``model_id`` of each listed unit (``by``
    ``unit_key``), or of each listed stored row (``by`` ``vec_no``: what a search of the codes
    found), keyed by the unit: what a float32 matrix of the blobs gave before the codes. A unit
    without a valid vector, or a row dropped or replaced since, is left out."""
    import numpy as np

    if not keys:
        return {}
    q = np.asarray(query, dtype=np.float32).reshape(-1)
    column = "vec_no" if by == "vec_no" else "unit_key"
    rows = conn.execute(
        "SELECT v.unit_key, v.vector FROM json_each(?) AS k"
        f" CROSS JOIN unit_vectors v ON v.{column} = k.value AND v.model_id = ?",
        (json.dumps(sorted({int(k) for k in keys})), model_id),
    ).fetchall()
    out: dict[int, float] = {}
    for key, blob in rows:
        if isinstance(blob, bytes) and len(blob) == 2 * q.shape[0]:
            vector = np.frombuffer(blob, dtype="<f2").astype(np.float32)
            if np.isfinite(vector).all():
                out[int(key)] = float(vector @ q)
    return out


def exact_by_vec_no(
    conn: sqlite3.Connection, model_id: str, vec_nos: Sequence[int], query: NDArray[np.float32]
) -> dict[int, float]:
    """:func:`exact_cosines` of the stored rows ``vec_nos``, keyed by their units."""
    return exact_cosines(conn, model_id, vec_nos, query, by="vec_no")


def store_vectors(conn: sqlite3.Connection, model_id: str, vectors: Sequence[tuple[int, bytes]]) -> None:
    """Store (unit key, blob) pairs of ``model_id``, replacing a unit's earlier vector of that model.

    Runs inside the caller's write transaction. A key whose unit is gone (deleted meanwhile) is
    skipped, so no vector outlives its unit.
    """
    for key, blob in vectors:
        conn.execute("DELETE FROM unit_vectors WHERE unit_key = ? AND model_id = ?", (key, model_id))
        conn.execute(
            "INSERT INTO unit_vectors (unit_key, model_id, vector)"
            " SELECT ?, ?, ? WHERE EXISTS (SELECT 1 FROM units WHERE seq = ?)",
            (key, model_id, blob, key),
        )


def drop_vectors(conn: sqlite3.Connection, model_id: str, keys: Sequence[int]) -> None:
    """Delete these units' vectors of ``model_id`` (damaged ones), so the backlog embeds them again."""
    for key in keys:
        conn.execute("DELETE FROM unit_vectors WHERE unit_key = ? AND model_id = ?", (key, model_id))


def drop_other_models(conn: sqlite3.Connection, bank_no: int, model_id: str) -> int:
    """Delete the bank's vectors of every model but ``model_id``; how many went."""
    first_key, last_key = bank_key_range(bank_no)
    cursor = conn.execute(
        "DELETE FROM unit_vectors WHERE unit_key BETWEEN ? AND ? AND model_id <> ?",
        (first_key, last_key, model_id),
    )
    return int(cursor.rowcount)


def backlog(
    conn: sqlite3.Connection, bank_no: int, model_id: str, limit: int, *, below: int | None = None
) -> list[tuple[int, str]]:
    """Up to ``limit`` of the bank's units without a vector of ``model_id``, newest first: (key,
    text); only those with a key below ``below``, when given (a pass that goes on from where its
    last batch ended)."""
    first_key, last_key = bank_key_range(bank_no)
    if below is not None:
        last_key = min(last_key, below - 1)
    rows = conn.execute(
        """
        SELECT u.seq, u.text FROM units u
        WHERE u.seq BETWEEN ? AND ?
          AND NOT EXISTS (SELECT 1 FROM unit_vectors v WHERE v.unit_key = u.seq AND v.model_id = ?)
        ORDER BY u.seq DESC LIMIT ?
        """,
        (first_key, last_key, model_id, limit),
    ).fetchall()
    return [(int(key), str(text)) for key, text in rows]
