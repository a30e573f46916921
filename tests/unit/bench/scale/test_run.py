"""Cached files of the scale benchmark: each ledger's in a folder of its own, reused only for it."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

import bench.scale.run as run
from bench.scale.ledgers import SYNTHETIC, LedgerSpec
from tests.support.locomo_conversation import fixture_conversation


@pytest.fixture
def realistic(tmp_path: Path) -> LedgerSpec:
    data = tmp_path / "locomo"
    data.mkdir()
    (data / "7.json").write_text(json.dumps(fixture_conversation()), encoding="utf-8")
    return LedgerSpec("realistic", data)


class TestCachedFiles:
    async def test_realistic_files_are_built_once_into_their_own_folder(
        self, tmp_path: Path, realistic: LedgerSpec
    ) -> None:
        """The first set-up builds into ``N-realistic`` and records the ledger; the second copies."""
        cache = tmp_path / "cache"
        config, _path, _before = await run.set_up(tmp_path / "a", 40, cache, "none", realistic)
        recorded = json.loads((cache / "40-realistic" / "built.json").read_text(encoding="utf-8"))
        assert recorded["ledger"] == "realistic" and recorded["data"] == str(realistic.data)
        assert not (cache / "40").exists()
        stamp = (cache / "40-realistic" / "built.json").stat().st_mtime_ns
        config, _path, _before = await run.set_up(tmp_path / "b", 40, cache, "none", realistic)
        assert (cache / "40-realistic" / "built.json").stat().st_mtime_ns == stamp
        with sqlite3.connect(config.state_path) as conn:
            texts = {row[0] for row in conn.execute("SELECT text FROM ledger")}
        assert texts == {realistic.open().card_text(i) for i in range(40)}

    def test_a_record_of_other_files_is_not_reused(self, tmp_path: Path, realistic: LedgerSpec) -> None:
        """Files recorded for another ledger, data or generator are built again; files cached
        before the ledger was recorded count as synthetic."""
        built = tmp_path / "40"
        built.mkdir()
        (built / "built.json").write_text(json.dumps({"size": 40, "embedder": "none"}), encoding="utf-8")
        assert run._cached(built, SYNTHETIC.describe())
        assert not run._cached(built, realistic.describe())
        (built / "built.json").write_text(json.dumps({**realistic.describe(), "generator": "r0"}))
        assert not run._cached(built, realistic.describe())
        assert not run._cached(tmp_path / "absent", SYNTHETIC.describe())


class TestWriteBack:
    def test_the_set_up_files_are_written_back_before_the_run(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """The kernel is asked to write every file back (the copy's pages would otherwise be
        written by the run's first flush), and the time it took is what is returned."""
        calls: list[str] = []
        monkeypatch.setattr(run.os, "sync", lambda: calls.append("sync"))
        taken = run.write_back(40)
        assert calls == ["sync"]
        assert taken >= 0.0
