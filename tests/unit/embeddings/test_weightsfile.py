"""The safetensors reader: each tensor read as safetensors itself reads it, a table left on disk
read row by row, and every damaged file refused with a reason instead of a crash."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from dreamer.embeddings.weightsfile import RowsOnDisk, WeightsFileError, load_weights, read_header

safetensors_numpy = pytest.importorskip("safetensors.numpy")


def small_file(path: Path) -> dict[str, np.ndarray]:
    """A safetensors file written by the safetensors package: a float32 table, a float16 table,
    an int64 vector and a scalar-shaped tensor."""
    rng = np.random.default_rng(7)
    tensors = {
        "table": rng.standard_normal((50, 6)).astype(np.float32),
        "half": rng.standard_normal((9, 4)).astype(np.float16),
        "ids": np.arange(5, dtype=np.int64),
        "bias": rng.standard_normal(6).astype(np.float32),
    }
    safetensors_numpy.save_file(tensors, str(path))
    return tensors


def with_header(path: Path, edit: dict[str, object]) -> None:
    """Rewrite the header of the file at ``path`` with ``edit`` merged into its entries (the data
    offsets count from the header's end, so the bytes after it keep their meaning)."""
    raw = path.read_bytes()
    length = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8 : 8 + length])
    for name, change in edit.items():
        old = header.get(name, {})
        header[name] = {**old, **change} if isinstance(change, dict) and isinstance(old, dict) else change
    encoded = json.dumps(header, separators=(",", ":")).encode()
    path.write_bytes(len(encoded).to_bytes(8, "little") + encoded + raw[8 + length :])


class TestReading:
    def test_a_header_of_any_length_reads(self, tmp_path: Path) -> None:
        """A header whose length is not a multiple of 8 (the tensors' bytes then start unaligned)
        reads the same values."""
        path = tmp_path / "w.safetensors"
        tensors = small_file(path)
        with_header(path, {"__metadata__": {"note": "odd"}})
        assert (8 + int.from_bytes(path.read_bytes()[:8], "little")) % 8
        assert np.array_equal(load_weights(path)["table"], tensors["table"])

    def test_every_tensor_reads_as_safetensors_reads_it(self, tmp_path: Path) -> None:
        """Each tensor comes back with safetensors' own values, dtype and shape."""
        path = tmp_path / "w.safetensors"
        small_file(path)
        want = safetensors_numpy.load_file(str(path))
        got = load_weights(path)
        assert set(got) == set(want)
        for name, array in want.items():
            mine = got[name]
            assert isinstance(mine, np.ndarray) and mine.dtype == array.dtype and np.array_equal(mine, array)

    def test_the_real_model_reads_as_safetensors_reads_it(self, model_dir: Path) -> None:
        """all-MiniLM-L6-v2's file: every tensor equal to safetensors' reading, and its word table
        left on disk gives the same rows for ids of any shape, repeated ones included."""
        path = model_dir / "model.safetensors"
        want = safetensors_numpy.load_file(str(path))
        got = load_weights(path, on_disk=("embeddings.word_embeddings.weight",))
        table = got.pop("embeddings.word_embeddings.weight")
        assert isinstance(table, RowsOnDisk)
        full = want.pop("embeddings.word_embeddings.weight")
        assert table.shape == full.shape
        for ids in (
            np.array([0, 30521, 101]),
            np.array([[7, 7, 102], [0, 1, 7]]),
            np.array([], dtype=np.int64),
        ):
            assert np.array_equal(table[ids], full[ids])
        assert all(np.array_equal(got[name], array) for name, array in want.items())

    def test_rows_of_a_half_precision_table_come_back_as_float32(self, tmp_path: Path) -> None:
        """A float16 table left on disk gives float32 rows of the same values."""
        path = tmp_path / "w.safetensors"
        tensors = small_file(path)
        half = load_weights(path, on_disk=("half",))["half"]
        assert isinstance(half, RowsOnDisk)
        rows = half[np.array([8, 0, 8])]
        assert rows.dtype == np.float32 and np.array_equal(
            rows, tensors["half"][[8, 0, 8]].astype(np.float32)
        )

    def test_rows_are_chosen_by_integer_ids_inside_the_table(self, tmp_path: Path) -> None:
        """An id past the table's end or below 0 is an IndexError, a float id a TypeError."""
        path = tmp_path / "w.safetensors"
        small_file(path)
        table = load_weights(path, on_disk=("table",))["table"]
        assert isinstance(table, RowsOnDisk)
        for bad in (np.array([50]), np.array([-1]), np.array([[3, 2**40]])):
            with pytest.raises(IndexError, match=r"outside 0\.\.49"):
                table[bad]
        with pytest.raises(TypeError, match="integer ids"):
            table[np.array([1.0])]

    def test_only_a_table_of_rows_stays_on_disk(self, tmp_path: Path) -> None:
        """Asking to leave a 1-D tensor on disk is refused by name."""
        path = tmp_path / "w.safetensors"
        small_file(path)
        with pytest.raises(WeightsFileError, match="'ids' is not a table of rows"):
            load_weights(path, on_disk=("ids",))


class TestTheFileChangingUnderIt:
    def test_a_file_replaced_after_loading_does_not_mix_with_it(self, tmp_path: Path) -> None:
        """A new file put in the old one's place (as a reinstall does) changes no row read through
        the table loaded before: it reads the file the other tensors came from."""
        path = tmp_path / "w.safetensors"
        tensors = small_file(path)
        table = load_weights(path, on_disk=("table",))["table"]
        other = tmp_path / "other.safetensors"
        safetensors_numpy.save_file({"table": np.zeros((50, 6), np.float32)}, str(other))
        os.replace(other, path)
        assert isinstance(table, RowsOnDisk)
        assert np.array_equal(table[np.array([3, 49])], tensors["table"][[3, 49]])

    def test_a_file_cut_short_after_loading_raises_instead_of_crashing(self, tmp_path: Path) -> None:
        """The same file truncated in place: a row past its new end is a WeightsFileError saying it
        was cut short (a memory map would die of SIGBUS here); rows still inside it read."""
        path = tmp_path / "w.safetensors"
        small_file(path)
        entries = read_header(path.open("rb"))
        table = load_weights(path, on_disk=("table",))["table"]
        assert isinstance(table, RowsOnDisk)
        os.truncate(path, entries["table"].start + 10 * 6 * 4)
        assert table[np.array([0, 9])].shape == (2, 6)
        with pytest.raises(WeightsFileError, match="row 10 is past the end of the file: cut short"):
            table[np.array([0, 10])]

    def test_a_closed_table_refuses_to_read(self, tmp_path: Path) -> None:
        """After close() a read is a WeightsFileError, never a read of whatever file took its
        descriptor's number."""
        path = tmp_path / "w.safetensors"
        small_file(path)
        table = load_weights(path, on_disk=("table",))["table"]
        assert isinstance(table, RowsOnDisk)
        table.close()
        with pytest.raises(WeightsFileError, match="closed"):
            table[np.array([0])]


class TestDamagedFiles:
    @pytest.mark.parametrize(
        ("damage", "why"),
        [
            (lambda raw: raw[:5], "5 bytes"),
            (lambda raw: (10**9).to_bytes(8, "little") + raw[8:], "header length does not fit"),
            (lambda raw: raw[:8] + b"\xff" * 8 + raw[16:], "not JSON"),
            (lambda raw: raw[:-1], "cut short"),
        ],
        ids=["too-short", "header-length", "header-garbage", "last-byte-missing"],
    )
    def test_a_file_that_is_not_whole_is_refused(self, tmp_path: Path, damage, why: str) -> None:  # type: ignore[no-untyped-def]
        """A truncated file, a header length past the file, a header of random bytes: each a
        WeightsFileError saying which, from the header alone."""
        path = tmp_path / "w.safetensors"
        small_file(path)
        path.write_bytes(damage(path.read_bytes()))
        with pytest.raises(WeightsFileError, match=why):
            load_weights(path)

    @pytest.mark.parametrize(
        ("edit", "why"),
        [
            ({"table": {"dtype": "F16"}}, r"'table': 1,200 bytes, its shape \[50, 6\] in F16 needs 600"),
            ({"table": {"dtype": "BF16"}}, "dtype 'BF16', which cannot be read"),
            ({"table": {"shape": [-1, 6]}}, "'table' has no valid shape"),
            ({"table": {"data_offsets": [10, 5]}}, "'table' has no valid data_offsets"),
            ({"table": {"data_offsets": [0, 10**12]}}, "cut short"),
            ({"table": "not an entry"}, "'table' has no valid data_offsets"),
        ],
        ids=["dtype-size", "bf16", "negative-shape", "reversed-offsets", "offsets-past-end", "not-an-object"],
    )
    def test_a_header_that_lies_about_a_tensor_names_it(self, tmp_path: Path, edit, why: str) -> None:  # type: ignore[no-untyped-def]
        """A header entry whose dtype, shape or byte range does not fit its bytes is refused,
        naming the tensor."""
        path = tmp_path / "w.safetensors"
        small_file(path)
        with_header(path, edit)
        with pytest.raises(WeightsFileError, match=why):
            load_weights(path)

    def test_a_header_without_tensors_is_refused(self, tmp_path: Path) -> None:
        """A header holding only metadata is no weights file."""
        path = tmp_path / "w.safetensors"
        header = json.dumps({"__metadata__": {"format": "np"}}).encode()
        path.write_bytes(len(header).to_bytes(8, "little") + header)
        with pytest.raises(WeightsFileError, match="holds no tensor"):
            load_weights(path)
