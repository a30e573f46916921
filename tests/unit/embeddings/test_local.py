"""The in-process embedder: real model files, no network."""

from __future__ import annotations

import os
import shutil
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dreamer.embeddings import threads
from dreamer.embeddings.base import EmbeddingsUnavailableError
from dreamer.embeddings.local import (
    LocalEmbedder,
    ModelFilesError,
    check_model_dir,
    default_model_dir,
    forward_passes,
)

pytest.importorskip("tokenizers")
pytest.importorskip("safetensors")


def _model_dir() -> Path:
    try:
        return default_model_dir()
    except ImportError as exc:  # pragma: no cover - CI installs the model package
        pytest.skip(str(exc))


class TestLocalEmbedder:
    def test_matches_the_published_reference_cosines(self, embedder: LocalEmbedder) -> None:
        """The numpy forward pass gives the cosines sentence-transformers publishes for this model."""
        pairs = {
            ("The new movie is awesome", "The new movie is so great"): 0.8939,
            ("The cat sits outside", "The dog plays in the garden"): 0.2838,
            ("I love pasta", "Do you like pizza?"): 0.5096,
            ("A man is playing guitar", "A woman watches TV"): -0.0327,
        }
        for (a, b), expected in pairs.items():
            v = embedder.embed_sync([a, b])
            assert float(v[0] @ v[1]) == pytest.approx(expected, abs=2e-4), (a, b)

    def test_rows_are_unit_vectors_in_input_order(self, embedder: LocalEmbedder) -> None:
        """One unit row per text, in order, whatever the batch it was padded in."""
        texts = ["short", "a considerably longer sentence that needs padding for the others", "short"]
        v = embedder.embed_sync(texts)
        assert v.shape == (3, 384)
        assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
        assert np.allclose(v[0], v[2], atol=1e-6)
        alone = embedder.embed_sync(["short"])
        assert np.allclose(alone[0], v[0], atol=1e-5)

    def test_blank_and_empty_input(self, embedder: LocalEmbedder) -> None:
        """No texts give an empty matrix; a blank text still gives a unit vector, not NaN."""
        assert embedder.embed_sync([]).shape == (0, 384)
        v = embedder.embed_sync(["   "])
        assert np.isfinite(v).all() and float(np.linalg.norm(v[0])) == pytest.approx(1.0, abs=1e-5)

    def test_a_huge_text_is_truncated_not_refused(self, embedder: LocalEmbedder) -> None:
        """A text far beyond the model's 256 tokens embeds (truncated) instead of failing."""
        v = embedder.embed_sync(["word " * 20_000])
        assert v.shape == (1, 384) and np.isfinite(v).all()

    async def test_async_embed_runs_off_the_loop_and_agrees(self, embedder: LocalEmbedder) -> None:
        """``embed`` gives the same rows as ``embed_sync``."""
        v = await embedder.embed(["Nextcloud runs version 28.0"])
        assert np.allclose(v, embedder.embed_sync(["Nextcloud runs version 28.0"]), atol=1e-6)

    def test_model_id_names_the_model(self, embedder: LocalEmbedder) -> None:
        """The model id carries the provider, the name and a fingerprint of the files."""
        provider, name, digest = embedder.model_id.split(":")
        assert (provider, name, len(digest)) == ("local", "all-MiniLM-L6-v2", 12)


def counting_loads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Each weights file the embedder loads from now on, slowed by 0.3 s (a cold disk) so that calls
    made at once all arrive while the first load runs."""
    import dreamer.embeddings.local as local

    real = local.load_weights
    loads: list[str] = []

    def load_weights(path: Path, *args: Any, **kwargs: Any) -> Any:
        loads.append(str(path))
        time.sleep(0.3)
        return real(path, *args, **kwargs)

    monkeypatch.setattr(local, "load_weights", load_weights)
    return loads


def at_once(calls: int, call: Callable[[], Any]) -> list[Any]:
    """``call()`` from ``calls`` threads released together; each one's result, or the exception it raised."""
    start = threading.Barrier(calls)

    def one(_: int) -> Any:
        start.wait()
        try:
            return call()
        except Exception as exc:
            return exc

    with ThreadPoolExecutor(calls) as pool:
        return list(pool.map(one, range(calls)))


def weights_that_do_not_load(src: Path, root: Path) -> Path:
    """The model's files in ``root`` with one tensor's dtype in the weights' header changed from F32
    to F16: the header parses and every tensor ends within the file, so the check passes, but the
    tensor's size no longer matches its shape and the weights reader refuses the file."""
    for name in ("config.json", "tokenizer.json"):
        shutil.copy(src / name, root / name)
    weights = bytearray((src / "model.safetensors").read_bytes())
    at = weights.index(b'"dtype":"F32"', 8) + len('"dtype":"')
    weights[at : at + 3] = b"F16"
    (root / "model.safetensors").write_bytes(weights)
    return root


class TestLoadingOnce:
    def test_first_calls_made_at_once_load_the_model_once(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Four threads embedding at once on a new embedder (as a run's batch and the embedded
        store's recalls do, each in a worker thread) load the weights once: the others wait for
        that load, and all get the same rows."""
        loads = counting_loads(monkeypatch)
        embedder = LocalEmbedder(_model_dir())
        rows = at_once(4, lambda: embedder.embed_sync(["Sam moved to Lisbon in May"]))
        assert len(loads) == 1
        assert all(isinstance(r, np.ndarray) and np.allclose(r, rows[0], atol=1e-6) for r in rows)

    def test_weights_that_fail_to_load_are_read_once_until_they_change(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Weights that pass the check but do not load: calls made at once each raise the load's
        ModelFilesError naming the directory, from one attempt; once the file is replaced by a
        whole one, the next call loads it."""
        model = weights_that_do_not_load(_model_dir(), tmp_path)
        embedder = LocalEmbedder(model)
        loads = counting_loads(monkeypatch)
        errors = at_once(3, lambda: embedder.embed_sync(["hello"]))
        assert len(loads) == 1
        assert all(isinstance(e, ModelFilesError) for e in errors)
        assert all(f"{model}: cannot load the model" in str(e) for e in errors)
        with pytest.raises(ModelFilesError, match="cannot load the model"):
            embedder.check_loads()
        assert len(loads) == 1
        (model / "model.safetensors").unlink()
        shutil.copy(_model_dir() / "model.safetensors", model / "model.safetensors")
        assert embedder.embed_sync(["hello"]).shape == (1, 384)
        assert len(loads) == 2


class TestModelDirectory:
    def test_missing_directory_is_named(self, tmp_path: Path) -> None:
        """A model path that does not exist is refused by name."""
        with pytest.raises(ModelFilesError, match="not a directory"):
            LocalEmbedder(tmp_path / "nope")

    def test_missing_file_is_named(self, tmp_path: Path) -> None:
        """A directory without the tokenizer names the missing file."""
        src = _model_dir()
        for name in ("config.json", "model.safetensors"):
            (tmp_path / name).symlink_to(src / name)
        with pytest.raises(ModelFilesError, match=r"tokenizer\.json: missing"):
            check_model_dir(tmp_path)

    @pytest.mark.parametrize("damage", ["truncated", "empty", "random bytes", "header only"])
    def test_a_weights_file_that_is_not_whole_is_refused_by_name(self, tmp_path: Path, damage: str) -> None:
        """Truncated, empty or random-bytes weights of the real size are refused when the embedder
        is made (before any roll-up), naming the file; nothing loads them first."""
        src = _model_dir()
        for name in ("config.json", "tokenizer.json"):
            shutil.copy(src / name, tmp_path / name)
        real = (src / "model.safetensors").read_bytes()
        header_end = 8 + int.from_bytes(real[:8], "little")
        broken = {
            "truncated": real[: len(real) // 2],
            "empty": b"",
            "random bytes": os.urandom(len(real)),
            "header only": real[:header_end],
        }[damage]
        (tmp_path / "model.safetensors").write_bytes(broken)
        with pytest.raises(ModelFilesError, match=r"model\.safetensors: not a whole safetensors file"):
            LocalEmbedder(tmp_path)

    def test_the_model_id_follows_the_content_not_the_size(self, tmp_path: Path) -> None:
        """One byte of the weights changed (same size, header intact): another model id, so vectors
        of the two are never compared as one model's."""
        src = _model_dir()
        for name in ("config.json", "tokenizer.json"):
            shutil.copy(src / name, tmp_path / name)
        real = bytearray((src / "model.safetensors").read_bytes())
        (tmp_path / "model.safetensors").write_bytes(real)
        same = LocalEmbedder(tmp_path).model_id
        assert same == LocalEmbedder(src).model_id
        real[-1] ^= 0xFF
        (tmp_path / "model.safetensors").write_bytes(real)
        assert LocalEmbedder(tmp_path).model_id != same

    def test_a_json_file_that_does_not_parse_is_refused(self, tmp_path: Path) -> None:
        src = _model_dir()
        for name in ("config.json", "model.safetensors"):
            (tmp_path / name).symlink_to(src / name)
        (tmp_path / "tokenizer.json").write_bytes(b"\x00" * 100)
        with pytest.raises(ModelFilesError, match=r"tokenizer\.json: not a readable JSON file"):
            LocalEmbedder(tmp_path)

    def test_not_a_bert_config_is_refused(self, tmp_path: Path) -> None:
        """A config of another architecture is refused when the model loads."""
        src = _model_dir()
        for name in ("model.safetensors", "tokenizer.json"):
            (tmp_path / name).symlink_to(src / name)
        (tmp_path / "config.json").write_text('{"model_type": "gpt2"}')
        with pytest.raises(ModelFilesError, match="not a BERT encoder"):
            LocalEmbedder(tmp_path).embed_sync(["hello"])

    @pytest.mark.parametrize("runtime", ["numpy", "onnx"])
    @pytest.mark.parametrize(
        ("change", "said"),
        [
            ({"hidden_size": 240}, "the weights and config.json are of different models"),
            ({"num_attention_heads": 7}, "heads must divide the hidden size"),
            ({"num_hidden_layers": 9}, "lack 48 tensors"),
        ],
    )
    def test_a_config_of_another_model_fails_at_load_not_in_a_batch(
        self, tmp_path: Path, runtime: str, change: dict[str, int], said: str
    ) -> None:
        """config.json's sizes disagreeing with the weights is a ModelFilesError naming the
        directory when the model loads (check-config's check too), on either runtime; before, the
        numpy encoder raised a bare reshape error from inside a batch."""
        if runtime == "onnx":
            pytest.importorskip("onnxruntime")
        import json

        src = _model_dir()
        for name in ("model.safetensors", "tokenizer.json"):
            (tmp_path / name).symlink_to(src / name)
        config = json.loads((src / "config.json").read_text(encoding="utf-8"))
        (tmp_path / "config.json").write_text(json.dumps({**config, **change}), encoding="utf-8")
        embedder = LocalEmbedder(tmp_path, runtime=runtime)
        with pytest.raises(ModelFilesError, match=f"{tmp_path}: cannot load the model: .*{said}"):
            embedder.check_loads()
        with pytest.raises(ModelFilesError, match=said):
            embedder.embed_sync(["hello"])


class TestRuntime:
    def test_numpy_unless_onnx_is_asked_for(self) -> None:
        """numpy runs the model by default; ``onnx`` runs onnxruntime where it is installed."""
        pytest.importorskip("onnxruntime")
        assert LocalEmbedder(_model_dir()).runtime == "numpy"
        embedder = LocalEmbedder(_model_dir(), runtime="onnx")
        assert embedder.runtime == "onnx"
        assert type(embedder._load()).__name__ == "OnnxEncoder"

    def test_onnx_asked_for_without_onnxruntime_says_what_to_install(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """``runtime = "onnx"`` without onnxruntime is refused at once, naming the key and the fix."""
        monkeypatch.setitem(sys.modules, "onnxruntime", None)
        with pytest.raises(EmbeddingsUnavailableError, match=r"embeddings\.runtime 'onnx' needs onnxruntime"):
            LocalEmbedder(_model_dir(), runtime="onnx")
        assert LocalEmbedder(_model_dir()).embed_sync(["hello"]).shape == (1, 384)  # numpy still runs

    def test_an_unknown_runtime_is_refused(self) -> None:
        """A runtime name that is not one of the three is a ValueError naming the choices."""
        with pytest.raises(ValueError, match="numpy, onnx"):
            LocalEmbedder(_model_dir(), runtime="torch")

    def test_batches_in_length_order_change_no_vector(self, embedder: LocalEmbedder) -> None:
        """Texts of very different lengths, batched two at a time shortest first: each row is the
        one the text gets alone, in the caller's order."""
        texts = ["a " * 200, "hi", "Sam moved to Lisbon in May with his two dogs.", "", "ok then", "x " * 40]
        small = LocalEmbedder(_model_dir(), batch_size=2, runtime=embedder.runtime)
        together = small.embed_sync(texts)
        for row, text in enumerate(texts):
            assert np.abs(together[row] - embedder.embed_sync([text])[0]).max() < 1e-5, text

    def test_no_forward_pass_holds_more_tokens_than_its_budget(self, embedder: LocalEmbedder) -> None:
        """``batch_size`` 32, but each pass the encoder runs holds at most ``forward_tokens`` tokens
        once padded (a long text alone), and every row is still the one the text gets alone."""
        texts = [
            "a " * 200,
            "hi",
            *(f"Sam moved to Lisbon in May with his {n} dogs." for n in range(12)),
            "x " * 40,
        ]
        small = LocalEmbedder(_model_dir(), batch_size=32, runtime=embedder.runtime, forward_tokens=64)
        encoder = small._load()
        shapes: list[tuple[int, int]] = []
        real = encoder.encode

        def spy(ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
            shapes.append(ids.shape)
            return real(ids, mask)

        encoder.encode = spy  # type: ignore[method-assign]
        together = small.embed_sync(texts)
        assert sum(rows for rows, _ in shapes) == len(texts)
        assert all(rows == 1 or rows * width <= 64 for rows, width in shapes), shapes
        assert max(rows for rows, _ in shapes) > 1  # short texts still share a pass
        for row, text in enumerate(texts):
            assert np.abs(together[row] - embedder.embed_sync([text])[0]).max() < 1e-5, text


class TestPassesSideBySide:
    """The forward passes of one call on two threads (`dreamer.embeddings.threads.split_work`)."""

    def test_two_threads_run_the_passes_and_change_no_vector(
        self, embedder: LocalEmbedder, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Each thread runs a pass (the first pass of each waits for the other's), and every row is
        the one the text gets alone."""
        monkeypatch.setattr(threads, "worker_count", lambda: 2)
        texts = ["a " * 90, "hi", *(f"Sam moved to Lisbon in May with his {n} dogs." for n in range(9))]
        small = LocalEmbedder(_model_dir(), runtime=embedder.runtime, forward_tokens=64)
        encoder = small._load()
        real = encoder.encode
        both = threading.Barrier(2, timeout=10)
        idents: list[int] = []

        def spy(ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
            if threading.get_ident() not in idents:
                idents.append(threading.get_ident())
                both.wait()
            return real(ids, mask)

        encoder.encode = spy  # type: ignore[method-assign]
        together = small.embed_sync(texts)
        assert len(idents) == 2
        for row, text in enumerate(texts):
            assert np.abs(together[row] - embedder.embed_sync([text])[0]).max() < 1e-5, text

    def test_a_model_file_cut_short_under_the_other_thread_is_a_model_files_error(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """The file truncated under a loaded encoder while the passes run on two threads: the pass
        reading a row past the cut fails on whichever thread, and the call says what happened."""
        monkeypatch.setattr(threads, "worker_count", lambda: 2)
        model = tmp_path / "model"
        shutil.copytree(_model_dir(), model)
        embedder = LocalEmbedder(model, forward_tokens=16)
        embedder.embed_sync(["warm"])
        os.truncate(model / "model.safetensors", 20_000)
        words = ["xylophone", "quartz", "zeppelin", "marmalade", "harpsichord", "kiwi"]
        with pytest.raises(ModelFilesError, match="changed under the loaded model"):
            embedder.embed_sync([f"{word} {word} {word}" for word in words])


class TestForwardPasses:
    @pytest.mark.parametrize(
        ("widths", "most_rows", "tokens", "want"),
        [
            ([3, 3, 3, 3], 32, 8, [[0, 1], [2, 3]]),
            ([3, 3, 3, 3], 3, 100, [[0, 1, 2], [3]]),
            ([1, 2, 4, 9], 32, 8, [[0, 1], [2], [3]]),  # a text over the budget goes alone
            ([5], 32, 1, [[0]]),
            ([], 32, 8, []),
        ],
    )
    def test_cuts_by_rows_and_padded_tokens(
        self, widths: list[int], most_rows: int, tokens: int, want: list[list[int]]
    ) -> None:
        """Each pass is the longest run of the next texts (shortest first) whose count times the
        longest width fits ``tokens``, up to ``most_rows``; every text is in exactly one pass."""
        order = np.arange(len(widths), dtype=np.int64)
        got = forward_passes(np.array(widths, dtype=np.int64), order, most_rows, tokens)
        assert [list(map(int, rows)) for rows in got] == want


class TestWeightsHeld:
    def test_the_numpy_encoder_leaves_the_word_table_in_the_file(self) -> None:
        """The numpy encoder holds the linear and normalisation weights (about 40 MiB) but not the
        47 MiB word embedding table, whose rows it reads from the file as texts need them; its
        vectors are those of the whole table (the published reference cosines, above)."""
        from dreamer.embeddings.minilm import BertEncoder

        embedder = LocalEmbedder(_model_dir())
        encoder = embedder._load()
        assert isinstance(encoder, BertEncoder)
        assert encoder.table_on_disk and encoder.vocab_size == 30522
        weights_file = (_model_dir() / "model.safetensors").stat().st_size
        assert encoder.held_bytes < weights_file - 30522 * 384 * 4 + (1 << 20)

    def test_a_model_file_cut_short_after_loading_is_a_model_files_error(self, tmp_path: Path) -> None:
        """The weights file truncated in place under a loaded encoder: the next embedding raises
        ModelFilesError naming the directory (not a crash, not a bare ValueError), and the call
        after it loads the file as it now is, which the check refuses by name."""
        model = tmp_path / "model"
        shutil.copytree(_model_dir(), model)
        embedder = LocalEmbedder(model)
        embedder.embed_sync(["warm"])
        os.truncate(model / "model.safetensors", 20_000)
        with pytest.raises(ModelFilesError, match="changed under the loaded model"):
            embedder.embed_sync(["a word the warm-up did not read: xylophone"])
        with pytest.raises(ModelFilesError, match="cut short"):
            embedder.embed_sync(["again"])

    def test_onnxruntime_is_given_the_whole_table(self) -> None:
        """onnxruntime's graph gathers rows itself, so its encoder gets the table read whole."""
        pytest.importorskip("onnxruntime")
        embedder = LocalEmbedder(_model_dir(), runtime="onnx")
        vector = embedder.embed_sync(["Sam moved to Lisbon in May"])
        numpy_vector = LocalEmbedder(_model_dir()).embed_sync(["Sam moved to Lisbon in May"])
        assert np.abs(vector - numpy_vector).max() < 1e-4


class TestRelease:
    def test_release_gives_the_weights_back_and_the_next_call_loads_them(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """After release nothing is held (a second release says so), the next embedding loads the
        weights once more and gives the same vectors. The vectors' length stays known: the
        embedded store took a length of None for a model never loaded, and looked for units to
        embed across the whole bank in each recall that followed a release."""
        loads = counting_loads(monkeypatch)
        embedder = LocalEmbedder(_model_dir())
        assert embedder.release() is False  # nothing loaded yet
        assert embedder.dimension is None and not embedder.loaded
        first = embedder.embed_sync(["Sam moved to Lisbon in May"])
        assert embedder.dimension == 384 and embedder.loaded and len(loads) == 1
        assert embedder.release() is True
        assert not embedder.loaded and embedder.release() is False
        assert embedder.dimension == 384 and len(loads) == 1
        again = embedder.embed_sync(["Sam moved to Lisbon in May"])
        assert len(loads) == 2
        assert np.abs(first - again).max() < 1e-6

    def test_a_call_in_flight_keeps_its_encoder(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """A release while another thread is embedding does not pull the encoder from under it."""
        embedder = LocalEmbedder(_model_dir())
        embedder.embed_sync(["warm"])
        started, go_on = threading.Event(), threading.Event()
        real_encode = type(embedder._load()).encode

        def slow_encode(self: Any, ids: Any, mask: Any) -> Any:
            started.set()
            go_on.wait(10)
            return real_encode(self, ids, mask)

        monkeypatch.setattr(type(embedder._load()), "encode", slow_encode)
        with ThreadPoolExecutor(1) as pool:
            future = pool.submit(embedder.embed_sync, ["Sam moved to Lisbon in May"])
            assert started.wait(10)
            assert embedder.release() is True
            go_on.set()
            assert future.result(10).shape == (1, 384)
