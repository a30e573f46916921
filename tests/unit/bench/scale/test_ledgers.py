"""Which texts the scale benchmark's files hold (``--ledger``), and where their cached files go."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench._common import BenchError
from bench.gating.banks import varied_text
from bench.scale.ledgers import (
    DATA_DIR_ENV,
    NEW_UNITS,
    OLD_UNITS,
    SYNTHETIC,
    LedgerSpec,
    default_data_dir,
    ledger_spec,
)
from tests.support.locomo_conversation import fixture_conversation


class TestSynthetic:
    def test_the_synthetic_ledger_is_todays_texts(self) -> None:
        """Cards, new and old units are ``varied_text`` at the indices the benchmark always used."""
        ledger = SYNTHETIC.open()
        assert [ledger.card_text(i) for i in range(3)] == [varied_text(i) for i in range(3)]
        assert ledger.new_unit_texts(10_000, NEW_UNITS) == [
            varied_text(10**9 + OLD_UNITS + k) for k in range(NEW_UNITS)
        ]
        assert ledger.old_unit_texts(10_000, OLD_UNITS, NEW_UNITS)[:2] == [
            varied_text(10**9),
            varied_text(10**9 + 1),
        ]

    def test_the_default_is_synthetic(self) -> None:
        """``--ledger synthetic`` needs no data directory."""
        assert ledger_spec("synthetic", "/nowhere") == SYNTHETIC
        assert SYNTHETIC.open().kind == "synthetic"


class TestCacheNames:
    def test_synthetic_files_keep_their_folders(self) -> None:
        """Files cached before ``--ledger`` existed are still found: ``N`` and ``N-local``."""
        assert SYNTHETIC.cache_name(10_000, "none") == "10000"
        assert SYNTHETIC.cache_name(10_000, "local") == "10000-local"

    def test_realistic_files_never_share_a_folder_with_synthetic_ones(self, tmp_path: Path) -> None:
        """The realistic folder names the ledger; its record names the data and the generator."""
        spec = LedgerSpec("realistic", tmp_path)
        assert spec.cache_name(10_000, "none") == "10000-realistic"
        assert spec.cache_name(10_000, "local") == "10000-realistic-local"
        assert spec.describe()["data"] == str(tmp_path) and "generator" in spec.describe()

    def test_model_vectors_get_their_own_folder_and_record(self, tmp_path: Path) -> None:
        """Files with the model's vectors never reuse seeded ones: the folder and the record say
        ``model``; without an embedder there are no vectors, so the folder is the same."""
        synthetic = ledger_spec("synthetic", vectors="model")
        assert synthetic.cache_name(10_000, "local") == "10000-local-model"
        assert synthetic.cache_name(10_000, "none") == "10000"
        assert synthetic.describe() == {"ledger": "synthetic", "vectors": "model"} != SYNTHETIC.describe()
        realistic = ledger_spec("realistic", str(tmp_path), "model")
        assert realistic.cache_name(100, "local") == "100-realistic-local-model"
        assert realistic.describe()["vectors"] == "model"
        assert ledger_spec("synthetic", vectors="seeded") == SYNTHETIC
        with pytest.raises(BenchError, match="seeded, model"):
            ledger_spec("synthetic", vectors="random")


class TestRealistic:
    def test_a_missing_directory_is_named_with_the_fix(self, tmp_path: Path) -> None:
        """No LoCoMo folder: the error names the path and says how to give one."""
        with pytest.raises(BenchError, match=rf"no directory {tmp_path / 'absent'}.*--data DIR"):
            ledger_spec("realistic", str(tmp_path / "absent")).open()

    def test_the_data_directory_comes_from_the_environment(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Without ``--data``, ``$DREAMER_LOCOMO_DIR``; without either, beside the repository."""
        monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path))
        assert ledger_spec("realistic") == LedgerSpec("realistic", tmp_path)
        monkeypatch.delenv(DATA_DIR_ENV)
        assert default_data_dir() == Path(__file__).resolve().parents[5] / "shared" / "data" / "locomo"

    def test_a_realistic_ledger_opens_on_locomo_shaped_files(self, tmp_path: Path) -> None:
        """A folder of conversations gives cards and the measured run's units."""
        (tmp_path / "7.json").write_text(json.dumps(fixture_conversation()), encoding="utf-8")
        ledger = ledger_spec("realistic", str(tmp_path)).open()
        assert ledger.kind == "realistic" and ledger.card_text(0)
        assert len(ledger.new_unit_texts(100, NEW_UNITS)) == NEW_UNITS

    def test_an_unknown_ledger_is_refused(self) -> None:
        """Only the two kinds exist."""
        with pytest.raises(BenchError, match="synthetic, realistic"):
            ledger_spec("real")
