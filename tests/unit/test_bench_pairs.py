"""The dedup calibration bench (`python -m bench.pairs`): its refusals and its figures on the dataset."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from bench.pairs.__main__ import main
from tests.locomo import DATA_DIR_ENV, require_data, requires_locomo


class TestPairsBench:
    def test_missing_directory_is_exit_2_naming_the_option(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """No data directory: exit 2 with what to pass, no traceback."""
        assert main(["--data", str(tmp_path / "absent"), "--routes", "lexical"]) == 2
        assert "--data DIR" in capsys.readouterr().err

    def test_data_without_the_labelled_conversations_is_exit_2(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A directory that lacks the conversations the pairs name is refused, and the data variable
        the tests read is left as it was."""
        monkeypatch.delenv(DATA_DIR_ENV, raising=False)
        (tmp_path / "7.json").write_text("{}", encoding="utf-8")
        assert main(["--data", str(tmp_path), "--routes", "lexical"]) == 2
        assert "labelled pairs" in capsys.readouterr().err
        assert DATA_DIR_ENV not in os.environ

    @requires_locomo
    def test_lexical_route_on_the_dataset(self, capsys: pytest.CaptureFixture[str]) -> None:
        """On the dataset: at least 300 pairs, both directions, duplicate precision >= 0.95."""
        assert main(["--data", str(require_data()), "--routes", "lexical", "--json"]) == 0
        result = json.loads(capsys.readouterr().out)
        assert result["pairs"] >= 300 and result["directions"] == 2 * result["pairs"]
        [route] = result["routes"]
        assert route["duplicate"]["precision"] >= 0.95
        assert route["conflict"]["recall"] == 1.0
