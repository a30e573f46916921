"""Units' vectors in the embedded store: stored rows, the per-bank matrix cache and the backlog.

Each vector is a ``unit_vectors`` row (unit key, model id, float16 blob). :class:`VectorCache` keeps
each bank's vectors of one model as int8 codes with one float32 scale per row, a quarter of a
float32 matrix's memory (147 MiB at 100k units of 384 dimensions became 37 MiB), one cache per
store file and process (:func:`shared_cache`, so the daemon's runs share it). A recall scores a
:class:`MatrixView` of it a chunk at a time (the codes widened into one small float32 buffer: 5.3
ms a query at 100k against 4.9 for float32, where widening float16 took 62) and rescores the
hits it keeps from their stored blobs (:func:`exact_cosines`), so the cosines it reports are the
float16 vectors' own. It refreshes the cache from the rows added since it last looked (``vec_no``
only grows); a dropped row bumps the bank's
``vector_drops`` counter, which makes the next refresh reload the bank. A blob that cannot be a
vector of the model (wrong length, not finite) is left out and reported, never searched.
:func:`backlog` lists a bank's units without a vector of the model, newest first. numpy is only
imported when a vector is handled, so a store without an embedder never needs it.

Why: ``docs/design/embedded-store.md`` (Hybrid recall).
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dreamer.backends.embedded.schema import bank_key_range
from dreamer.embeddings.vectors import grown_capacity

if TYPE_CHECKING:
    import sqlite3

    import numpy as np
    from numpy.typing import NDArray

__all__ = [
    "BankMatrix",
    "MatrixView",
    "Refreshed",
    "VectorCache",
    "backlog",
    "drop_vectors",
    "exact_cosines",
    "quantise",
    "shared_cache",
    "store_vectors",
]

#: Rows read from the file at a time when a bank's matrix is loaded: each chunk's blobs and its
#: float32 temporary live until it is quantised (8,192 rows held 105 MB at the peak of a load of
#: 100k vectors, 1,024 about 50 MB, most of it the matrix kept).
_LOAD_CHUNK = 1024
#: Rows widened at a time when a view is scored.
_SCORE_CHUNK = 4096
#: Matrices of all cached banks together stay below this; the least recently used bank goes first.
DEFAULT_CACHE_BYTES = 512 * 1024 * 1024


@dataclass
class BankMatrix:
    """One bank's vectors of one model: row ``i`` of ``codes[:size]`` times ``scales[i]`` is the
    vector of ``keys[i]``, to within half a step of its int8 code."""

    bank_id: str
    bank_no: int
    model_id: str
    dimension: int
    codes: NDArray[np.int8]
    scales: NDArray[np.float32]
    keys: NDArray[np.int64]
    size: int = 0
    row_of_key: dict[int, int] = field(default_factory=dict)
    #: Every row up to this ``vec_no`` has been seen (0: the bank is not loaded yet).
    last_vec_no: int = 0
    drops: int = 0
    created_at: str = ""
    unit_count: int = 0

    @property
    def nbytes(self) -> int:
        return int(self.codes.nbytes + self.scales.nbytes + self.keys.nbytes)

    @property
    def capacity(self) -> int:
        return int(self.codes.shape[0])

    def view(self) -> NDArray[np.float32]:
        """The filled rows, decoded (for tests: a search scores the codes a chunk at a time)."""
        import numpy as np

        out: NDArray[np.float32] = self.codes[: self.size].astype(np.float32) * self.scales[: self.size, None]
        return out

    def reserve(self, capacity: int) -> None:
        """Room for ``capacity`` rows without another allocation."""
        import numpy as np

        if capacity <= self.capacity:
            return
        codes = np.empty((capacity, self.dimension), dtype=np.int8)
        codes[: self.size] = self.codes[: self.size]
        scales = np.empty(capacity, dtype=np.float32)
        scales[: self.size] = self.scales[: self.size]
        key_array = np.empty(capacity, dtype=np.int64)
        key_array[: self.size] = self.keys[: self.size]
        self.codes, self.scales, self.keys = codes, scales, key_array

    def append(self, keys: Sequence[int], rows: NDArray[np.floating[Any]]) -> None:
        """Add rows (a key already present is overwritten in place), growing capacity by an eighth
        (:func:`grown_capacity`)."""
        codes, scales = quantise(rows)
        fresh_keys: list[int] = []
        fresh_rows: list[int] = []
        for index, key in enumerate(keys):
            row = self.row_of_key.get(key)
            if row is None:
                fresh_keys.append(key)
                fresh_rows.append(index)
            else:
                self.codes[row], self.scales[row] = codes[index], scales[index]
        needed = self.size + len(fresh_keys)
        if needed > self.capacity:
            self.reserve(grown_capacity(self.capacity, needed))
        if fresh_keys:
            end = self.size + len(fresh_keys)
            self.codes[self.size : end] = codes[fresh_rows]
            self.scales[self.size : end] = scales[fresh_rows]
            self.keys[self.size : end] = fresh_keys
            for offset, key in enumerate(fresh_keys):
                self.row_of_key[key] = self.size + offset
            self.size = end


def quantise(rows: NDArray[np.floating[Any]]) -> tuple[NDArray[np.int8], NDArray[np.float32]]:
    """Each row as int8 codes and one scale (its largest magnitude over 127; 1 for a zero row)."""
    import numpy as np

    scaled = np.array(rows, dtype=np.float32)  # a copy, scaled in place: one temporary of the rows
    if not scaled.size:
        return np.zeros(scaled.shape, dtype=np.int8), np.ones(scaled.shape[0], dtype=np.float32)
    peak = np.maximum(scaled.max(axis=1), -scaled.min(axis=1))
    scales = np.where(peak > 0, peak / 127.0, 1.0).astype(np.float32)
    scaled /= scales[:, None]
    np.rint(scaled, out=scaled)
    np.clip(scaled, -127, 127, out=scaled)
    return scaled.astype(np.int8), scales


@dataclass(frozen=True)
class MatrixView:
    """What one recall searches: the bank's rows as of its refresh, unchanged by later appends."""

    codes: NDArray[np.int8]
    scales: NDArray[np.float32]
    keys: NDArray[np.int64]
    unit_count: int
    _row_of_key: Mapping[int, int]

    @property
    def size(self) -> int:
        return int(self.keys.shape[0])

    def scores(self, query: NDArray[np.float32]) -> NDArray[np.float32]:
        """Every row's approximate cosine to ``query`` (a unit vector), from the codes, widened
        :data:`_SCORE_CHUNK` rows at a time into one buffer."""
        import numpy as np

        q = np.asarray(query, dtype=np.float32).reshape(-1)
        out = np.empty(self.size, dtype=np.float32)
        buffer = np.empty((min(_SCORE_CHUNK, self.size), self.codes.shape[1]), dtype=np.float32)
        for start in range(0, self.size, _SCORE_CHUNK):
            block = self.codes[start : start + _SCORE_CHUNK]
            wide = buffer[: block.shape[0]]
            np.copyto(wide, block, casting="unsafe")
            out[start : start + block.shape[0]] = (wide @ q) * self.scales[start : start + block.shape[0]]
        return out

    def row(self, key: int) -> int | None:
        """The row of a unit's vector in this view, or None."""
        row = self._row_of_key.get(key)
        if row is None or row >= self.size or int(self.keys[row]) != key:
            return None  # added (or moved by a reallocation) after this view was taken
        return row


@dataclass(frozen=True)
class Refreshed:
    """A bank's matrix after a refresh, and the keys whose stored blob was not a valid vector."""

    bank: MatrixView | None
    damaged: tuple[int, ...]


class VectorCache:
    """Per-bank float32 matrices of one store file in one process, refreshed incrementally and
    safe to share between the backends of that file (a lock around each refresh)."""

    def __init__(self, max_bytes: int = DEFAULT_CACHE_BYTES) -> None:
        self.max_bytes = max_bytes
        self._banks: OrderedDict[tuple[str, str], BankMatrix] = OrderedDict()
        self._lock = threading.Lock()

    def refresh(self, conn: sqlite3.Connection, bank_id: str, model_id: str, dimension: int) -> Refreshed:
        """The bank's vectors of ``model_id`` as stored now (None for an unknown bank)."""
        with self._lock:
            conn.execute("BEGIN")  # one read snapshot for the counters and the rows
            try:
                return self._refresh(conn, bank_id, model_id, dimension)
            finally:
                conn.execute("COMMIT")

    def forget(self, bank_id: str, model_id: str) -> None:
        """Drop the bank's matrix, so the next refresh loads it again from the file."""
        with self._lock:
            self._banks.pop((bank_id, model_id), None)

    def _refresh(self, conn: sqlite3.Connection, bank_id: str, model_id: str, dimension: int) -> Refreshed:
        import numpy as np

        row = conn.execute(
            "SELECT bank_no, created_at, unit_count, vector_drops,"
            " (SELECT MAX(vec_no) FROM unit_vectors) AS highest FROM banks WHERE bank_id = ?",
            (bank_id,),
        ).fetchone()
        entry = (bank_id, model_id)
        if row is None or row["bank_no"] is None:
            self._banks.pop(entry, None)
            return Refreshed(None, ())
        bank_no, drops = int(row["bank_no"]), int(row["vector_drops"])
        cached = self._banks.get(entry)
        if (
            cached is None
            or (cached.bank_no, cached.created_at) != (bank_no, row["created_at"])  # another file's bank
            or int(row["highest"] or 0) < cached.last_vec_no  # an older copy of the file
            or cached.dimension != dimension
            or cached.drops != drops
        ):
            cached = BankMatrix(
                bank_id,
                bank_no,
                model_id,
                dimension,
                codes=np.empty((0, dimension), dtype=np.int8),
                scales=np.empty(0, dtype=np.float32),
                keys=np.empty(0, dtype=np.int64),
                drops=drops,
                created_at=row["created_at"],
            )
            self._banks[entry] = cached
        cached.unit_count = int(row["unit_count"])
        first_key, last_key = bank_key_range(bank_no)
        fresh = cached.last_vec_no == 0
        if fresh:  # the whole bank, by the (unit_key, model_id) index
            sql = (
                "SELECT vec_no, unit_key, vector FROM unit_vectors"
                " WHERE unit_key BETWEEN ?2 AND ?3 AND model_id = ?4"
            )
            cached.reserve(cached.unit_count)  # one allocation for a whole bank, not repeated doubling
        else:  # what was added since, by vec_no (the key range must not pick the index instead)
            sql = (
                "SELECT vec_no, unit_key, vector FROM unit_vectors"
                " WHERE vec_no > ?1 AND +unit_key BETWEEN ?2 AND ?3 AND +model_id = ?4"
            )
        damaged: list[int] = []
        cursor = conn.execute(sql, (cached.last_vec_no, first_key, last_key, model_id))
        try:
            while rows := cursor.fetchmany(_LOAD_CHUNK):  # bounded transient memory for a large bank
                damaged.extend(self._load(cached, rows))
        finally:
            cursor.close()
        if fresh:  # later refreshes read only what comes after this snapshot, even if it held none
            cached.last_vec_no = max(cached.last_vec_no, int(row["highest"] or 0))
        self._banks.move_to_end(entry)
        self._evict(keep=entry)
        size = cached.size
        view = MatrixView(
            cached.codes[:size], cached.scales[:size], cached.keys[:size], cached.unit_count,
            cached.row_of_key,
        )  # fmt: skip
        return Refreshed(view, tuple(damaged))

    @staticmethod
    def _load(cached: BankMatrix, rows: Sequence[tuple[int, int, bytes]]) -> list[int]:
        """Append the valid rows to the bank's matrix; the keys of the damaged ones."""
        import numpy as np

        dimension = cached.dimension
        damaged: list[int] = []
        keys: list[int] = []
        blobs: list[bytes] = []
        for vec_no, key, blob in rows:
            cached.last_vec_no = max(cached.last_vec_no, int(vec_no))
            if not isinstance(blob, bytes) or len(blob) != 2 * dimension:
                damaged.append(int(key))
                continue
            keys.append(int(key))
            blobs.append(blob)
        if keys:
            block = np.frombuffer(b"".join(blobs), dtype="<f2").reshape(len(keys), dimension)
            finite = np.isfinite(block).all(axis=1)
            if not finite.all():
                damaged.extend(k for k, ok in zip(keys, finite, strict=True) if not ok)
                keys = [k for k, ok in zip(keys, finite, strict=True) if ok]
                block = block[finite]
            cached.append(keys, block)
        return damaged

    def _evict(self, keep: tuple[str, str]) -> None:
        total = sum(bank.nbytes for bank in self._banks.values())
        for entry in list(self._banks):
            if total <= self.max_bytes:
                return
            if entry != keep:
                total -= self._banks.pop(entry).nbytes


_SHARED: dict[tuple[str, int, int], VectorCache] = {}
_SHARED_LOCK = threading.Lock()


def shared_cache(path: Path) -> VectorCache:
    """The process's cache for the store file at ``path`` (which must exist).

    Keyed by the file's identity as well as its path: a file replaced at the same path (a restored
    copy, a new store) gets a new cache instead of one that already saw later ``vec_no`` values.
    """
    found = os.stat(path)
    key = (str(Path(path).resolve()), found.st_dev, found.st_ino)
    with _SHARED_LOCK:
        return _SHARED.setdefault(key, VectorCache())


def exact_cosines(
    conn: sqlite3.Connection, model_id: str, keys: Sequence[int], query: NDArray[np.float32]
) -> dict[int, float]:
    """The cosine of each listed unit's stored vector of ``model_id`` to ``query``: what a float32
    matrix of the blobs gave before the codes. A unit without a valid vector is left out."""
    import json

    import numpy as np

    if not keys:
        return {}
    q = np.asarray(query, dtype=np.float32).reshape(-1)
    rows = conn.execute(
        "SELECT v.unit_key, v.vector FROM json_each(?) AS k"
        " CROSS JOIN unit_vectors v ON v.unit_key = k.value AND v.model_id = ?",
        (json.dumps(sorted({int(k) for k in keys})), model_id),
    ).fetchall()
    out: dict[int, float] = {}
    for key, blob in rows:
        if isinstance(blob, bytes) and len(blob) == 2 * q.shape[0]:
            vector = np.frombuffer(blob, dtype="<f2").astype(np.float32)
            if np.isfinite(vector).all():
                out[int(key)] = float(vector @ q)
    return out


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


def backlog(conn: sqlite3.Connection, bank_no: int, model_id: str, limit: int) -> list[tuple[int, str]]:
    """Up to ``limit`` of the bank's units without a vector of ``model_id``, newest first: (key, text)."""
    first_key, last_key = bank_key_range(bank_no)
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
