"""The LoCoMo benchmark's metrics: provenance, coverage, near duplicates, hits, answer-bearing cards."""

from __future__ import annotations

import pytest

from bench._common import HashedEmbedder
from bench.locomo.data import Question, parse_conversation
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
