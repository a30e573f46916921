"""The LoCoMo benchmark's own correctness: parsing, baselines, metrics, and a replay of a tiny fixture.

The fixture is a LoCoMo-shaped conversation written here (no dataset text), so these tests run
without the data directory.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from bench._common import BenchError, HashedEmbedder, Vectors
from bench.locomo.__main__ import (
    NOT_HELD_SHOWN,
    llm_section,
    main,
    parse_args,
    run_benchmark,
    summarised_lines,
    units_held_lines,
)
from bench.locomo.baselines import ExactHashPolicy, HonchoPolicy, Policy
from bench.locomo.data import (
    Question,
    dia_ids,
    evidence_sessions,
    load_conversations,
    parse_conversation,
    parse_session_time,
    split_sentences,
)
from bench.locomo.deciding import CachedEmbedder
from bench.locomo.metrics import (
    Card,
    answer_bearing,
    bears_answer,
    coverage,
    differs_in_detail,
    is_hit,
    near_duplicate_pairs,
    per_100,
    provenance,
)
from tests.locomo import require_data, requires_locomo
from tests.support.stub import running_stub


def fixture_conversation() -> dict[str, Any]:
    """Two sessions with dialogue, one date-only session, and questions of every kind."""
    return {
        "speaker_a": "Ada",
        "speaker_b": "Ben",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [{"speaker": "Ada", "dia_id": "D1:1", "text": "hi"}],
        "session_2_date_time": "9:05 am on 20 June, 2023",
        "session_2": [{"speaker": "Ben", "dia_id": "D2:1", "text": "hello"}],
        "session_3_date_time": "3:00 pm on 1 July, 2023",
        "session_1_observation": {
            "Ada": [
                ["Ada keeps bees on the roof of her flat in Leeds.", "D1:3"],
                ["Ada sells the honey at the Saturday market.", ["D1:5", "D1:6"]],
            ],
            "Ben": [["Ben is training for the Berlin marathon.", "D1:8"]],
        },
        "session_1_summary": "Ada and Ben talked about bees. Ada sells honey! Ben runs a lot.",
        "events_session_1": {
            "Ada": ["Ada harvests honey for the first time."],
            "Ben": [],
            "date": "8 May, 2023",
        },
        "session_2_observation": {
            "Ada": [["Ada keeps bees on the roof of her flat in Leeds.", "D2:2"]],
            "Ben": [["Ben finished the Berlin marathon in four hours.", "D2:4"]],
        },
        "session_2_summary": "Ben ran the marathon.",
        "events_session_2": {"Ben": ["Ben runs the Berlin marathon."], "date": "20 June, 2023"},
        "qa": [
            {"question": "Where does Ada keep bees?", "answer": "Leeds", "evidence": ["D1:3"], "category": 1},
            {"question": "Where is the honey sold?", "answer": "market", "evidence": ["D1:5"], "category": 4},
            {"question": "What did Ben eat?", "answer": "", "evidence": ["D2:9"], "category": 5},
            {"question": "What is in session 3?", "answer": "", "evidence": ["D3:1"], "category": 2},
        ],
    }


class TestParsing:
    def test_session_time_afternoon(self) -> None:
        """A LoCoMo session time becomes an aware UTC datetime with the 12-hour clock resolved."""
        assert parse_session_time("1:56 pm on 8 May, 2023") == datetime(2023, 5, 8, 13, 56, tzinfo=UTC)

    def test_session_time_midnight_and_noon(self) -> None:
        """12 am is hour 0 and 12 pm is hour 12."""
        assert parse_session_time("12:05 am on 1 January, 2024").hour == 0
        assert parse_session_time("12:30 pm on 1 January, 2024").hour == 12

    def test_session_time_date_only_is_refused(self) -> None:
        """A date without a time of day is not a session time."""
        with pytest.raises(ValueError, match="session time"):
            parse_session_time("8 May, 2023")

    @pytest.mark.parametrize(
        ("raw", "expected"),
        [
            ("D1:3", ("D1:3",)),
            (["D1:3", "D1:5"], ("D1:3", "D1:5")),
            ("D8:6; D9:17", ("D8:6", "D9:17")),
            ("D:11:26", ("D11:26",)),
            ("D", ()),
            (["D1:3", "D1:3"], ("D1:3",)),
            (None, ()),
        ],
    )
    def test_dia_ids_variants(self, raw: object, expected: tuple[str, ...]) -> None:
        """Every evidence shape of the data gives canonical dialogue ids; malformed ones are dropped."""
        assert dia_ids(raw) == expected

    def test_split_sentences_keeps_initials(self) -> None:
        """Summaries are cut at sentence ends but not after an initial."""
        assert split_sentences("She read J.K. Rowling. Then she slept! Fine?") == [
            "She read J.K. Rowling.",
            "Then she slept!",
            "Fine?",
        ]

    def test_conversation_skips_date_only_sessions(self) -> None:
        """A session that has only a date_time key (no dialogue) is not replayed."""
        conv = parse_conversation("7", fixture_conversation())
        assert [s.number for s in conv.sessions] == [1, 2]
        assert conv.profile == "c7"

    def test_session_units_in_order_with_kinds(self) -> None:
        """Observations (with dia ids), then summary sentences, then events (never the date key)."""
        session = parse_conversation("7", fixture_conversation()).sessions[0]
        assert [u.kind for u in session.units] == ["observation"] * 3 + ["summary"] * 3 + ["event"]
        assert session.units[1].dia_ids == ("D1:5", "D1:6")
        assert session.units[-1].text == "Ada harvests honey for the first time."
        assert all(u.dia_ids == () for u in session.units if u.kind != "observation")

    def test_questions_parsed_with_category(self) -> None:
        """Questions keep their evidence and category; category 5 is adversarial."""
        conv = parse_conversation("7", fixture_conversation())
        assert [q.adversarial for q in conv.questions] == [False, False, True, False]
        assert evidence_sessions(conv.questions[3].evidence) == {3}

    def test_missing_directory_says_what_to_pass(self, tmp_path: Path) -> None:
        """A wrong --data path fails with a message naming the option."""
        with pytest.raises(BenchError, match="--data"):
            load_conversations(tmp_path / "nope")


class TestPolicies:
    def test_no_dedup_admits_everything(self) -> None:
        """The no-dedup baseline promotes every drafted card, repeats included."""
        assert Policy().admit(["a b", "a b"]) == [True, True]

    def test_exact_hash_ignores_case_and_outer_space(self) -> None:
        """mem0's md5 rule drops a card equal once stripped and lowercased, across batches."""
        policy = ExactHashPolicy()
        assert policy.admit(["Ada keeps bees.", "  ada keeps BEES. "]) == [True, False]
        assert policy.admit(["Ada keeps bees."]) == [False]
        assert policy.admit(["Ada keeps wasps."]) == [True]

    def test_honcho_drops_only_at_095_of_the_nearest(self) -> None:
        """Honcho's rule drops a card whose nearest promoted card is at cosine >= 0.95, keeps others."""
        policy = HonchoPolicy(HashedEmbedder())
        verdicts = policy.admit(
            [
                "Evan plans a painting session with Sam.",
                "Sam plans a painting session with Evan.",  # same words: cosine 1.0 on unigrams
                "Evan bought a red kayak last summer.",
            ]
        )
        assert verdicts == [True, False, True]

    def test_honcho_exact_text_is_dropped(self) -> None:
        """An exact (stripped, lowercased) repeat is dropped before any similarity."""
        policy = HonchoPolicy(HashedEmbedder())
        policy.admit(["Ada keeps bees."])
        assert policy.admit(["ADA KEEPS BEES."]) == [False]


class TestMetrics:
    def test_provenance_unions_source_units(self) -> None:
        """A card's provenance is the union of its source units' dialogue ids."""
        units = {"u1": frozenset({("7", "D1:3")}), "u2": frozenset({("7", "D1:5")})}
        assert provenance(["u1", "u2", "unknown"], units) == {("7", "D1:3"), ("7", "D1:5")}

    def test_coverage_any_and_all_skip_adversarial(self) -> None:
        """Coverage counts non-adversarial questions with any / all of their evidence covered."""
        questions = [
            ("7", Question("q1", ("D1:3",), 1)),
            ("7", Question("q2", ("D1:3", "D1:9"), 2)),
            ("7", Question("q3", ("D1:3",), 5)),
            ("8", Question("q4", ("D1:3",), 1)),
        ]
        any_share, all_share = coverage(questions, {("7", "D1:3")})
        assert (any_share, all_share) == (2 / 3, 1 / 3)

    def test_near_duplicates_only_within_a_profile(self) -> None:
        """Identical cards of two profiles are not a pair; within one profile they are."""
        embedder = HashedEmbedder()
        cards = [
            Card("a", "Ada keeps bees in Leeds.", "c1", ()),
            Card("b", "Ada keeps bees in Leeds.", "c2", ()),
            Card("c", "Ada keeps bees in Leeds.", "c2", ()),
            Card("d", "Ben runs marathons every spring.", "c2", ()),
        ]
        assert near_duplicate_pairs(cards, embedder, 0.90) == 1
        assert per_100(1, 4) == 25.0

    def test_hit_only_in_top_k(self) -> None:
        """A hit counts only when one of the first k results holds some of the evidence."""
        evidence = frozenset({("7", "D1:3")})
        ranked = [frozenset(), frozenset(), frozenset(), frozenset(), frozenset(), evidence]
        assert not is_hit(ranked, evidence, k=5)
        assert is_hit(ranked, evidence, k=6)


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


class TestNearDuplicateBreakdown:
    def test_changed_date_is_a_detail_difference(self) -> None:
        """A pair that differs only in its date is reported as differing in a protected detail."""
        assert differs_in_detail(
            "Gina and Jon caught up at 9:32 am on 8 February, 2023.",
            "Gina and Jon caught up at 7:18 pm on 27 May, 2023.",
        )

    def test_reworded_same_fact_is_not(self) -> None:
        """A rewording with the same details is not a detail difference."""
        assert not differs_in_detail("Ada keeps bees on her roof.", "Ada keeps bees on the roof.")


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


class TestAnswerBearing:
    def test_half_of_the_answer_words_is_enough(self) -> None:
        """Cards holding half the answer's content words bear it; stopwords and case do not count."""
        assert bears_answer(["Caroline researched adoption agencies."], "Adoption agencies")
        assert bears_answer(["She moved from Sweden.", "Then to Boston."], "Sweden and Norway")
        assert not bears_answer(["She moved from Sweden."], "Norway, Denmark and Sweden")

    @pytest.mark.parametrize("answer", ["", "the of and", "   "])
    def test_an_answer_without_content_words_is_never_borne(self, answer: str) -> None:
        """An empty or all-stopword answer counts for no one (it cannot be checked)."""
        assert not bears_answer(["anything at all"], answer)
        assert not answer_bearing(Question("q?", ("D1:1",), 1, answer))

    def test_only_categories_1_and_4_count(self) -> None:
        """Multi-hop (1) and single-hop (4) questions count; temporal (2) and adversarial (5) do not."""
        assert answer_bearing(Question("q?", (), 1, "Sweden"))
        assert answer_bearing(Question("q?", (), 4, "Sweden"))
        assert not answer_bearing(Question("q?", (), 2, "Sweden"))
        assert not answer_bearing(Question("q?", (), 5, "Sweden"))

    def test_numeric_answers_are_read_as_text(self) -> None:
        """A number in the data's answer field is compared as its digits."""
        conversation = parse_conversation(
            "9", {"qa": [{"question": "How many?", "answer": 3, "category": 1}]}
        )
        assert conversation.questions[0].answer == "3"
        assert bears_answer(["She has 3 kids."], conversation.questions[0].answer)


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

    def test_cached_embedder_embeds_each_text_once(self) -> None:
        """Repeated texts are embedded once; the cosine of a text with itself is 1."""
        seen: list[str] = []

        class Recording(HashedEmbedder):
            def embed(self, texts: Sequence[str]) -> Vectors:
                seen.extend(texts)
                return super().embed(texts)

        cached = CachedEmbedder(Recording())
        cached.embed(["a b", "c d", "a b"])
        cached.embed(["c d"])
        assert sorted(seen) == ["a b", "c d"]
        assert cached.cosine("a b", "a b") == pytest.approx(1.0)
