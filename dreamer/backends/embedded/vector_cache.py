"""The embedded store's per-bank vector cache: one per store file and process, refreshed from
the rows added since it last looked, each bank's vectors past one page kept on disk.

Each bank's vectors of one model are read in ``vec_no`` order (it only grows); once the rows in
memory (:class:`~.vector_matrix.BankMatrix`) fill a page (`SEGMENT_ROWS`, 4,096), they become an
immutable segment file in the bank's folder beside the store (:func:`segments_folder`,
:class:`dreamer.embeddings.segments.SegmentIndex`) and leave memory, so a process holds at most a
page of a bank whatever its size, and the next process reads only the rows past the segments. A
dropped row bumps the bank's ``vector_drops`` counter: the next refresh reloads the bank, and a
manifest written at another count is set aside and its segments built again (a segment may hold
the dropped row). Segments whose probes name units the file does not hold (an older copy of the
store, another store) are built again too. A blob that cannot be a vector of the model (wrong
length, not finite) is left out and reported, never searched. :meth:`VectorCache.prefetch` streams
a bank's segments once for a batch of queries, for the recalls that follow.

Why: ``docs/design/embedded-store.md`` (Hybrid recall, Vectors on disk).
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from dreamer.backends.embedded.schema import bank_key_range
from dreamer.backends.embedded.vector_matrix import BankMatrix, MatrixView
from dreamer.backends.embedded.vector_store import unit_ids
from dreamer.embeddings import segmentfile
from dreamer.embeddings.segmentfile import SegmentFile
from dreamer.embeddings.segments import SegmentIndex

if TYPE_CHECKING:
    import sqlite3

    import numpy as np
    from numpy.typing import NDArray

__all__ = ["DEFAULT_CACHE_BYTES", "Refreshed", "VectorCache", "segments_folder", "shared_cache"]

#: Rows read from the file at a time when a bank's matrix is loaded: each chunk's blobs and its
#: float32 temporary live until it is quantised (8,192 rows held 105 MB at the peak of a load of
#: 100k vectors, 1,024 about 50 MB, most of it the matrix kept).
_LOAD_CHUNK = 1024
#: Matrices of all cached banks together stay below this; the least recently used bank goes first.
DEFAULT_CACHE_BYTES = 512 * 1024 * 1024


@dataclass(frozen=True)
class Refreshed:
    """A bank's matrix after a refresh, and the keys whose stored blob was not a valid vector."""

    bank: MatrixView | None
    damaged: tuple[int, ...]


class VectorCache:
    """Per-bank vectors of one store file in one process: the rows past the bank's on-disk
    segments (under ``folder``; none given: every row in memory) as int8 codes, refreshed
    incrementally, and safe to share between the backends of that file (a lock around each
    refresh)."""

    def __init__(
        self,
        max_bytes: int = DEFAULT_CACHE_BYTES,
        folder: Path | None = None,
        segment_rows: int | None = None,
        *,
        writable: bool = True,
    ) -> None:
        self.max_bytes = max_bytes
        self.folder = folder
        self.segment_rows = segment_rows
        #: Whether this process writes segments (else it searches those there and keeps the rest
        #: of each bank in memory).
        self.writable = writable
        self._banks: OrderedDict[tuple[str, str], BankMatrix] = OrderedDict()
        self._lock = threading.Lock()
        #: Segment hits found ahead for a batch of queries (:meth:`prefetch`): (bank, model, query
        #: bytes) -> (the opened segments searched, how many hits, the hits). The opened segments
        #: themselves, not their names: segments built again after a drop reuse the names.
        self._ahead: dict[
            tuple[str, str, bytes], tuple[tuple[SegmentFile, ...], int, list[tuple[int, float]]]
        ] = {}

    def refresh(self, conn: sqlite3.Connection, bank_id: str, model_id: str, dimension: int) -> Refreshed:
        """The bank's vectors of ``model_id`` as stored now (None for an unknown bank)."""
        with self._lock:
            conn.execute("BEGIN")  # one read snapshot for the counters and the rows
            try:
                return self._refresh(conn, bank_id, model_id, dimension)
            finally:
                conn.execute("COMMIT")

    def forget(self, bank_id: str, model_id: str) -> None:
        """Drop the bank's matrix, so the next refresh loads it again from the file (and its
        segments from their folder)."""
        with self._lock:
            self._banks.pop((bank_id, model_id), None)
            self._ahead = {k: v for k, v in self._ahead.items() if k[:2] != (bank_id, model_id)}

    # --- segment hits found ahead ---------------------------------------------------------------

    def prefetch(
        self, bank_id: str, model_id: str, view: MatrixView, queries: NDArray[np.float32], want: int
    ) -> None:
        """Stream the view's segments once for all ``queries`` and keep each query's ``want``
        best segment hits, so the recalls that follow (one per query) read no segment
        (:meth:`ahead`). Replaces what an earlier batch left. ``OSError`` as for a search."""
        import numpy as np

        matrix = np.asarray(queries, dtype=np.float32)
        hits = segmentfile.nearest(view.segments, matrix, want) if view.segments else [[] for _ in matrix]
        with self._lock:
            self._ahead = {
                (bank_id, model_id, np.ascontiguousarray(query).tobytes()): (view.segments, want, found)
                for query, found in zip(matrix, hits, strict=True)
            }

    def ahead(
        self, bank_id: str, model_id: str, view: MatrixView, query: NDArray[np.float32], want: int
    ) -> list[tuple[int, float]] | None:
        """The segment hits :meth:`prefetch` found for this query over these very segments, when
        it found at least ``want``; else None (the caller streams the segments)."""
        import numpy as np

        with self._lock:
            kept = self._ahead.get(
                (bank_id, model_id, np.ascontiguousarray(query, dtype=np.float32).tobytes())
            )
        if kept is None or kept[1] < want or not _same(kept[0], view.segments):
            return None
        return kept[2]

    # --- loading ----------------------------------------------------------------------------------

    def _index(
        self, row: Mapping[str, Any], bank_id: str, model_id: str, dimension: int
    ) -> SegmentIndex | None:
        """The bank's on-disk segments of ``model_id``: one folder per bank, model and dimension;
        a manifest written before a vector of the bank was dropped is set aside (its segments may
        hold the dropped rows) and built again."""
        if self.folder is None:
            return None
        named: dict[str, str | int] = {
            "bank": bank_id,
            "bank_no": int(row["bank_no"]),
            "created_at": str(row["created_at"]),
            "model": model_id,
            "dimension": dimension,
        }
        name = hashlib.sha256(json.dumps(named, sort_keys=True).encode()).hexdigest()[:24]
        identity = {**named, "drops": int(row["vector_drops"])}
        return SegmentIndex(
            self.folder / name, identity, dimension, writable=self.writable, segment_rows=self.segment_rows
        )

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
        bank_no, drops, highest = int(row["bank_no"]), int(row["vector_drops"]), int(row["highest"] or 0)
        cached = self._banks.get(entry)
        if (
            cached is None
            or (cached.bank_no, cached.created_at) != (bank_no, row["created_at"])  # another file's bank
            or highest < cached.last_vec_no  # an older copy of the file
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
                index=self._index(row, bank_id, model_id, dimension),
            )
            self._resume(conn, cached, highest)
            self._banks[entry] = cached
        cached.unit_count = int(row["unit_count"])
        damaged = self._read(conn, cached)
        self._banks.move_to_end(entry)
        self._evict(keep=entry)
        size = cached.size
        view = MatrixView(
            cached.codes[:size], cached.scales[:size], cached.keys[:size], cached.unit_count,
            cached.index.files if cached.index is not None else (),
        )  # fmt: skip
        return Refreshed(view, tuple(damaged))

    @staticmethod
    def _resume(conn: sqlite3.Connection, cached: BankMatrix, highest: int) -> None:
        """Start reading after what the bank's segments cover, when they are of this very file: the
        file holds every row up to where they end, and the rows they were checked by (probes)."""
        index = cached.index
        if index is None or not index.segments:
            return
        probes = index.probes()
        found = unit_ids(conn, [key for key, _ in probes])
        if highest < index.covered or any(found.get(key) != unit for key, unit in probes):
            index.reset()  # an older copy of the file, or another one: build again
            return
        cached.last_vec_no = index.covered

    def _read(self, conn: sqlite3.Connection, cached: BankMatrix) -> list[int]:
        """Read the bank's rows past ``cached.last_vec_no`` in ``vec_no`` order, a chunk at a time,
        handing each full page of them to the bank's segments; the unit keys of damaged rows."""
        first_key, last_key = bank_key_range(cached.bank_no)
        if (
            cached.last_vec_no == 0 and cached.index is None
        ):  # the whole bank, by the (unit_key, model_id) index
            sql = (
                "SELECT vec_no, unit_key, vector FROM unit_vectors"
                " WHERE unit_key BETWEEN ?2 AND ?3 AND model_id = ?4"
            )
            cached.reserve(cached.unit_count)  # one allocation for a whole bank, not repeated doubling
        else:  # in vec_no order, from where the segments or the last refresh ended
            sql = (
                "SELECT vec_no, unit_key, vector FROM unit_vectors"
                " WHERE vec_no > ?1 AND +unit_key BETWEEN ?2 AND ?3 AND +model_id = ?4 ORDER BY vec_no"
            )
        damaged: list[int] = []
        building = True
        # A chunk no larger than a page, so a segment holds one page (and at most a chunk more).
        chunk = _LOAD_CHUNK if cached.index is None else min(_LOAD_CHUNK, cached.index.segment_rows)
        reading = True
        while reading:
            reading = False
            cursor = conn.execute(sql, (cached.last_vec_no, first_key, last_key, cached.model_id))
            try:
                while rows := cursor.fetchmany(chunk):  # bounded transient memory for a large bank
                    damaged.extend(self._load(cached, rows))
                    index = cached.index
                    if (
                        building
                        and index is not None
                        and cached.size >= max(index.segment_rows, cached.spill_at)
                    ):
                        spilled = self._spill(conn, cached)
                        building = spilled != "kept"
                        if spilled == "moved":  # read again from where the other process's segments end
                            reading = True
                            break
            finally:
                cursor.close()
        if not building and cached.index is not None:  # not saved: tried again a page of rows later
            cached.spill_at = cached.size + cached.index.segment_rows
        return damaged

    @staticmethod
    def _spill(conn: sqlite3.Connection, cached: BankMatrix) -> Literal["built", "kept", "moved"]:
        """Hand the rows in memory to the bank's segments as one segment (``built``); ``kept`` when
        it could not be saved (they stay in memory and are searched there); ``moved`` when another
        process built meanwhile: the rows are let go, to be read again from where its segments end."""
        index = cached.index
        assert index is not None
        size = cached.size
        covered = index.covered
        ends = [int(cached.keys[0]), int(cached.keys[size - 1])]
        ids = unit_ids(conn, ends)
        probes = [(key, ids.get(key, "")) for key in ends]
        built = index.add_segment(
            [int(k) for k in cached.keys[:size]],
            segmentfile.Quantised(cached.codes[:size], cached.scales[:size]),
            last_key=cached.last_vec_no,
            probes=probes,
            damaged={},
        )
        if built:
            cached.clear()
            return "built"
        if index.covered != covered:
            cached.clear()
            cached.last_vec_no = index.covered
            return "moved"
        return "kept"

    @staticmethod
    def _load(cached: BankMatrix, rows: Sequence[tuple[int, int, bytes]]) -> list[int]:
        """Append the valid rows to the bank's matrix; the keys of the damaged ones."""
        import numpy as np

        dimension = cached.dimension
        damaged: list[int] = []
        keys: list[int] = []
        units: list[int] = []
        blobs: list[bytes] = []
        for vec_no, key, blob in rows:
            cached.last_vec_no = max(cached.last_vec_no, int(vec_no))
            if not isinstance(blob, bytes) or len(blob) != 2 * dimension:
                damaged.append(int(key))
                continue
            keys.append(int(vec_no))
            units.append(int(key))
            blobs.append(blob)
        if keys:
            block = np.frombuffer(b"".join(blobs), dtype="<f2").reshape(len(keys), dimension)
            finite = np.isfinite(block).all(axis=1)
            if not finite.all():
                damaged.extend(u for u, ok in zip(units, finite, strict=True) if not ok)
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


def _same(searched: Sequence[SegmentFile], now: Sequence[SegmentFile]) -> bool:
    """Whether a view's segments are the very ones opened for an earlier search."""
    return len(searched) == len(now) and all(a is b for a, b in zip(searched, now, strict=True))


def segments_folder(path: Path) -> Path:
    """Where the store file at ``path`` keeps its banks' on-disk vector segments: beside it."""
    return path.with_name(f"{path.name}.vectors")


def shared_cache(path: Path) -> VectorCache:
    """The process's cache for the store file at ``path`` (which must exist), its segments in
    :func:`segments_folder`, written only by a process of the user who owns the file: an
    administrator's ``sudo dreamer recall`` on the service's store searches the segments there and
    writes none its daemon could not read or replace.

    Keyed by the file's identity as well as its path: a file replaced at the same path (a restored
    copy, a new store) gets a new cache instead of one that already saw later ``vec_no`` values.
    """
    found = os.stat(path)
    key = (str(Path(path).resolve()), found.st_dev, found.st_ino)
    owner = found.st_uid == os.geteuid()
    with _SHARED_LOCK:
        return _SHARED.setdefault(key, VectorCache(folder=segments_folder(Path(path)), writable=owner))
