"""bench.encoder: both runtimes in their own processes on real LoCoMo memories, their vectors
compared; a missing data folder and bad arguments are refused in one line."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from bench import encoder as bench_encoder
from bench._common import BenchError
from tests.locomo import missing_reason, require_data

pytest.importorskip("onnxruntime")


@pytest.mark.skipif(missing_reason() is not None, reason=missing_reason() or "")
def test_it_measures_both_runtimes_and_their_agreement(capsys: pytest.CaptureFixture[str]) -> None:
    """Twelve memories, one thread: a row per runtime with a positive speed and memory, the
    runtimes' vectors within 1e-4 of each other, as JSON a script can read."""
    args = ["--data", str(require_data()), "--texts", "12", "--threads", "1", "--json"]
    assert bench_encoder.main(args) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["texts"] == 12
    assert [(r["runtime"], r["threads"]) for r in result["rows"]] == [("numpy", 1), ("onnx", 1)]
    for row in result["rows"]:
        assert row["texts_per_s"] > 0 and row["rss_loaded_mib"] > row["rss_released_mib"] > 0
    agree = result["agreement"]
    assert agree["max_abs_diff"] < 1e-4 and agree["max_cosine_diff"] < 1e-4
    assert agree["min_self_cosine"] > 0.9999
    assert "onnx / numpy texts per second" in bench_encoder.render(result)


def test_agreement_sees_a_difference() -> None:
    """A vector moved by 0.01 shows as a coordinate difference, a self cosine below 1 and a
    changed cosine between two texts."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((5, 8)).astype(np.float32)
    a /= np.linalg.norm(a, axis=1, keepdims=True)
    b = a.copy()
    b[2, 0] += 0.01
    got = bench_encoder.agreement(a, b)
    assert got["max_abs_diff"] == pytest.approx(0.01, abs=1e-6)
    assert got["max_cosine_diff"] > 1e-3 and got["min_self_cosine"] < 1.0
    assert bench_encoder.agreement(a, a)["max_abs_diff"] == 0.0


def test_a_missing_folder_and_bad_arguments_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """No LoCoMo folder: exit 2 naming it; a folder without memories is a BenchError; --threads 0
    and words for threads are usage errors."""
    assert bench_encoder.main(["--data", str(tmp_path / "nowhere"), "--texts", "4"]) == 2
    assert "nowhere" in capsys.readouterr().err
    (tmp_path / "1.json").write_text(json.dumps({"conversation": {}}), encoding="utf-8")
    with pytest.raises(BenchError):
        bench_encoder.memories(tmp_path, 10)
    for bad in (["--threads", "0"], ["--threads", "two"], ["--texts", "1"]):
        with pytest.raises(SystemExit) as caught:
            bench_encoder.main(bad)
        assert caught.value.code == 2
