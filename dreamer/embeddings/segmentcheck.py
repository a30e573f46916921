"""Which segment files hold the bytes they were saved with, remembered across processes.

A segment index checks each segment file's SHA-256 against its manifest before it searches it
(:mod:`dreamer.embeddings.segments`). At 1M ledger cards the ledger's segments and the embedded
store's are about 380 MB each, and hashing them cost about 0.3 s each in every new process: the
daemon's first run after a start and every command that searches them (docs/benchmarks.md,
section 4). A running daemon hashed each file once, keeping the answer by path, size and
modification time.

So a file found to hold its bytes is also recorded in its folder's ``checked.json`` by its
identity: device, inode, size, and modification and change times in nanoseconds. A later process
takes the recorded digest of a file whose identity is the recorded one, and hashes any other. A
write through the file system moves the change time, which no program can set back, and a copy or
a restore is another inode; what the record misses is what the check kept in a running daemon's
memory misses too: bytes changed beneath the file system (a failing disk). Those only change which
candidates a search offers, never a cosine a verdict reads (the owner rescores its hits from its
own vectors: docs/design/dedup.md).

The record is a cache: one that cannot be read, is not well formed or names other files is
ignored or pruned, and one that cannot be written is left as it was (every file is then hashed,
as before). Pure I/O on one folder; no lock (two processes writing it at once lose an entry,
which is hashed again).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import threading
from collections.abc import Iterable
from pathlib import Path

from dreamer.embeddings.segmentfile import fresh, open_plain, read_plain

__all__ = ["RECORD", "CheckedFiles"]

#: The folder's record of files found to hold their bytes.
RECORD = "checked.json"
_FORMAT = 1
_HASH_CHUNK = 1 << 20
#: A record larger than this is not read (one file's entry is about 120 bytes: 16 MiB is a ledger
#: of some 500 million vectors).
_RECORD_LIMIT = 16 << 20

#: Files hashed in this process: (path, identity) -> SHA-256 (a read-only owner records nothing).
_HASHED: dict[tuple[str, tuple[int, ...]], str] = {}
_HASHED_LOCK = threading.Lock()


def _identity(found: os.stat_result) -> tuple[int, int, int, int, int]:
    """Device, inode, size, modification and change time (ns): what the record knows a file by."""
    return (found.st_dev, found.st_ino, found.st_size, found.st_mtime_ns, found.st_ctime_ns)


class CheckedFiles:
    """The SHA-256 of a folder's files, from its record where a file is the one recorded."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._recorded = self._read()
        self._found: dict[str, list[object]] = {}

    def digest(self, path: Path) -> str:
        """The file's SHA-256: recorded (in the folder or by this process) for this very file, else
        hashed now and noted for :meth:`save`. ``OSError`` when it cannot be read, ``ValueError``
        when it is not a plain file (a symlink is not followed, a FIFO or a device not read)."""
        handle, found = open_plain(path)
        try:
            identity = _identity(found)
            key = (str(path), identity)
            with _HASHED_LOCK:
                known = _HASHED.get(key)
            recorded = self._recorded.get(path.name)
            if known is None and recorded is not None and tuple(recorded[:5]) == identity:
                known = str(recorded[5])
            if known is None:
                known = _hash(handle)
                with _HASHED_LOCK:
                    _HASHED[key] = known
        finally:
            os.close(handle)
        if recorded is None or tuple(recorded[:5]) != identity or recorded[5] != known:
            self._found[path.name] = [*identity, known]
        return known

    def save(self, listed: Iterable[str]) -> None:
        """Record what this process hashed, keeping only the files ``listed`` (the manifest's);
        nothing is written when nothing changed. A folder that cannot be written is left as it is."""
        keep = set(listed)
        entries = {name: entry for name, entry in {**self._recorded, **self._found}.items() if name in keep}
        if entries == self._recorded:
            return
        temporary = self.folder / f".{RECORD}.{os.getpid()}.{threading.get_ident()}.tmp"
        try:
            with fresh(temporary) as handle:  # a symlink put in its place is refused, not written through
                handle.write(json.dumps({"format": _FORMAT, "files": entries}).encode("utf-8"))
            os.replace(temporary, self.folder / RECORD)
        except OSError:
            with contextlib.suppress(OSError):
                temporary.unlink()
            return
        self._recorded, self._found = entries, {}

    def _read(self) -> dict[str, list[object]]:
        """The record's entries that are well formed (five integers and a digest); none when the
        record is missing, unreadable or of another format."""
        try:
            raw = json.loads(read_plain(self.folder / RECORD, _RECORD_LIMIT).decode("utf-8"))
        except (OSError, ValueError, UnicodeDecodeError):  # none yet, a symlink, a FIFO, too large
            return {}
        files = raw.get("files") if isinstance(raw, dict) and raw.get("format") == _FORMAT else None
        if not isinstance(files, dict):
            return {}
        return {
            str(name): list(entry)
            for name, entry in files.items()
            if isinstance(entry, list)
            and len(entry) == 6
            and all(type(value) is int for value in entry[:5])
            and isinstance(entry[5], str)
        }


def _hash(handle: int) -> str:
    digest = hashlib.sha256()
    while chunk := os.read(handle, _HASH_CHUNK):
        digest.update(chunk)
    return digest.hexdigest()
