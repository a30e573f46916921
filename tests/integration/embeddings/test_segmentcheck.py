"""The record of segment files found to hold their bytes, on real folders: a new process takes a
recorded file's digest without reading it, and hashes a file that is no longer the one recorded
(written in place, its times set back, copied); a record that is damaged, lies or cannot be
written changes nothing but the time spent.

"A new process" is the in-process memory of hashed files emptied (``segmentcheck._HASHED``); the
hashing is counted by a spy around the real ``_hash``.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from dreamer.embeddings import segmentcheck, segments
from dreamer.embeddings.segmentcheck import RECORD, CheckedFiles
from dreamer.embeddings.segments import SegmentIndex
from tests.integration.embeddings.test_segments import IDENTITY, built, unit_rows

SET_ASIDE = "vector index: set aside, searching exactly until it is built again"


@pytest.fixture
def hashed(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The names of the files hashed, each time one is; every test starts as a new process."""
    names: list[str] = []
    real = segmentcheck._hash

    def counting(handle: int) -> str:
        names.append(Path(os.readlink(f"/proc/self/fd/{handle}")).name)
        return real(handle)

    monkeypatch.setattr(segmentcheck, "_hash", counting)
    monkeypatch.setattr(segmentcheck, "_HASHED", {})
    yield names


def _new_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(segmentcheck, "_HASHED", {})


def _two_segments(folder: Path) -> SegmentIndex:
    index, _ = built(folder, 100)
    assert index.add_segment(
        list(range(101, 151)), unit_rows(50, seed=1), last_key=150, probes=[], damaged={}
    )
    return index


def _put_aside(path: Path, elsewhere: Path, kind: str, set_limit: Callable[[int], None]) -> None:
    """Move ``path`` to ``elsewhere`` and put in its place a symlink to it, a FIFO, or a copy one
    byte over the limit ``set_limit`` sets."""
    path.rename(elsewhere)
    if kind == "symlink":
        path.symlink_to(elsewhere)
    elif kind == "fifo":
        os.mkfifo(path)
    else:
        set_limit(elsewhere.stat().st_size - 1)
        shutil.copy(elsewhere, path)


def test_a_new_process_takes_the_recorded_digests_without_reading_the_files(
    tmp_path: Path, hashed: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    index = _two_segments(tmp_path / "ix")
    files = [s.file for s in index.segments]
    assert sorted(hashed) == sorted(files), "each written segment hashed once"
    record = json.loads((tmp_path / "ix" / RECORD).read_text())
    assert sorted(record["files"]) == sorted(files)
    for name in files:
        found = (tmp_path / "ix" / name).stat()
        identity = [found.st_dev, found.st_ino, found.st_size, found.st_mtime_ns, found.st_ctime_ns]
        assert record["files"][name][:5] == identity
    hashed.clear()
    _new_process(monkeypatch)
    again = SegmentIndex(tmp_path / "ix", IDENTITY, 16, writable=True)
    assert (again.rows, hashed) == (150, [])
    (found,) = again.search(unit_rows(50, seed=1)[3:4], 1)
    assert found[0][0] == 104


@pytest.mark.parametrize("times", ["moved", "set back"])
def test_a_file_written_in_place_is_hashed_again_and_set_aside(
    tmp_path: Path, hashed: list[str], monkeypatch: pytest.MonkeyPatch, times: str
) -> None:
    """One byte flipped, the file's size the same; "set back" restores its modification time, as
    a copy tool would: the change time still moved, so the record does not vouch for it."""
    index = _two_segments(tmp_path / "ix")
    target = tmp_path / "ix" / index.segments[0].file
    before = target.stat()
    data = bytearray(target.read_bytes())
    data[len(data) // 2] ^= 0xFF
    target.write_bytes(bytes(data))
    if times == "set back":
        os.utime(target, ns=(before.st_atime_ns, before.st_mtime_ns))
    hashed.clear()
    _new_process(monkeypatch)
    with capture_logs() as logs:
        opened = SegmentIndex(tmp_path / "ix", IDENTITY, 16, writable=True)
    assert target.name in hashed
    assert (opened.rows, [e["event"] for e in logs if e["log_level"] == "warning"]) == (0, [SET_ASIDE])
    assert not (tmp_path / "ix" / RECORD).exists(), "the record goes with the segments"


def test_a_copied_folder_is_hashed_again(
    tmp_path: Path, hashed: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A copy keeps names, sizes and (with copy2) times, not the inode: every file is read again."""
    index = _two_segments(tmp_path / "ix")
    shutil.copytree(tmp_path / "ix", tmp_path / "copy", copy_function=shutil.copy2)
    hashed.clear()
    _new_process(monkeypatch)
    again = SegmentIndex(tmp_path / "copy", IDENTITY, 16, writable=True)
    assert again.rows == 150 and sorted(hashed) == sorted(s.file for s in index.segments)


@pytest.mark.parametrize(
    "record",
    [
        b"\xff{not json",
        b"[]",
        b'{"format": 2, "files": {}}',
        b'{"format": 1, "files": []}',
        b'{"format": 1, "files": {"x": "y"}}',
        b'{"format": 1, "files": {"NAME": [1, 2, 3, 4, 5]}}',
        b'{"format": 1, "files": {"NAME": [1.5, 2, 3, 4, 5, "ab"]}}',
        b'{"format": 1, "files": {"NAME": [1, 2, 3, 4, 99999999999999999999999999999, "ab"]}}',
        b'{"format": 1, "files": {"NAME": [true, 2, 3, 4, 5, "ab"]}}',
    ],
)
def test_a_damaged_record_is_ignored_and_written_again(
    tmp_path: Path, hashed: list[str], monkeypatch: pytest.MonkeyPatch, record: bytes
) -> None:
    index = _two_segments(tmp_path / "ix")
    name = index.segments[0].file
    (tmp_path / "ix" / RECORD).write_bytes(record.replace(b"NAME", name.encode()))
    hashed.clear()
    _new_process(monkeypatch)
    with capture_logs() as logs:
        again = SegmentIndex(tmp_path / "ix", IDENTITY, 16, writable=True)
    assert again.rows == 150 and sorted(hashed) == sorted(s.file for s in index.segments)
    assert [e for e in logs if e["log_level"] == "warning"] == []
    assert sorted(json.loads((tmp_path / "ix" / RECORD).read_text())["files"]) == sorted(hashed)


def test_a_record_naming_another_digest_sets_the_folder_aside_and_it_is_built_again(
    tmp_path: Path, hashed: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The record vouches for this very file with a digest the manifest does not hold: the
    folder is set aside as for damaged bytes (never trusted halfway), and the owner builds anew."""
    index = _two_segments(tmp_path / "ix")
    path = tmp_path / "ix" / RECORD
    body = json.loads(path.read_text())
    body["files"][index.segments[0].file][5] = "0" * 64
    path.write_text(json.dumps(body))
    _new_process(monkeypatch)
    with capture_logs() as logs:
        opened = SegmentIndex(tmp_path / "ix", IDENTITY, 16, writable=True)
    assert opened.rows == 0 and [e["event"] for e in logs if e["log_level"] == "warning"] == [SET_ASIDE]
    assert opened.add_segment(list(range(1, 51)), unit_rows(50), last_key=50, probes=[], damaged={})
    _new_process(monkeypatch)
    assert SegmentIndex(tmp_path / "ix", IDENTITY, 16, writable=True).rows == 50


def test_a_read_only_index_records_nothing(
    tmp_path: Path, hashed: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    index = _two_segments(tmp_path / "ix")
    (tmp_path / "ix" / RECORD).unlink()
    _new_process(monkeypatch)
    hashed.clear()
    reader = SegmentIndex(tmp_path / "ix", IDENTITY, 16, writable=False)
    assert reader.rows == 150 and len(hashed) == 2
    assert not (tmp_path / "ix" / RECORD).exists()
    del index


def test_a_record_that_cannot_be_written_leaves_everything_working(
    tmp_path: Path, hashed: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The record's name taken by a folder: nothing is recorded, no leftover temporary file,
    every new process hashes the files, and the index answers as before."""
    index = _two_segments(tmp_path / "ix")
    (tmp_path / "ix" / RECORD).unlink()
    (tmp_path / "ix" / RECORD).mkdir()
    for _ in range(2):
        _new_process(monkeypatch)
        hashed.clear()
        again = SegmentIndex(tmp_path / "ix", IDENTITY, 16, writable=True)
        assert again.rows == 150 and len(hashed) == 2
    assert sorted(p.name for p in (tmp_path / "ix").iterdir() if p.name.endswith(".tmp")) == []
    del index


def test_the_record_keeps_only_the_files_listed(tmp_path: Path, hashed: list[str]) -> None:
    folder = tmp_path / "f"
    folder.mkdir()
    for name in ("a.i8", "b.i8"):
        (folder / name).write_bytes(name.encode() * 10)
    checked = CheckedFiles(folder)
    digests = {name: checked.digest(folder / name) for name in ("a.i8", "b.i8")}
    checked.save(["a.i8"])
    assert sorted(json.loads((folder / RECORD).read_text())["files"]) == ["a.i8"]
    assert CheckedFiles(folder).digest(folder / "a.i8") == digests["a.i8"]


@pytest.mark.parametrize("kind", ["symlink", "fifo", "oversized", "device"])
def test_a_record_that_is_not_a_plain_small_file_is_not_read(
    tmp_path: Path, hashed: list[str], monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    """A symlink (even to a record that would vouch for the files), a FIFO nobody writes, a
    record over the size limit, a device that never ends: each is passed over at once, the files
    are hashed, and a plain record takes its place."""
    index = _two_segments(tmp_path / "ix")
    record, elsewhere = tmp_path / "ix" / RECORD, tmp_path / "elsewhere.json"
    if kind == "device":
        record.rename(elsewhere)
        record.symlink_to("/dev/zero")
        monkeypatch.setattr(segmentcheck.os, "O_NOFOLLOW", 0)  # as if it were followed
    else:
        _put_aside(
            record, elsewhere, kind, lambda size: monkeypatch.setattr(segmentcheck, "_RECORD_LIMIT", size)
        )
    hashed.clear()
    _new_process(monkeypatch)
    again = SegmentIndex(tmp_path / "ix", IDENTITY, 16, writable=True)
    assert again.rows == 150 and sorted(hashed) == sorted(s.file for s in index.segments)
    assert record.is_file() and not record.is_symlink()
    assert sorted(json.loads(record.read_text())["files"]) == sorted(hashed)
    assert json.loads(elsewhere.read_text())["files"], "what the symlink named is untouched"


def test_a_symlink_put_where_the_record_is_written_is_not_written_through(
    tmp_path: Path, hashed: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _two_segments(tmp_path / "ix")
    (tmp_path / "ix" / RECORD).unlink()
    victim = tmp_path / "victim"
    victim.write_text("keep me")
    temporary = tmp_path / "ix" / f".{RECORD}.{os.getpid()}.{threading.get_ident()}.tmp"
    temporary.symlink_to(victim)
    _new_process(monkeypatch)
    assert SegmentIndex(tmp_path / "ix", IDENTITY, 16, writable=True).rows == 150
    assert victim.read_text() == "keep me" and not temporary.exists()
    assert (tmp_path / "ix" / RECORD).is_file()


@pytest.mark.parametrize("kind", ["symlink", "device", "fifo"])
def test_a_segment_that_is_not_a_plain_file_is_set_aside_unread(
    tmp_path: Path, hashed: list[str], monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    """A segment's name taken by a symlink (to the very bytes it held), a device that never ends
    or a FIFO: never followed, read or waited on; the folder is set aside as damaged."""
    index = _two_segments(tmp_path / "ix")
    target = tmp_path / "ix" / index.segments[0].file
    kept = tmp_path / "kept.i8"
    target.rename(kept)
    if kind == "symlink":
        target.symlink_to(kept)
    elif kind == "device":
        try:  # a device node like /dev/zero in the folder itself (needs the right to make one)
            os.mknod(target, stat.S_IFCHR | 0o600, os.makedev(1, 5))
        except PermissionError:
            pytest.skip("this user cannot make a device node")
    else:
        os.mkfifo(target)
    hashed.clear()
    _new_process(monkeypatch)
    with capture_logs() as logs:
        opened = SegmentIndex(tmp_path / "ix", IDENTITY, 16, writable=True)
    assert (opened.rows, hashed) == (0, [])
    assert [e["event"] for e in logs if e["log_level"] == "warning"] == [SET_ASIDE]
    assert kept.exists()


@pytest.mark.parametrize("kind", ["symlink", "fifo", "oversized"])
def test_a_manifest_that_is_not_a_plain_small_file_is_set_aside_unread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    _two_segments(tmp_path / "ix")
    manifest, elsewhere = tmp_path / "ix" / "manifest.json", tmp_path / "manifest.json"
    _put_aside(manifest, elsewhere, kind, lambda size: monkeypatch.setattr(segments, "_MANIFEST_LIMIT", size))
    assert segments.on_disk(tmp_path) == (0, 0), "dreamer status counts it as nothing, at once"
    _new_process(monkeypatch)
    with capture_logs() as logs:
        opened = SegmentIndex(tmp_path / "ix", IDENTITY, 16, writable=True)
    assert opened.rows == 0
    assert [e["event"] for e in logs if e["log_level"] == "warning"] == [SET_ASIDE]
    assert json.loads(elsewhere.read_text())["segments"], "what the symlink named is untouched"
