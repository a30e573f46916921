"""On-disk vector segments: built from rows, searched memory-mapped, trusted only when their bytes
and owner match, and set aside (never a crash, never a wrong answer) when a file is damaged."""

from __future__ import annotations

import json
import multiprocessing
from pathlib import Path

import numpy as np
import pytest
from structlog.testing import capture_logs

from dreamer.embeddings import segmentfile, segments
from dreamer.embeddings.segments import Segment, SegmentIndex

IDENTITY = {"state": "/s", "bank": "g", "model": "m:a", "dimension": 16}


def unit_rows(n: int, seed: int = 0, dimension: int = 16) -> np.ndarray:
    rows = np.random.default_rng(seed).standard_normal((n, dimension)).astype(np.float32)
    normalised: np.ndarray = rows / np.linalg.norm(rows, axis=1, keepdims=True)
    return normalised


def built(folder: Path, n: int = 200, *, first_key: int = 1) -> tuple[SegmentIndex, np.ndarray]:
    index = SegmentIndex(folder, IDENTITY, 16, writable=True)
    rows = unit_rows(n)
    keys = list(range(first_key, first_key + n))
    assert index.add_segment(keys, rows, last_key=keys[-1], probes=[(keys[0], "d0")], damaged={"dx": "X."})
    return index, rows


def test_a_segment_is_found_again_by_a_new_process_and_answers_as_exact_search(tmp_path: Path) -> None:
    """A saved segment is opened from the manifest alone; each query's own row is its first hit,
    with the cosine exact search gives (to float16's precision), and the damaged ids kept."""
    _, rows = built(tmp_path / "ix")
    again = SegmentIndex(tmp_path / "ix", IDENTITY, 16, writable=False)
    assert (again.covered, again.rows, again.damaged) == (200, 200, {"dx": "X."})
    assert again.probes() == [(1, "d0")]
    hits = again.search(rows[:5], 3)
    exact = rows[:5] @ rows.T
    for row, found in enumerate(hits):
        assert found[0][0] == row + 1 and found[0][1] == pytest.approx(1.0, abs=2e-3)
        best = np.argsort(-exact[row])[:3] + 1
        assert [key for key, _ in found[:3]] == list(best)


def test_segments_add_up_and_keys_past_covered_are_refused(tmp_path: Path) -> None:
    """Two segments are both searched; a segment whose last key is not past what is covered is
    not built (the owner's rows are already in one)."""
    index, rows = built(tmp_path / "ix", 100)
    more = unit_rows(50, seed=1)
    assert index.add_segment(list(range(101, 151)), more, last_key=150, probes=[(101, "d100")], damaged={})
    assert not index.add_segment([1], rows[:1], last_key=150, probes=[], damaged={})
    assert [(s.first_key, s.last_key, s.rows) for s in index.segments] == [(1, 100, 100), (101, 150, 50)]
    (found,) = index.search(more[7:8], 1)
    assert 108 in [key for key, _ in found]


def test_segments_written_at_another_page_size_are_kept(tmp_path: Path) -> None:
    """The page size (`SEGMENT_ROWS`) is not part of what the folder was built for: an index built
    with larger pages (an upgrade lowered 16,384 to 4,096) keeps its segments and adds smaller ones,
    and both are searched, so no run after the upgrade builds them again."""
    built(tmp_path / "ix", 200)
    again = SegmentIndex(tmp_path / "ix", IDENTITY, 16, writable=True, segment_rows=50)
    assert (again.covered, again.rows, again.segment_rows) == (200, 200, 50)
    more = unit_rows(50, seed=1)
    assert again.add_segment(list(range(201, 251)), more, last_key=250, probes=[(201, "d200")], damaged={})
    assert [s.rows for s in again.segments] == [200, 50]
    (found,) = again.search(more[3:4], 1)
    assert found[0][0] == 204


def test_a_read_only_index_builds_nothing(tmp_path: Path) -> None:
    index = SegmentIndex(tmp_path / "ix", IDENTITY, 16, writable=False)
    assert not index.add_segment([1, 2], unit_rows(2), last_key=2, probes=[], damaged={})
    assert not (tmp_path / "ix").exists()


@pytest.mark.parametrize(
    "damage",
    [
        "truncate",
        "flip",
        "garbage manifest",
        "other owner",
        "other dimension",
        "escaping file",
        "missing file",
    ],
)
def test_a_damaged_or_foreign_folder_is_set_aside_with_a_warning(tmp_path: Path, damage: str) -> None:
    """Whatever is wrong with the folder, opening it gives an empty index (the owner then searches
    exactly and builds again) and one warning naming the problem; a writable index clears it."""
    index, _ = built(tmp_path / "ix")
    segment_file = tmp_path / "ix" / index.segments[0].file
    manifest = tmp_path / "ix" / "manifest.json"
    body = json.loads(manifest.read_text())
    if damage == "truncate":
        segment_file.write_bytes(segment_file.read_bytes()[:1000])
    elif damage == "flip":
        data = bytearray(segment_file.read_bytes())
        data[len(data) // 2] ^= 0xFF
        segment_file.write_bytes(bytes(data))
    elif damage == "garbage manifest":
        manifest.write_bytes(b"\xff{not json")
    elif damage == "other owner":
        body["identity"] = {**IDENTITY, "model": "m:b"}
        manifest.write_text(json.dumps(body))
    elif damage == "other dimension":
        body["dimension"] = 8
        manifest.write_text(json.dumps(body))
    elif damage == "escaping file":
        body["segments"][0]["file"] = "../../etc/passwd.i8"
        manifest.write_text(json.dumps(body))
    else:
        segment_file.unlink()
    with capture_logs() as logs:
        opened = SegmentIndex(tmp_path / "ix", IDENTITY, 16, writable=True)
    assert (opened.segments, opened.covered, opened.rows) == ([], 0, 0)
    assert opened.search(unit_rows(1), 3) == [[]]
    warnings = [entry for entry in logs if entry["log_level"] == "warning"]
    assert [entry["event"] for entry in warnings] == [
        "vector index: set aside, searching exactly until it is built again"
    ]
    assert str(tmp_path / "ix") in warnings[0]["problem"]
    assert not manifest.exists() and not list((tmp_path / "ix").glob("*.i8"))


def test_a_segment_entry_naming_keys_out_of_order_is_refused() -> None:
    raw = Segment("seg-5-1.i8", 5, 1, 3, "x", ()).as_json()
    with pytest.raises(ValueError, match="out of order"):
        Segment.from_json(raw)
    with pytest.raises(ValueError, match="not well formed"):
        Segment.from_json({"file": "a.i8"})


def _hold_lock(
    folder: str, ready: multiprocessing.synchronize.Event, done: multiprocessing.synchronize.Event
) -> None:
    import fcntl
    import os

    handle = os.open(os.path.join(folder, ".lock"), os.O_RDWR | os.O_CREAT)
    fcntl.flock(handle, fcntl.LOCK_EX)
    ready.set()
    done.wait(30)


def test_a_second_writer_skips_building_rather_than_waiting(tmp_path: Path) -> None:
    """While another process holds the folder's lock, a build returns False at once and writes
    no file; once the lock is free it builds."""
    folder = tmp_path / "ix"
    folder.mkdir()
    context = multiprocessing.get_context("spawn")
    ready, done = context.Event(), context.Event()
    holder = context.Process(target=_hold_lock, args=(str(folder), ready, done))
    holder.start()
    try:
        assert ready.wait(30)
        index = SegmentIndex(folder, IDENTITY, 16, writable=True)
        assert not index.add_segment([1, 2, 3], unit_rows(3), last_key=3, probes=[], damaged={})
        assert not list(folder.glob("*.i8"))
    finally:
        done.set()
        holder.join(30)
    assert index.add_segment([1, 2, 3], unit_rows(3), last_key=3, probes=[], damaged={})


def test_an_unwritable_folder_searches_exactly_instead_of_failing(tmp_path: Path) -> None:
    """A folder that cannot be made (a file is in its way) makes a build return False with a
    warning naming it; nothing raises."""
    (tmp_path / "ix").write_text("not a folder")
    index = SegmentIndex(tmp_path / "ix", IDENTITY, 16, writable=True)
    with capture_logs() as logs:
        assert not index.add_segment([1], unit_rows(1), last_key=1, probes=[], damaged={})
    text = " ".join(str(entry) for entry in logs)
    assert "cannot write its folder" in text and str(tmp_path / "ix") in text


def test_status_counts_what_the_manifests_name_and_skips_a_damaged_one(tmp_path: Path) -> None:
    """``on_disk`` sums every bank's manifest under the folder without opening a segment; a
    manifest that cannot be read counts for nothing, and a missing folder is (0, 0)."""
    assert segments.on_disk(tmp_path / "none") == (0, 0)
    built(tmp_path / "vectors" / "a")
    index, _ = built(tmp_path / "vectors" / "b", 50)
    assert index.add_segment(list(range(51, 61)), unit_rows(10), last_key=60, probes=[], damaged={})
    assert segments.on_disk(tmp_path / "vectors") == (3, 260)
    (tmp_path / "vectors" / "a" / "manifest.json").write_text("{")
    assert segments.on_disk(tmp_path / "vectors") == (2, 60)


def _rewrite(folder: Path, file: str, data: bytes) -> None:
    """Write ``data`` as the segment and record its checksum in the manifest, so that only the
    checks of what the file holds can find it wrong."""
    import hashlib

    (folder / file).write_bytes(data)
    manifest = folder / "manifest.json"
    body = json.loads(manifest.read_text())
    body["segments"][0]["sha256"] = hashlib.sha256(data).hexdigest()
    manifest.write_text(json.dumps(body))


@pytest.mark.parametrize(
    "damage", ["magic", "rows", "short", "key out of range", "keys unordered", "nan scale"]
)
def test_a_segment_whose_checksum_matches_but_whose_contents_do_not_is_set_aside(
    tmp_path: Path, damage: str
) -> None:
    """A file the manifest's checksum vouches for is still read with care: another magic, a row
    count or length that is not the manifest's, keys outside the segment's range or out of order,
    a scale that is not a number; each sets the folder aside with one warning, and nothing raises."""
    index, _ = built(tmp_path / "ix", 10)
    name = index.segments[0].file
    data = bytearray((tmp_path / "ix" / name).read_bytes())
    header = segmentfile.HEADER.size
    if damage == "magic":
        data[:8] = b"NOTASEG!"
    elif damage == "rows":
        data[8:16] = (11).to_bytes(8, "little")
    elif damage == "short":
        del data[-5:]
    elif damage == "key out of range":
        data[header : header + 8] = (10_000).to_bytes(8, "little")
    elif damage == "keys unordered":
        data[header + 8 : header + 16] = (1).to_bytes(8, "little")
    else:
        data[header + 80 : header + 84] = np.array([np.nan], dtype="<f4").tobytes()
    _rewrite(tmp_path / "ix", name, bytes(data))
    with capture_logs() as logs:
        opened = SegmentIndex(tmp_path / "ix", IDENTITY, 16, writable=False)
    assert (opened.segments, opened.covered) == ([], 0)
    assert [e["event"] for e in logs if e["log_level"] == "warning"] == [
        "vector index: set aside, searching exactly until it is built again"
    ]


def test_a_folder_of_the_older_format_is_set_aside_and_its_files_removed(tmp_path: Path) -> None:
    """A folder written by the HNSW version (format 1, ``.usearch`` files) is not read: it is set
    aside with a warning, its files removed, and the next build starts the new format."""
    folder = tmp_path / "ix"
    folder.mkdir()
    (folder / "seg-1-200.usearch").write_bytes(b"\0" * 64)
    body = {
        "format": 1,
        "identity": IDENTITY,
        "dimension": 16,
        "covered": 200,
        "damaged": {},
        "segments": [
            {
                "file": "seg-1-200.usearch",
                "first_key": 1,
                "last_key": 200,
                "rows": 200,
                "sha256": "0" * 64,
                "probes": [],
            }
        ],
    }
    (folder / "manifest.json").write_text(json.dumps(body))
    with capture_logs() as logs:
        index = SegmentIndex(folder, IDENTITY, 16, writable=True)
    assert index.covered == 0 and any(e["log_level"] == "warning" for e in logs)
    assert not (folder / "seg-1-200.usearch").exists() and not (folder / "manifest.json").exists()
    assert index.add_segment(list(range(1, 4)), unit_rows(3), last_key=3, probes=[], damaged={})
    assert [p.name for p in folder.glob("seg-*")] == ["seg-1-3.i8"]


def test_a_segment_removed_after_it_was_opened_fails_the_search_cleanly(tmp_path: Path) -> None:
    """A segment deleted (or cut short) while the index is open makes the next search raise
    `SegmentsLost` with a warning, and leave the index empty: never a traceback from numpy or a
    half answer."""
    index, rows = built(tmp_path / "ix", 50)
    (tmp_path / "ix" / index.segments[0].file).unlink()
    with capture_logs() as logs, pytest.raises(segments.SegmentsLost):
        index.search(rows[:2], 3)
    assert (index.segments, index.covered) == ([], 0)
    assert any(e["log_level"] == "warning" for e in logs)
    assert index.search(rows[:2], 3) == [[], []]


def test_rows_given_out_of_order_or_not_finite_are_stored_searchable(tmp_path: Path) -> None:
    """Keys given out of order are stored sorted with their own rows; a row of zeros or of NaN
    is kept as a row of zeros (cosine 0 with everything), never a NaN that wins every search."""
    index = SegmentIndex(tmp_path / "ix", IDENTITY, 16, writable=True)
    rows = unit_rows(5)
    rows[3] = np.nan
    rows[4] = 0.0
    assert index.add_segment([5, 2, 4, 1, 3], rows, last_key=5, probes=[], damaged={})
    hits = index.search(rows[:3], 1)
    assert [found[0][0] for found in hits] == [5, 2, 4]
    (far,) = index.search(-rows[:1], 5)
    assert {key: round(score, 2) for key, score in far}[1] == 0.0
