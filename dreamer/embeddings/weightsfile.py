"""A model's ``model.safetensors`` read tensor by tensor, with its largest table left on disk.

The safetensors format is an 8-byte little-endian header length, a JSON header naming each tensor's
dtype, shape and byte range, then the bytes. :func:`read_header` checks that header against the
file (every range inside it, of the size its shape and dtype need); :func:`load_weights` reads each
tensor straight into its own array (nothing is read twice or held twice while the encoder is built)
and leaves the tensors it is told to on disk as :class:`RowsOnDisk`.

Why a table stays on disk: the word embedding table is 47 MiB of all-MiniLM-L6-v2's 87 MiB, and a
roll-up's texts use a few hundred of its 30,522 rows. Its rows are read with ``pread`` when a batch
needs them, from the file opened at load, so a file replaced since (a reinstall) is never mixed with
the weights already read. Not a memory map: the kernel maps up to 64 KiB around each touched row
(fault-around), which for a few hundred scattered rows is most of the table, and a file cut short
under a map kills the process with SIGBUS, where a short read here raises :class:`WeightsFileError`.
"""

from __future__ import annotations

import json
import math
import os
import weakref
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

__all__ = ["RowsOnDisk", "TensorEntry", "WeightsFileError", "load_weights", "read_header"]

#: The largest header read (the real model's is about 11 KiB).
MAX_HEADER_BYTES = 100 << 20
#: safetensors dtype names numpy reads, by name. BF16 has no numpy dtype.
_DTYPES = {
    "F64": "<f8", "F32": "<f4", "F16": "<f2", "I64": "<i8", "I32": "<i4", "I16": "<i2", "I8": "i1",
    "U8": "u1", "BOOL": "?",
}  # fmt: skip


class WeightsFileError(ValueError):
    """The weights file is not whole or not readable as the header says; the message says why."""


@dataclass(frozen=True, slots=True)
class TensorEntry:
    """One tensor of the file: its safetensors dtype, its shape and its bytes' absolute offsets."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    start: int
    end: int


def read_header(handle: BinaryIO) -> dict[str, TensorEntry]:
    """The tensors a safetensors file holds, from its header: WeightsFileError when the header does
    not parse, or a tensor's byte range is not inside the file."""
    size = os.fstat(handle.fileno()).st_size
    handle.seek(0)
    head = handle.read(8)
    if len(head) < 8:
        raise WeightsFileError(f"{size} bytes")
    length = int.from_bytes(head, "little")
    if not 2 <= length <= min(size - 8, MAX_HEADER_BYTES):
        raise WeightsFileError("its header length does not fit the file")
    try:
        header = json.loads(handle.read(length))
    except ValueError:
        raise WeightsFileError("its header is not JSON") from None
    if not isinstance(header, dict):
        raise WeightsFileError("its header is not a JSON object")
    base = 8 + length
    entries: dict[str, TensorEntry] = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        offsets = entry.get("data_offsets") if isinstance(entry, dict) else None
        if (
            not isinstance(offsets, list)
            or len(offsets) != 2
            or not all(isinstance(o, int) and not isinstance(o, bool) for o in offsets)
            or not 0 <= offsets[0] <= offsets[1]
        ):
            raise WeightsFileError(f"tensor {name!r} has no valid data_offsets")
        shape = entry.get("shape")
        if not isinstance(shape, list) or not all(isinstance(d, int) and d >= 0 for d in shape):
            raise WeightsFileError(f"tensor {name!r} has no valid shape")
        entries[name] = TensorEntry(
            name, str(entry.get("dtype")), tuple(shape), base + offsets[0], base + offsets[1]
        )
    if not entries:
        raise WeightsFileError("it holds no tensor")
    end = max(e.end for e in entries.values())
    if end > size:
        raise WeightsFileError(
            f"its tensors need {end - base:,} bytes after the header, it has {size - base:,}: cut short"
        )
    return entries


def _dtype(entry: TensorEntry) -> np.dtype[Any]:
    import numpy as np

    code = _DTYPES.get(entry.dtype)
    if code is None:
        raise WeightsFileError(f"tensor {entry.name!r} has dtype {entry.dtype!r}, which cannot be read")
    dtype = np.dtype(code)
    if math.prod(entry.shape) * dtype.itemsize != entry.end - entry.start:
        raise WeightsFileError(
            f"tensor {entry.name!r}: {entry.end - entry.start:,} bytes, its shape {list(entry.shape)} "
            f"in {entry.dtype} needs {math.prod(entry.shape) * dtype.itemsize:,}"
        )
    return dtype


def _read_exactly(handle: BinaryIO, entry: TensorEntry, dtype: np.dtype[Any]) -> NDArray[Any]:
    import numpy as np

    out = np.empty(entry.shape, dtype=dtype)
    view = memoryview(out.data).cast("B")
    got = os.preadv(handle.fileno(), [view], entry.start) if view.nbytes else 0
    if got != view.nbytes:
        raise WeightsFileError(f"tensor {entry.name!r}: read {got:,} of {view.nbytes:,} bytes: cut short")
    return out


class RowsOnDisk:
    """A 2-D tensor left in the file: ``rows[ids]`` reads the rows ``ids`` names (any shape of
    integer array; the result has that shape plus the row's) as float32, each distinct row once.

    The file stays open until this object is garbage: the rows come from the file the other tensors
    were read from, even when the path has since been given another file.
    """

    def __init__(self, handle: BinaryIO, entry: TensorEntry, dtype: np.dtype[Any]) -> None:
        if len(entry.shape) != 2:
            raise WeightsFileError(f"tensor {entry.name!r} is not a table of rows: shape {list(entry.shape)}")
        self.name = entry.name
        self.shape = entry.shape
        self._dtype = dtype
        self._start = entry.start
        self._row_bytes = entry.shape[1] * dtype.itemsize
        fd = os.dup(handle.fileno())
        self._fd: int | None = fd
        self._closer = weakref.finalize(self, os.close, fd)

    def __getitem__(self, ids: Any) -> NDArray[np.float32]:
        import numpy as np

        wanted = np.asarray(ids)
        if wanted.dtype.kind not in "iu":
            raise TypeError(f"{self.name}: rows are chosen by integer ids, not {wanted.dtype}")
        flat = wanted.reshape(-1)
        if flat.size and (int(flat.min()) < 0 or int(flat.max()) >= self.shape[0]):
            raise IndexError(f"{self.name}: a row id outside 0..{self.shape[0] - 1}")
        fd = self._fd
        if fd is None:
            raise WeightsFileError(f"tensor {self.name!r}: its file was closed")
        distinct, where = np.unique(flat, return_inverse=True)
        rows = np.empty((len(distinct), self.shape[1]), dtype=self._dtype)
        for i, row in enumerate(distinct.tolist()):
            view = memoryview(rows[i].data).cast("B")
            if os.preadv(fd, [view], self._start + row * self._row_bytes) != self._row_bytes:
                raise WeightsFileError(
                    f"tensor {self.name!r}: row {row} is past the end of the file: cut short"
                )
        out: NDArray[np.float32] = rows.astype(np.float32, copy=False)[where].reshape(
            *wanted.shape, self.shape[1]
        )
        return out

    def close(self) -> None:
        """Close the file now (``rows[ids]`` then raises WeightsFileError); it is closed at garbage
        collection anyway."""
        self._fd = None
        self._closer()


def load_weights(path: Path, *, on_disk: Collection[str] = ()) -> dict[str, NDArray[Any] | RowsOnDisk]:
    """Every tensor of the safetensors file at ``path``, each read into an array of its dtype,
    except those named in ``on_disk`` (2-D tables), left in the file as :class:`RowsOnDisk`.
    WeightsFileError when the file is not whole, a tensor's dtype cannot be read or its size
    does not match its shape; OSError when it cannot be read."""
    with open(path, "rb") as handle:
        entries = read_header(handle)
        weights: dict[str, NDArray[Any] | RowsOnDisk] = {}
        for name, entry in entries.items():
            dtype = _dtype(entry)
            weights[name] = (
                RowsOnDisk(handle, entry, dtype) if name in on_disk else _read_exactly(handle, entry, dtype)
            )
    return weights
