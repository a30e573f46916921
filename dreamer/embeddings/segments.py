"""Vectors on disk, searched without loading them: immutable quantised segments in a folder.

A :class:`SegmentIndex` is a folder holding ``manifest.json`` and one ``seg-<first>-<last>.i8`` file
per segment. A segment is written once from a run of rows (keys that only grow: the state's vector
``seq``): each vector normalised and stored as int8 codes with one float32 scale per row (a quarter
of float32's bytes; the file: :mod:`dreamer.embeddings.segmentfile`). A search streams each
segment's codes through one small buffer (read with ``readinto``, never mapped) and scores every
row against the whole batch of queries in one matrix product, so the process holds no segment and
the answer is exact up to the codes' rounding; the owner rescores the hits it keeps from its own
float vectors.
The owner keeps the rows past :attr:`SegmentIndex.covered` in memory and searches them exactly;
once it holds ``segment_rows`` of them it hands them over as a new segment
(:meth:`SegmentIndex.add_segment`).

Why a flat scan and not a graph: on the scale benchmark's 100k-card ledger (random unit vectors,
the worst case for a graph), HNSW segments (usearch, M 16) found 0.40 of the exact ten at 64
candidates and 0.99 only at M 32 and 512 candidates, slower per query than this scan, which finds
all ten (docs/design/dedup.md).

The folder is a cache of what the state holds, never the only copy: anything that does not match
(another owner, format or dimension, a file whose bytes changed, a manifest that cannot be read) is
set aside with one warning and the index starts empty, so the owner falls back to its exact search
and builds again. Each segment records ``probes`` (a key and what the owner knows it by), which the
owner checks against the state before trusting the segment (a state restored from a copy).

Writes are atomic (a temporary file, fsync, rename), taken under an exclusive ``flock`` on
``.lock``; a second writer skips building rather than waiting.

Why: docs/design/dedup.md (Vectors on disk).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dreamer.embeddings import segmentfile
from dreamer.embeddings.segmentcheck import RECORD, CheckedFiles
from dreamer.embeddings.segmentfile import SUFFIX, Quantised, SegmentFile, read_plain
from dreamer.log import get_logger

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

__all__ = ["SEGMENT_ROWS", "Segment", "SegmentIndex", "SegmentsLost", "on_disk"]

log = get_logger("dreamer.embeddings")

#: Version of the folder's layout; a folder of another version (format 1: usearch HNSW files) is
#: set aside and rebuilt.
FORMAT = 2
#: Rows per segment: 4,096 vectors of 384 dimensions are 1.6 MB of int8 codes, written in a few
#: milliseconds. Rows below a segment's worth stay in memory, read from their owner's file by each
#: new process: at 16,384 a 10k bank was read whole by every daemon's first run (bench.scale, 10k
#: cards with the local model: 1.12-1.19 s and 171 MiB at 16,384, 1.03-1.06 s and 155 MiB at 4,096,
#: the same at 100k and 1M). The size is not part of a folder's identity: segments written at
#: another size are kept.
SEGMENT_ROWS = 4_096
#: Extra neighbours asked of the segments, so keys the owner no longer knows (a replaced vector)
#: still leave ``k`` it does, and the codes' rounding cannot push out a true neighbour.
SLACK = 8
_MANIFEST = "manifest.json"
#: A manifest larger than this is set aside unread (a segment's entry is about 300 bytes).
_MANIFEST_LIMIT = 256 << 20


def on_disk(folder: Path) -> tuple[int, int]:
    """The segments and vectors the manifests under ``folder`` name (one sub-folder per bank and
    model), read without opening a segment: for ``dreamer status``. A manifest that cannot be read
    counts for nothing (the daemon sets it aside when it next opens it)."""
    segments = rows = 0
    for manifest in sorted(folder.glob(f"*/{_MANIFEST}")) if folder.is_dir() else []:
        try:
            raw = json.loads(read_plain(manifest, _MANIFEST_LIMIT).decode("utf-8"))
            listed = [Segment.from_json(s) for s in raw["segments"]]
        except (OSError, ValueError, TypeError, KeyError, UnicodeDecodeError):
            continue
        segments, rows = segments + len(listed), rows + sum(s.rows for s in listed)
    return segments, rows


class SegmentsLost(Exception):
    """A segment could not be read during a search (removed or cut short since it was opened): the
    index has been set aside, and the owner reads its rows again from the state."""


@dataclass(frozen=True)
class Segment:
    """One saved segment: its file, the keys it was built from, and how to check it still holds."""

    file: str
    first_key: int
    last_key: int
    rows: int
    sha256: str
    #: (key, what the owner knows it by) pairs the owner checks against its state before use.
    probes: tuple[tuple[int, str], ...]

    def as_json(self) -> dict[str, Any]:
        return {
            "file": self.file,
            "first_key": self.first_key,
            "last_key": self.last_key,
            "rows": self.rows,
            "sha256": self.sha256,
            "probes": [list(p) for p in self.probes],
        }

    @classmethod
    def from_json(cls, raw: Any) -> Segment:
        """A segment entry of the manifest; ``ValueError`` for one that is not well formed."""
        try:
            segment = cls(
                file=str(raw["file"]),
                first_key=int(raw["first_key"]),
                last_key=int(raw["last_key"]),
                rows=int(raw["rows"]),
                sha256=str(raw["sha256"]),
                probes=tuple((int(k), str(t)) for k, t in raw["probes"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"a segment entry is not well formed ({exc})") from None
        if "/" in segment.file or segment.file.startswith(".") or not segment.file.endswith(SUFFIX):
            raise ValueError(f"a segment names a file outside its folder: {segment.file!r}")
        if not 0 < segment.first_key <= segment.last_key or segment.rows < 0:
            raise ValueError(f"segment {segment.file} has keys out of order")
        return segment


class SegmentIndex:
    """The segments of one owner (``identity``: e.g. the state, bank, model and dimension) in
    ``folder``, opened read-only or to be written (``writable``: the daemon; a reading command
    searches what is there and builds nothing)."""

    def __init__(
        self,
        folder: Path,
        identity: Mapping[str, str | int],
        dimension: int,
        *,
        writable: bool,
        segment_rows: int | None = None,
    ) -> None:
        self.folder = folder
        self.identity = {str(k): v for k, v in identity.items()}
        self.dimension = dimension
        self.writable = writable
        #: Rows per segment (`SEGMENT_ROWS` unless given).
        self.segment_rows = SEGMENT_ROWS if segment_rows is None else segment_rows
        self.segments: list[Segment] = []
        #: Every key up to this one is in a segment, or was damaged when its segment was built.
        self.covered = 0
        #: What the owner named damaged when building (its own ids -> texts), kept across processes.
        self.damaged: dict[str, str] = {}
        self._views: list[SegmentFile] = []
        #: The files' SHA-256, from the folder's record for a file it names as it is.
        self._checked = CheckedFiles(folder)
        self._load()

    # --- reading ----------------------------------------------------------------------------------

    @property
    def rows(self) -> int:
        return sum(s.rows for s in self.segments)

    @property
    def files(self) -> tuple[SegmentFile, ...]:
        """The opened segments, in the manifest's order (their codes stay on disk)."""
        return tuple(self._views)

    def probes(self) -> list[tuple[int, str]]:
        return [probe for segment in self.segments for probe in segment.probes]

    def _load(self) -> None:
        path = self.folder / _MANIFEST
        if not path.exists():
            return
        try:
            raw = json.loads(read_plain(path, _MANIFEST_LIMIT).decode("utf-8"))
            if not isinstance(raw, dict):
                raise ValueError("it is not a JSON object")
            if raw.get("format") != FORMAT or raw.get("identity") != self.identity:
                raise ValueError("it was written for another format, state, bank or model")
            if raw.get("dimension") != self.dimension:
                raise ValueError(
                    f"its vectors have {raw.get('dimension')!r} dimensions, not {self.dimension}"
                )
            segments = [Segment.from_json(s) for s in raw.get("segments", [])]
            covered = int(raw.get("covered", 0))
            damaged = {str(k): str(v) for k, v in dict(raw.get("damaged", {})).items()}
            views = [self._view(s) for s in segments]
        except (OSError, ValueError, TypeError, UnicodeDecodeError) as exc:
            self._set_aside(f"{path}: {exc}")
            return
        self.segments, self.covered, self.damaged, self._views = segments, covered, damaged, views
        if self.writable:
            self._checked.save(s.file for s in segments)

    def _view(self, segment: Segment) -> SegmentFile:
        """The segment's keys and scales, read and checked (its codes stay on disk)."""
        path = self.folder / segment.file
        if self._checked.digest(path) != segment.sha256:
            raise ValueError(f"{segment.file} does not hold the bytes it was saved with")
        return SegmentFile.open(path, segment.rows, self.dimension, segment.first_key, segment.last_key)

    def _set_aside(self, why: str) -> None:
        """Start empty: the owner searches exactly and (when writable) builds the segments again."""
        log.warning("vector index: set aside, searching exactly until it is built again", problem=why)
        self.segments, self.covered, self.damaged, self._views = [], 0, {}, []
        if self.writable:
            with self._locked() as held:
                if held:
                    self._clear()

    def search(self, queries: NDArray[np.float32], k: int) -> list[list[tuple[int, float]]]:
        """For each query, the ``k`` + `SLACK` keys of all segments nearest it, with their cosines
        (to the codes' rounding: the owner rescores the ones it keeps from its own vectors).
        `SegmentsLost` when a segment can no longer be read (the index is then empty)."""
        if not self._views or k <= 0:
            return [[] for _ in range(len(queries))]
        try:
            return segmentfile.nearest(self._views, queries, k + SLACK)
        except OSError as exc:
            self._set_aside(f"{self.folder}: {exc}")
            raise SegmentsLost(str(exc)) from None

    # --- writing ----------------------------------------------------------------------------------

    def add_segment(
        self,
        keys: Sequence[int],
        vectors: NDArray[np.float32] | Quantised,
        *,
        last_key: int,
        probes: Sequence[tuple[int, str]],
        damaged: Mapping[str, str],
    ) -> bool:
        """Build a segment of these rows (every key ≤ ``last_key`` the owner read, minus the
        damaged ones it names), save it and add it; False when this index is read-only, another
        process is writing it, or it cannot be saved (the owner keeps the rows and searches them
        exactly)."""
        if not self.writable or not keys or last_key <= self.covered:
            return False
        with self._locked() as held:
            if not held:
                return False
            if self._written_by_another():  # the owner learns the new covered and reads past it
                self._reload()
                return False
            name = f"seg-{self.covered + 1}-{last_key}{SUFFIX}"
            temporary = self.folder / f".{name}.tmp"
            try:
                segment, view = self._build(name, temporary, keys, vectors, last_key, probes)
                self._write_manifest([*self.segments, segment], last_key, {**self.damaged, **damaged})
            except (OSError, ValueError) as exc:  # a full disk, a file in the way
                temporary.unlink(missing_ok=True)
                log.warning(
                    "vector index: a segment was not saved, searching its rows exactly", problem=str(exc)
                )
                return False
            self.segments.append(segment)
            self._views.append(view)
            self.covered = last_key
            self.damaged = {**self.damaged, **damaged}
            self._remove_unlisted()
            self._checked.save(s.file for s in self.segments)
            return True

    def _written_by_another(self) -> bool:
        """Whether the manifest on disk is not the one this index last read or wrote (another
        process built or cleared since: building on ours would drop theirs)."""
        try:
            raw = json.loads(read_plain(self.folder / _MANIFEST, _MANIFEST_LIMIT).decode("utf-8"))
            listed = [s.get("file") for s in raw["segments"]], raw["covered"]
        except FileNotFoundError:
            listed = [], 0
        except (OSError, ValueError, TypeError, KeyError, AttributeError):
            return True
        return listed != ([s.file for s in self.segments], self.covered)

    def _reload(self) -> None:
        self.segments, self.covered, self.damaged, self._views = [], 0, {}, []
        self._load()

    def _remove_unlisted(self) -> None:
        """Segment files no manifest names (left by a process that stopped between its file and
        its manifest, or by one that built on an older manifest)."""
        listed = {s.file for s in self.segments}
        for path in self.folder.glob("seg-*"):
            if path.name not in listed:
                path.unlink(missing_ok=True)

    def _build(
        self,
        name: str,
        temporary: Path,
        keys: Sequence[int],
        vectors: NDArray[np.float32] | Quantised,
        last_key: int,
        probes: Sequence[tuple[int, str]],
    ) -> tuple[Segment, SegmentFile]:
        segmentfile.write(temporary, keys, vectors, self.dimension)
        _fsync(temporary)
        os.replace(temporary, self.folder / name)
        digest = self._checked.digest(self.folder / name)
        segment = Segment(name, self.covered + 1, last_key, len(keys), digest, tuple(probes))
        return segment, self._view(segment)

    def reset(self) -> None:
        """Drop every segment (the state no longer matches them): the owner starts over."""
        self.segments, self.covered, self.damaged, self._views = [], 0, {}, []
        if self.writable:
            with self._locked() as held:
                if held:
                    self._clear()

    def _write_manifest(self, segments: Sequence[Segment], covered: int, damaged: Mapping[str, str]) -> None:
        body = {
            "format": FORMAT,
            "identity": self.identity,
            "dimension": self.dimension,
            "covered": covered,
            "segments": [s.as_json() for s in segments],
            "damaged": dict(damaged),
        }
        temporary = self.folder / f".{_MANIFEST}.tmp"
        with segmentfile.fresh(temporary) as handle:
            handle.write(json.dumps(body, indent=1, sort_keys=True).encode("utf-8"))
        _fsync(temporary)
        os.replace(temporary, self.folder / _MANIFEST)

    def _clear(self) -> None:
        """Remove the manifest and every segment file (the folder itself stays, with its lock)."""
        for name in (_MANIFEST, RECORD):
            with contextlib.suppress(FileNotFoundError):
                (self.folder / name).unlink()
        for path in self.folder.glob("seg-*"):
            path.unlink(missing_ok=True)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[bool]:
        """An exclusive lock on the folder's ``.lock``, without waiting: yields whether it is held."""
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            handle = os.open(self.folder / ".lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        except OSError as exc:
            log.warning(
                "vector index: cannot write its folder, searching exactly", problem=f"{self.folder}: {exc}"
            )
            yield False
            return
        try:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                yield False
                return
            yield True
        finally:
            os.close(handle)


def _fsync(path: Path) -> None:
    handle = os.open(path, os.O_RDONLY)
    try:
        os.fsync(handle)
    finally:
        os.close(handle)
