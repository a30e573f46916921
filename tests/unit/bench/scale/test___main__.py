"""The scale benchmark's command: ``--ledger``, its data directory, the table saying which ledger."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import bench.scale.run as scale_run
from bench.scale.__main__ import main, parse_args, render
from tests.locomo import require_data


def result(ledger: str) -> dict[str, Any]:
    row = {
        "cards": 1000,
        "ledger": ledger,
        "run_s": 0.5,
        "run_cpu_s": 0.4,
        "peak_rss_mib": 60.0,
        "state_mib": 3.0,
        "store_mib": 1.0,
        "watchdog_gap_s": 0.2,
        "floor_s": 0.05,
        "run_over_floor": 10.0,
        "gate_passers": 12,
        "recall_ms": 2.0,
        "recall_one_tier_ms": 2.0,
        "setup_s": 1.0,
        "outcome": "promoted",
        "promoted": 20,
        "reinforced": 0,
        "watchdog_pings": 5,
        "ready_s": 0.5,
        "exit_s": 0.1,
    }
    return {"embedder": "none", "ledger": ledger, "rows": [row]}


class TestCommand:
    def test_the_ledger_is_synthetic_unless_asked(self) -> None:
        """Without ``--ledger`` the files are today's."""
        assert parse_args([]).ledger == "synthetic"
        assert parse_args(["--ledger", "realistic", "--data", "/d"]).data == "/d"

    def test_the_table_says_which_ledger(self) -> None:
        """The title names the ledger the rows were measured on."""
        assert "realistic ledger" in render(result("realistic")).splitlines()[0]
        assert "synthetic ledger" in render(result("synthetic")).splitlines()[0]

    def test_a_missing_locomo_directory_exits_2_naming_it(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """No conversations where ``--data`` points: exit status 2, the path and the fix on stderr,
        no traceback, nothing built."""
        missing = tmp_path / "no-locomo"
        assert main(["--ledger", "realistic", "--data", str(missing), "--sizes", "100"]) == 2
        err = capsys.readouterr().err
        assert str(missing) in err and "--data DIR" in err
        assert "Traceback" not in err and "building" not in err

    @pytest.mark.parametrize("flags", [["--cold-index"], ["--model-change"], ["--vectors", "model"]])
    def test_vector_options_without_the_embedder_are_refused(
        self, flags: list[str], capsys: pytest.CaptureFixture[str]
    ) -> None:
        """``--cold-index`` and ``--vectors model`` mean nothing without ``--embedder local``: exit
        2 saying so, before anything is built (they used to be ignored without a word)."""
        assert main([*flags, "--sizes", "100"]) == 2
        err = capsys.readouterr().err
        assert f"{flags[0]}" in err and "needs --embedder local" in err and "building" not in err


@pytest.mark.slow
class TestEndToEnd:
    def test_quick_on_the_realistic_ledger(
        self, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """``--ledger realistic --quick``: both sizes measured, each row saying its ledger, the
        run judging the 20 new units against the realistic cards; each size's files written back
        to disk before its daemon starts (else its run writes back the benchmark's copy)."""
        data = require_data()
        order: list[str] = []
        write_back, run_daemon = scale_run.write_back, scale_run.run_daemon

        def writing_back(size: int) -> float:
            order.append("write back")
            return write_back(size)

        def running(*args: Any, **kwargs: Any) -> Any:
            order.append("daemon")
            return run_daemon(*args, **kwargs)

        monkeypatch.setattr(scale_run, "write_back", writing_back)
        monkeypatch.setattr(scale_run, "run_daemon", running)
        assert main(["--ledger", "realistic", "--data", str(data), "--quick", "--json"]) == 0
        out = json.loads(capsys.readouterr().out)
        assert out["ledger"] == "realistic"
        assert [r["cards"] for r in out["rows"]] == [1_000, 10_000]
        assert order == ["write back", "daemon"] * 2
        for row in out["rows"]:
            assert row["ledger"] == "realistic" and row["outcome"] == "promoted"
            assert row["promoted"] + row["reinforced"] >= 1 and row["gate_passers"] >= 0
            assert row["written_back_s"] >= 0
