"""One segment file of the judge's on-disk vectors: written once, checked when opened, and scanned
a chunk at a time (:mod:`dreamer.embeddings.segments` keeps the folder of them).

The file is a header (magic, rows, dimension), then the rows' keys (uint64), one scale per row
(float32) and the codes (int8, rows × dimension), little-endian. Each vector is normalised and
rounded to ``round(x / scale)`` with ``scale = max|x| / 127``: a quarter of float32's bytes, and a
cosine within about 0.01 of the exact one, which only chooses (the owner rescores what it keeps).
A scan reads each chunk's keys, scales and codes (`CHUNK_ROWS` rows, the codes through the
caller's two buffers) with ``preadv``, checks the keys and scales as opening the file did, and
scores a whole batch of queries in one matrix product per chunk; the file is never mapped and
nothing of it is kept between scans, so the process holds none of it.
"""

from __future__ import annotations

import os
import stat
import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from dreamer.embeddings.threads import split_work, worker_count
from dreamer.heap import give_back_memory

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

__all__ = ["CHUNK_ROWS", "HEADER", "SUFFIX", "Quantised", "SegmentFile", "fresh", "nearest", "write"]

#: Rows read and scored at a time (a segment's worth): the buffers each share of a search holds
#: (codes and their float32 copy) are 7.9 MiB at 384 dimensions, handed back to the system after
#: the search. 244 segments (1M rows) for 20 queries on two shares, idle 2-core machine: 0.24 s in
#: chunks of 4,096 rows, 0.28 s of 2,048, 0.32 s of 1,024 (per-chunk work in the interpreter).
CHUNK_ROWS = 4096
MAGIC = b"DRMSEG02"
HEADER = struct.Struct("<8sQI")
SUFFIX = ".i8"


def fresh(path: Path) -> BinaryIO:
    """``path`` opened to be written as a new file: whatever was there (a temporary left by a
    process that stopped) is removed first, and a symlink put in its place meanwhile is refused
    rather than written through."""
    path.unlink(missing_ok=True)
    return os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600), "wb")


def open_plain(path: Path) -> tuple[int, os.stat_result]:
    """``path`` opened to be read, with what ``fstat`` says of it, only when it is a plain file: a
    symlink is not followed (``OSError``), a FIFO or a device is not waited on (``ValueError``);
    ``FileNotFoundError`` when there is none. The caller closes the descriptor."""
    handle = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    found = os.fstat(handle)
    if not stat.S_ISREG(found.st_mode):
        os.close(handle)
        raise ValueError(f"{path.name} is not a plain file")
    return handle, found


def read_plain(path: Path, limit: int) -> bytes:
    """The bytes of ``path``, a small plain file of the folder (:func:`open_plain`), not read
    whole when over ``limit`` bytes (``ValueError``)."""
    handle, _ = open_plain(path)
    with os.fdopen(handle, "rb") as reader:
        data = reader.read(limit + 1)
    if len(data) > limit:
        raise ValueError(f"{path.name} is larger than {limit} bytes")
    return data


@dataclass(frozen=True)
class Quantised:
    """Rows already as int8 codes and one scale per row (``codes[i] * scales[i]`` is row ``i``),
    written as they are: what the embedded store holds in memory before a segment is built."""

    codes: NDArray[np.int8]
    scales: NDArray[np.float32]


def write(path: Path, keys: Sequence[int], vectors: NDArray[np.float32] | Quantised, dimension: int) -> None:
    """Write these rows (sorted by key; a row that is not finite stored as zeros) to ``path``:
    float vectors are normalised and quantised, `Quantised` rows are written as given."""
    import numpy as np

    order = np.argsort(np.asarray(keys, dtype=np.uint64), kind="stable")
    sorted_keys = np.asarray(keys, dtype="<u8")[order]
    if isinstance(vectors, Quantised):
        codes = np.asarray(vectors.codes, dtype=np.int8)
        scales = np.asarray(vectors.scales, dtype="<f4")
        if codes.shape != (len(keys), dimension) or scales.shape != (len(keys),):
            raise ValueError(f"{len(keys)} keys were given {codes.shape} codes of {dimension}")
        if not np.isfinite(scales).all():
            raise ValueError("a row's scale is not finite")
        codes, scales = codes[order], scales[order]
    else:
        given = np.asarray(vectors, dtype=np.float32)
        if given.ndim != 2 or given.shape != (len(keys), dimension):
            raise ValueError(f"{len(keys)} keys were given {given.shape} vectors of {dimension}")
        codes, scales = _quantised(given[order])
    with fresh(path) as handle:
        handle.write(HEADER.pack(MAGIC, len(keys), dimension))
        handle.write(sorted_keys.tobytes())
        handle.write(scales.tobytes())
        handle.write(codes.tobytes())


def _quantised(given: NDArray[np.float32]) -> tuple[NDArray[np.int8], NDArray[np.float32]]:
    """Float rows normalised, then as int8 codes and a scale each (a row not finite: zeros)."""
    import numpy as np

    finite = np.nan_to_num(given, nan=0.0, posinf=0.0, neginf=0.0)
    norms = np.linalg.norm(finite, axis=1, keepdims=True)
    unit = finite / np.where(norms > 0, norms, 1.0)
    peaks = np.abs(unit).max(axis=1) if len(unit) else np.zeros(0, dtype=np.float32)
    scales = (np.where(peaks > 0, peaks, 1.0) / 127.0).astype("<f4")
    codes = np.rint(unit / scales[:, None]).clip(-127, 127).astype(np.int8)
    return codes, scales


@dataclass(frozen=True)
class SegmentFile:
    """A checked segment file. Nothing of it is held: a scan reads each chunk's keys, scales and
    codes as it goes (at 1M ledger cards the keys and scales of every segment held in memory took
    24 MB of a run's peak)."""

    path: Path
    rows: int
    first_key: int
    last_key: int

    @classmethod
    def open(cls, path: Path, rows: int, dimension: int, first_key: int, last_key: int) -> SegmentFile:
        """Read and check the header, keys and scales: ``ValueError`` for a file that is not
        ``rows`` rows of ``dimension`` with keys ascending in ``first_key..last_key``."""
        import numpy as np

        with path.open("rb") as handle:
            magic, held, held_dimension = HEADER.unpack(handle.read(HEADER.size))
            if magic != MAGIC or held != rows or held_dimension != dimension:
                raise ValueError(f"{path.name} is not the segment the manifest names")
            keys = np.fromfile(handle, dtype="<u8", count=rows)
            scales = np.fromfile(handle, dtype="<f4", count=rows)
        if path.stat().st_size != HEADER.size + rows * (12 + dimension) or len(scales) != rows:
            raise ValueError(f"{path.name} is not {rows} rows of {dimension} dimensions long")
        if not _allowed(keys, scales, first_key - 1, last_key):
            raise ValueError(f"{path.name} holds keys or scales the manifest does not allow")
        return cls(path, rows, first_key, last_key)

    def scan(
        self, unit: NDArray[np.float32], codes: NDArray[np.int8], floats: NDArray[np.float32]
    ) -> Iterator[tuple[NDArray[np.uint64], NDArray[np.float32]]]:
        """Each chunk's keys and the queries' cosines with its rows (queries × rows), read through
        the caller's buffers; ``OSError`` when the file ends early, is gone, or no longer holds
        the keys and scales checked when it was opened."""
        import numpy as np

        dimension = floats.shape[1]
        chunk = floats.shape[0]
        after = self.first_key - 1
        with self.path.open("rb", buffering=0) as handle:
            fd = handle.fileno()
            for start in range(0, self.rows, chunk):
                count = min(chunk, self.rows - start)
                keys = np.empty(count, dtype="<u8")
                scales = np.empty(count, dtype="<f4")
                block = floats[:count]
                for into, at in (
                    (keys, HEADER.size + start * 8),
                    (scales, HEADER.size + self.rows * 8 + start * 4),
                    (codes[: count * dimension], HEADER.size + self.rows * 12 + start * dimension),
                ):
                    if os.preadv(fd, [into.data.cast("B")], at) != into.nbytes:
                        raise OSError(f"{self.path.name} ended before its {self.rows} rows")
                if not _allowed(keys, scales, after, self.last_key):
                    raise OSError(
                        f"{self.path.name} changed since it was opened: keys or scales out of place"
                    )
                after = int(keys[-1])
                np.copyto(block, codes[: count * dimension].reshape(count, dimension), casting="unsafe")
                # The rows times the queries, then turned: BLAS's product of a row-major block by
                # a small query matrix took 0.4-0.7x the time of the queries times the block's
                # transpose (20 queries, 4,096 rows; two measurements on a loaded 2-core machine).
                scores = block @ unit.T
                scores *= scales[:, None]
                yield keys, scores.T


def _allowed(keys: NDArray[np.uint64], scales: NDArray[np.float32], after: int, last_key: int) -> bool:
    """Whether ``keys`` ascend, all past ``after`` and none past ``last_key``, and ``scales`` are finite."""
    import numpy as np

    if not len(keys):
        return True
    return (
        int(keys[0]) > after
        and int(keys[-1]) <= last_key
        and not bool(np.any(keys[1:] <= keys[:-1]))
        and bool(np.all(np.isfinite(scales)))
    )


def nearest(
    files: Sequence[SegmentFile], queries: NDArray[np.float32], want: int
) -> list[list[tuple[int, float]]]:
    """For each query, the ``want`` keys of all ``files`` with the highest cosines (to the codes'
    rounding), in no order; ``OSError`` when a file cannot be read. The files are scanned in up to
    two shares of about equal rows side by side (:func:`~dreamer.embeddings.threads.split_work`)."""
    import numpy as np

    if not files or want <= 0 or not len(queries):
        return [[] for _ in range(len(queries))]
    norms = np.linalg.norm(queries, axis=1, keepdims=True)
    unit = np.ascontiguousarray(queries / np.where(norms > 0, norms, 1.0), dtype=np.float32)
    found = split_work(lambda share: _best_in(share, unit, want), _shares(files, worker_count()))
    give_back_memory()  # the shares' buffers: else kept in the heap into the judge, past its peak
    best_scores = np.concatenate([scores for scores, _ in found], axis=1)
    best_keys = np.concatenate([keys for _, keys in found], axis=1)
    if len(found) > 1:
        keep = np.argpartition(-best_scores, want - 1, axis=1)[:, :want]
        best_scores = np.take_along_axis(best_scores, keep, axis=1)
        best_keys = np.take_along_axis(best_keys, keep, axis=1)
    filled = best_scores > -np.inf
    return [
        list(zip(keys[held].tolist(), scores[held].tolist(), strict=True))
        for keys, scores, held in zip(best_keys, best_scores, filled, strict=True)
    ]


def _shares(files: Sequence[SegmentFile], count: int) -> list[Sequence[SegmentFile]]:
    """``files`` cut into at most ``count`` runs of about equal rows, none empty."""
    total = sum(f.rows for f in files)
    shares: list[Sequence[SegmentFile]] = []
    start, seen = 0, 0
    for end, opened in enumerate(files, 1):
        seen += opened.rows
        if len(shares) < count - 1 and seen * count >= total * (len(shares) + 1):
            shares.append(files[start:end])
            start = end
    if start < len(files):
        shares.append(files[start:])
    return shares


def _best_in(
    files: Sequence[SegmentFile], unit: NDArray[np.float32], want: int
) -> tuple[NDArray[np.float32], NDArray[np.uint64]]:
    """Each query's ``want`` best cosines in ``files`` and their keys (queries × want; -inf: a
    slot not filled), through buffers of its own."""
    import numpy as np

    dimension = unit.shape[1]
    codes = np.empty(CHUNK_ROWS * dimension, dtype=np.int8)
    floats = np.empty((CHUNK_ROWS, dimension), dtype=np.float32)
    # Each query's best so far (-inf: a slot not filled yet), and the lowest of them: only a row at
    # or above it can enter, so past the first rows a comparison leaves a handful a chunk to rank.
    best_scores = np.full((len(unit), want), -np.inf, dtype=np.float32)
    best_keys = np.zeros((len(unit), want), dtype=np.uint64)
    floor = np.full((len(unit), 1), -np.inf, dtype=np.float32)
    for opened in files:
        for keys, scores in opened.scan(unit, codes, floats):
            # The queries whose best row of the chunk reaches their floor: past the first chunks,
            # few or none, and only their rows are compared one by one.
            for query in np.flatnonzero(scores.max(axis=1) >= floor[:, 0]).tolist():
                rows = np.flatnonzero(scores[query] >= floor[query, 0])
                pool_scores = np.concatenate([best_scores[query], scores[query, rows]])
                pool_keys = np.concatenate([best_keys[query], keys[rows]])
                keep = np.argpartition(-pool_scores, want - 1)[:want]
                best_scores[query], best_keys[query] = pool_scores[keep], pool_keys[keep]
                floor[query, 0] = best_scores[query].min()
    return best_scores, best_keys
