"""One segment file on disk: what it is written with it answers with, to the codes' rounding;
a file cut short fails the scan with an ``OSError``; rows that do not match their keys are refused."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from dreamer.embeddings import segmentfile
from dreamer.embeddings.segmentfile import SegmentFile


def unit_rows(n: int, seed: int, dimension: int = 32) -> np.ndarray:
    rows = np.random.default_rng(seed).standard_normal((n, dimension)).astype(np.float32)
    normalised: np.ndarray = rows / np.linalg.norm(rows, axis=1, keepdims=True)
    return normalised


def written(path: Path, rows: np.ndarray, first_key: int) -> SegmentFile:
    keys = list(range(first_key, first_key + len(rows)))
    segmentfile.write(path, keys, rows, rows.shape[1])
    return SegmentFile.open(path, len(rows), rows.shape[1], keys[0], keys[-1])


@pytest.fixture(params=[1, 2], ids=["one thread", "two threads"])
def workers(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> int:
    """The scan on one thread, and in two shares side by side (the files cut between them)."""
    monkeypatch.setattr(segmentfile, "worker_count", lambda: request.param)
    return int(request.param)


def test_the_nearest_keys_across_files_are_the_exact_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, workers: int
) -> None:
    """Two files scanned in chunks smaller than either: each query's ``want`` best keys are the
    exact search's, and each cosine is within 0.01 of the exact one."""
    monkeypatch.setattr(segmentfile, "CHUNK_ROWS", 7)
    a, b = unit_rows(50, 1), unit_rows(30, 2)
    files = [written(tmp_path / "a.i8", a, 1), written(tmp_path / "b.i8", b, 51)]
    queries = unit_rows(6, 3)
    found = segmentfile.nearest(files, queries * np.float32(3), 5)  # a query's length does not matter
    every = np.vstack([a, b])
    for query, hits in zip(queries, found, strict=True):
        exact = every @ query
        assert {key for key, _ in hits} == set((np.argsort(-exact)[:5] + 1).tolist())
        for key, score in hits:
            assert score == pytest.approx(float(exact[key - 1]), abs=0.01)


def test_rows_better_than_every_earlier_one_still_enter_and_a_short_bank_gives_every_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, workers: int
) -> None:
    """The scan ranks only the rows at or above a query's best so far: rows ordered worst first
    (each chunk beats the last) still give the exact best, and asking for more rows than the
    files hold gives each of them once."""
    monkeypatch.setattr(segmentfile, "CHUNK_ROWS", 4)
    query = unit_rows(1, 5)[0]
    rows = unit_rows(40, 6)
    rows = rows[np.argsort(rows @ query)]  # worst first
    files = [written(tmp_path / "a.i8", rows[:25], 1), written(tmp_path / "b.i8", rows[25:], 26)]
    (best,) = segmentfile.nearest(files, query[None, :], 6)
    assert {key for key, _ in best} == set(range(35, 41))
    (every,) = segmentfile.nearest(files, query[None, :], 100)
    assert sorted(key for key, _ in every) == list(range(1, 41))


def test_shares_cut_the_files_into_runs_of_about_equal_rows(tmp_path: Path) -> None:
    """Runs in the files' order, none empty, the larger share never more than a file's rows past
    an even cut; more shares than files gives one file each."""
    sizes = [40, 5, 5, 30, 20]
    files = [written(tmp_path / f"{i}.i8", unit_rows(n, i), 1 + 100 * i) for i, n in enumerate(sizes)]
    two = segmentfile._shares(files, 2)
    assert [len(share) for share in two] == [3, 2] and [f for share in two for f in share] == files
    assert segmentfile._shares(files, 1) == [files]
    assert [len(s) for s in segmentfile._shares(files[:2], 8)] == [1, 1]
    assert segmentfile._shares(files[:1], 2) == [files[:1]]


def test_a_file_failing_in_the_other_share_fails_the_whole_scan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The second share's last file cut short: the scan raises its ``OSError``, not a partial answer."""
    monkeypatch.setattr(segmentfile, "worker_count", lambda: 2)
    files = [written(tmp_path / f"{i}.i8", unit_rows(20, i), 1 + 20 * i) for i in range(4)]
    data = (tmp_path / "3.i8").read_bytes()
    (tmp_path / "3.i8").write_bytes(data[:-10])
    with pytest.raises(OSError, match=r"3\.i8 ended before its 20 rows"):
        segmentfile.nearest(files, unit_rows(2, 9), 3)


def test_a_file_cut_short_after_it_was_opened_fails_the_scan(tmp_path: Path) -> None:
    opened = written(tmp_path / "a.i8", unit_rows(20, 1), 1)
    data = (tmp_path / "a.i8").read_bytes()
    (tmp_path / "a.i8").write_bytes(data[:-10])
    with pytest.raises(OSError, match="ended before its 20 rows"):
        segmentfile.nearest([opened], unit_rows(2, 2), 3)


@pytest.mark.parametrize("damage", ["key past the last", "key repeated across chunks", "scale not finite"])
def test_keys_or_scales_changed_after_opening_fail_the_scan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, damage: str
) -> None:
    """A scan reads each chunk's keys and scales from the file and checks them as opening did, so
    a file changed in place since is an OSError, not hits under wrong keys. The damage is in the
    third chunk: a key repeated across chunks is caught only when the chunks' keys are compared."""
    monkeypatch.setattr(segmentfile, "CHUNK_ROWS", 7)
    opened = written(tmp_path / "a.i8", unit_rows(20, 1), 1)
    data = bytearray((tmp_path / "a.i8").read_bytes())
    keys_at, scales_at = segmentfile.HEADER.size, segmentfile.HEADER.size + 20 * 8
    row = 14
    if damage == "key past the last":
        data[keys_at + row * 8 : keys_at + row * 8 + 8] = np.array([99], dtype="<u8").tobytes()
    elif damage == "key repeated across chunks":
        data[keys_at + row * 8 : keys_at + row * 8 + 8] = np.array([row], dtype="<u8").tobytes()
    else:
        data[scales_at + row * 4 : scales_at + row * 4 + 4] = np.array([np.nan], dtype="<f4").tobytes()
    (tmp_path / "a.i8").write_bytes(bytes(data))
    with pytest.raises(OSError, match="changed since it was opened"):
        segmentfile.nearest([opened], unit_rows(2, 2), 3)


def test_an_opened_file_holds_none_of_its_rows(tmp_path: Path) -> None:
    """Its keys and scales are read chunk by chunk as a scan goes, not kept per segment."""
    opened = written(tmp_path / "a.i8", unit_rows(20, 1), 1)
    assert not any(isinstance(value, np.ndarray) for value in dataclasses.asdict(opened).values())


def test_rows_that_do_not_match_their_keys_or_dimension_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="3 keys were given"):
        segmentfile.write(tmp_path / "a.i8", [1, 2, 3], unit_rows(2, 1), 32)
    with pytest.raises(ValueError, match="3 keys were given"):
        segmentfile.write(tmp_path / "a.i8", [1, 2, 3], unit_rows(3, 1, dimension=16), 32)


def test_nothing_to_scan_answers_empty_lists(tmp_path: Path) -> None:
    assert segmentfile.nearest([], unit_rows(2, 1), 3) == [[], []]
    opened = written(tmp_path / "a.i8", unit_rows(4, 1), 1)
    assert segmentfile.nearest([opened], unit_rows(2, 1), 0) == [[], []]


def test_a_symlink_where_the_file_goes_is_replaced_not_written_through(tmp_path: Path) -> None:
    """A symlink planted at the temporary's name (pointing at a file outside the folder) is
    removed, the segment written in its place, and the file it pointed at left as it was."""
    outside = tmp_path / "outside.txt"
    outside.write_text("keep me")
    (tmp_path / "seg.tmp").symlink_to(outside)
    written(tmp_path / "seg.tmp", unit_rows(3, 1), 1)
    assert outside.read_text() == "keep me" and not (tmp_path / "seg.tmp").is_symlink()


def test_a_search_hands_its_buffers_back_to_the_system(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, workers: int
) -> None:
    """The shares' buffers (7.9 MiB each at 384 dimensions) are freed and the heap trimmed once a
    search ends: kept by the allocator, they stayed in the process into the judge after it."""
    trims: list[None] = []
    monkeypatch.setattr(segmentfile, "give_back_memory", lambda: trims.append(None) or True)
    files = [written(tmp_path / f"{i}.i8", unit_rows(10, i), 1 + 10 * i) for i in range(3)]
    segmentfile.nearest(files, unit_rows(2, 9), 3)
    assert len(trims) == 1
