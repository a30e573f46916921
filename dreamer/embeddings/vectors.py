"""Vectors as stored and searched: float16 blobs, unit rows, cosine top-k over a matrix, and how an
in-memory matrix of them grows (pure)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

#: Stored vectors are float16: half the bytes of float32, and cosines agree to about 1e-3.
STORED_DTYPE = "<f2"
_CHUNK = 16_384


def grown_capacity(capacity: int, needed: int) -> int:
    """The rows to allocate when ``needed`` no longer fit in ``capacity``: an eighth more (at least
    1,024 rows), still amortised O(1) per row. Doubling put a whole second copy of a loaded bank on
    the first append after the load (+1.5 GB of peak RSS at 1M vectors of 384 floats)."""
    return max(needed, capacity + max(1024, capacity // 8))


def normalise(matrix: NDArray[np.float32]) -> NDArray[np.float32]:
    """Rows scaled to unit length (a zero row stays zero)."""
    import numpy as np

    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    out: NDArray[np.float32] = (matrix / np.clip(norms, 1e-12, None)).astype(np.float32)
    return out


def to_blob(vector: NDArray[np.float32]) -> bytes:
    """One vector as little-endian float16 bytes."""
    import numpy as np

    return np.asarray(vector, dtype=STORED_DTYPE).tobytes()


def from_blob(blob: bytes, dimension: int) -> NDArray[np.float16] | None:
    """One stored vector, or None when the blob is damaged: another length, a value that is not a
    finite number, or not of unit length (every stored vector is; float16 keeps it within 1e-3)."""
    import numpy as np

    if len(blob) != 2 * dimension:
        return None
    vector = np.frombuffer(blob, dtype=STORED_DTYPE)
    wide = vector.astype(np.float64)
    if not np.isfinite(wide).all() or abs(float(np.linalg.norm(wide)) - 1.0) > 0.01:
        return None
    return vector


def from_blobs(blobs: Sequence[bytes], dimension: int) -> NDArray[np.float16]:
    """Stacked float16 rows; a blob of the wrong length raises ``ValueError`` naming its position."""
    import numpy as np

    matrix = np.empty((len(blobs), dimension), dtype=STORED_DTYPE)
    for row, blob in enumerate(blobs):
        if len(blob) != 2 * dimension:
            raise ValueError(f"vector {row} has {len(blob)} bytes, expected {2 * dimension}")
        matrix[row] = np.frombuffer(blob, dtype=STORED_DTYPE)
    return matrix


def top_k(
    queries: NDArray[np.float32], matrix: NDArray[np.float16] | NDArray[np.float32], k: int
) -> tuple[NDArray[np.intp], NDArray[np.float32]]:
    """For each query row, the indices and cosines of its ``k`` nearest matrix rows, best first.

    Rows of both are unit vectors, so the dot product is the cosine. Partial sort: O(n) per query.
    """
    import numpy as np

    n = matrix.shape[0]
    if n == 0 or k <= 0:
        empty = np.zeros((queries.shape[0], 0))
        return empty.astype(np.intp), empty.astype(np.float32)
    k = min(k, n)
    q = np.asarray(queries, dtype=np.float32).T
    # float16 has no BLAS kernel: widen a bounded chunk at a time, so memory stays O(chunk).
    scores = np.empty((queries.shape[0], n), dtype=np.float32)
    for start in range(0, n, _CHUNK):
        block = np.asarray(matrix[start : start + _CHUNK], dtype=np.float32)
        scores[:, start : start + block.shape[0]] = (block @ q).T
    part = np.argpartition(-scores, k - 1, axis=1)[:, :k]
    part_scores = np.take_along_axis(scores, part, axis=1)
    order = np.argsort(-part_scores, axis=1, kind="stable")
    return np.take_along_axis(part, order, axis=1), np.take_along_axis(part_scores, order, axis=1)
