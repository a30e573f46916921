"""A bank's vectors held in memory by the embedded store, and what one recall searches.

:class:`BankMatrix` keeps a bank's vectors of one model as int8 codes with one float32 scale per
row (:func:`quantise`), a quarter of a float32 matrix's memory: the rows past the bank's on-disk
segments, or the whole bank when it has none. :class:`MatrixView` is the bank as one recall
sees it, its segments and those rows: it scores the rows a chunk at a time (the codes widened into
one small float32 buffer: 5.3 ms a query at 100k rows against 4.9 for float32, where widening
float16 took 62) and streams the segments once for a whole batch of queries
(:func:`dreamer.embeddings.segmentfile.nearest`). numpy is only imported when a vector is
handled, so a store without an embedder never needs it.

Why: ``docs/design/embedded-store.md`` (Hybrid recall, Vectors on disk).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dreamer.embeddings import segmentfile
from dreamer.embeddings.segmentfile import SegmentFile
from dreamer.embeddings.segments import SegmentIndex
from dreamer.embeddings.vectors import grown_capacity

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

__all__ = ["BankMatrix", "MatrixView", "quantise"]

#: Rows widened at a time when a view is scored.
_SCORE_CHUNK = 4096


@dataclass
class BankMatrix:
    """One bank's vectors of one model as the cache holds them: those past its on-disk segments
    (``index``; all of them without one) in memory, row ``i`` of ``codes[:size]`` times
    ``scales[i]`` being the vector stored as ``vec_no`` ``keys[i]``, to within half a step of its
    int8 code. Each stored row is read once (``vec_no`` only grows), so rows are only appended."""

    bank_id: str
    bank_no: int
    model_id: str
    dimension: int
    codes: NDArray[np.int8]
    scales: NDArray[np.float32]
    keys: NDArray[np.int64]
    size: int = 0
    #: Every row up to this ``vec_no`` has been seen (0: the bank is not loaded yet).
    last_vec_no: int = 0
    drops: int = 0
    created_at: str = ""
    unit_count: int = 0
    #: The segments holding the rows up to ``index.covered`` (None: every row is in memory).
    index: SegmentIndex | None = None
    #: The rows in memory at which a segment is next tried, after one could not be saved.
    spill_at: int = 0

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
        """Add rows after the last, growing capacity by an eighth (:func:`grown_capacity`)."""
        codes, scales = quantise(rows)
        end = self.size + len(keys)
        if end > self.capacity:
            self.reserve(grown_capacity(self.capacity, end))
        self.codes[self.size : end] = codes
        self.scales[self.size : end] = scales
        self.keys[self.size : end] = keys
        self.size = end

    def clear(self) -> None:
        """Let go of the rows in memory (they are in a segment now)."""
        import numpy as np

        self.codes = np.empty((0, self.dimension), dtype=np.int8)
        self.scales = np.empty(0, dtype=np.float32)
        self.keys = np.empty(0, dtype=np.int64)
        self.size = 0
        self.spill_at = 0


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
    """What one recall searches: the bank's on-disk segments and its rows in memory as of its
    refresh, unchanged by later appends. Keys are the stored vectors' ``vec_no``."""

    codes: NDArray[np.int8]
    scales: NDArray[np.float32]
    keys: NDArray[np.int64]
    unit_count: int
    segments: tuple[SegmentFile, ...] = ()

    @property
    def size(self) -> int:
        """The vectors searched: in segments and in memory."""
        return int(self.keys.shape[0]) + sum(segment.rows for segment in self.segments)

    @property
    def in_memory(self) -> int:
        return int(self.keys.shape[0])

    def scores(self, query: NDArray[np.float32]) -> NDArray[np.float32]:
        """Every in-memory row's approximate cosine to ``query`` (a unit vector), from the codes,
        widened :data:`_SCORE_CHUNK` rows at a time into one buffer."""
        import numpy as np

        q = np.asarray(query, dtype=np.float32).reshape(-1)
        out = np.empty(self.in_memory, dtype=np.float32)
        buffer = np.empty((min(_SCORE_CHUNK, self.in_memory), self.codes.shape[1]), dtype=np.float32)
        for start in range(0, self.in_memory, _SCORE_CHUNK):
            block = self.codes[start : start + _SCORE_CHUNK]
            wide = buffer[: block.shape[0]]
            np.copyto(wide, block, casting="unsafe")
            out[start : start + block.shape[0]] = (wide @ q) * self.scales[start : start + block.shape[0]]
        return out

    def nearest(
        self,
        queries: NDArray[np.float32],
        want: int,
        from_segments: Sequence[Sequence[tuple[int, float]]] | None = None,
    ) -> list[list[tuple[int, float]]]:
        """For each query (unit vectors, one a row), the ``want`` keys with the highest approximate
        cosines, best first: the segments streamed once for all the queries (or their hits given as
        ``from_segments``, already found for at least ``want``), the rows in memory scored here.
        ``OSError`` when a segment can no longer be read."""
        import numpy as np

        matrix = np.asarray(queries, dtype=np.float32).reshape(-1, self.codes.shape[1])
        if want <= 0:
            return [[] for _ in range(len(matrix))]
        found: Sequence[Sequence[tuple[int, float]]]
        if from_segments is not None:
            found = from_segments
        elif self.segments:
            found = segmentfile.nearest(self.segments, matrix, want)
        else:
            found = [[] for _ in range(len(matrix))]
        out = []
        for query, hits in zip(matrix, found, strict=True):
            merged = {int(key): float(score) for key, score in hits}
            if self.in_memory:
                scores = self.scores(query)
                top = min(want, self.in_memory)
                for row in np.argpartition(-scores, top - 1)[:top]:
                    merged[int(self.keys[row])] = float(scores[row])
            out.append(sorted(merged.items(), key=lambda hit: (-hit[1], hit[0]))[:want])
        return out
