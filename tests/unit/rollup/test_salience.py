"""Ranking new units by recency, proof, information and the profile directive.

Where the wording of a real memory matters, the unit is a sentence of the LoCoMo benchmark conversations
(snap-research/locomo) loaded from the dataset by position (`tests.locomo`), and the test is skipped when the
dataset is absent; the other texts are written for these tests.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dreamer.rollup.salience import (
    InvalidSalienceInputError,
    SalienceInput,
    SalienceWeights,
    directive_keywords,
    score_units,
)
from tests.locomo import sentence

T0 = datetime(2022, 5, 20, 19, 49, tzinfo=UTC)


def unit(uid: str, text: str, minutes: int = 0, proof: int = 1) -> SalienceInput:
    """A unit created `minutes` after T0."""
    return SalienceInput(uid, text, T0 + timedelta(minutes=minutes), proof)


ONLY_RECENCY = SalienceWeights(recency=1, proof=0, information=0, directive=0)
ONLY_PROOF = SalienceWeights(recency=0, proof=1, information=0, directive=0)
ONLY_INFORMATION = SalienceWeights(recency=0, proof=0, information=1, directive=0)
ONLY_DIRECTIVE = SalienceWeights(recency=0, proof=0, information=0, directive=1)


class TestParts:
    def test_recency_is_relative_within_the_batch(self) -> None:
        """The newest unit scores recency 1 and the oldest 0, however old the batch is."""
        units = [unit("old", "Nate adopts a dog.", 0), unit("new", "Nate buys a tank.", 60)]
        scored = {s.unit.id: s.parts["recency"] for s in score_units(units, None)}
        assert scored == {"old": 0.0, "new": 1.0}

    def test_recency_against_now(self) -> None:
        """With `now`, recency runs from the oldest unit to now."""
        units = [unit("a", "Nate adopts a dog.", 0), unit("b", "Nate buys a tank.", 30)]
        scored = score_units(units, None, now=T0 + timedelta(minutes=60))
        assert {s.unit.id: s.parts["recency"] for s in scored} == {"a": 0.0, "b": 0.5}

    def test_newer_unit_ranks_first(self) -> None:
        """With recency alone, the newest unit comes first."""
        units = [
            unit("a", "Joanna writes.", 0),
            unit("b", "Joanna hikes.", 10),
            unit("c", "Joanna reads.", 5),
        ]
        assert [s.id for s in score_units(units, None, weights=ONLY_RECENCY)] == ["b", "c", "a"]

    def test_more_proof_ranks_first_and_saturates(self) -> None:
        """More proof ranks higher, on a log scale that stops growing at the cap."""
        units = [
            unit("one", "A fact.", proof=1),
            unit("four", "A fact.", proof=4),
            unit("many", "A fact.", proof=500),
        ]
        scored = score_units(units, None, weights=ONLY_PROOF)
        assert [s.id for s in scored] == ["many", "four", "one"]
        assert scored[0].parts["proof"] == 1.0
        assert 0 < scored[2].parts["proof"] < scored[1].parts["proof"] < 1

    def test_zero_proof_scores_nothing(self) -> None:
        """A unit never confirmed scores 0 for proof."""
        assert score_units([unit("a", "A fact.", proof=0)], None)[0].parts["proof"] == 0.0

    def test_long_text_does_not_dominate(self) -> None:
        """Information is capped: a rambling unit scores no more than a dense dataset event at the cap."""
        dense = unit("dense", sentence(("42", "events_session_12", "Joanna", 0)))
        rambling = unit(
            "rambling", " ".join(["Joanna talked about screenplays and festivals and letters"] * 40)
        )
        scored = {s.id: s.parts["information"] for s in score_units([dense, rambling], None)}
        assert scored["dense"] == 1.0
        assert scored["rambling"] <= scored["dense"]

    def test_more_distinct_words_rank_higher_below_the_cap(self) -> None:
        """Below the cap, a unit with more distinct content words ranks higher."""
        units = [
            unit("short", "Nate has turtles."),
            unit("longer", "Nate has two turtles named Mario and Luigi."),
        ]
        assert [s.id for s in score_units(units, None, weights=ONLY_INFORMATION)] == ["longer", "short"]

    def test_directive_terms_raise_matching_units(self) -> None:
        """Units that mention the directive's keywords rank above those that do not (dataset facts)."""
        submitted = sentence(("42", "session_16_observation", "Joanna", 0))
        to_a_festival = submitted.replace("contest recently", "festival")
        assert to_a_festival != submitted
        units = [
            unit("pets", sentence(("42", "events_session_12", "Nate", 0))),
            unit("writing", to_a_festival),
        ]
        ranked = score_units(
            units, "Track the user's writing: screenplays, scripts and festivals.", weights=ONLY_DIRECTIVE
        )
        assert [s.id for s in ranked] == ["writing", "pets"]
        assert ranked[0].parts["directive"] == 1.0
        assert ranked[1].parts["directive"] == 0.0

    def test_directive_as_a_list_of_terms(self) -> None:
        """A directive can be a list of terms; they are stemmed like unit text."""
        assert directive_keywords(["Screenplays", "festival"]) == directive_keywords("screenplay festivals")

    def test_no_directive_scores_zero(self) -> None:
        """Without a directive, the directive part is 0 for everyone."""
        assert score_units([unit("a", "Joanna writes screenplays.")], None)[0].parts["directive"] == 0.0


class TestOrdering:
    def test_ties_break_by_created_at_then_id(self) -> None:
        """Equal scores are ordered by creation time, then id: oldest first."""
        units = [unit("b", "Same fact.", 5), unit("c", "Same fact.", 0), unit("a", "Same fact.", 5)]
        ranked = score_units(units, None, weights=ONLY_INFORMATION)
        assert [s.id for s in ranked] == ["c", "a", "b"]

    @given(st.permutations(list(range(8))))
    def test_order_does_not_depend_on_input_order(self, order: list[int]) -> None:
        units = [
            unit(
                f"u{i}", f"Nate won tournament number {i % 3} with team {i % 2}.", minutes=i % 4, proof=i % 3
            )
            for i in range(8)
        ]
        baseline = [s.id for s in score_units(units, "tournament")]
        assert [s.id for s in score_units([units[i] for i in order], "tournament")] == baseline

    def test_scores_are_sorted_best_first(self) -> None:
        units = [
            unit(str(i), f"Fact number {i} about Joanna's writing " + "and more " * i, i, i)
            for i in range(10)
        ]
        scores = [s.score for s in score_units(units, "writing")]
        assert scores == sorted(scores, reverse=True)


class TestInputs:
    def test_negative_proof_count_is_refused(self) -> None:
        """A negative proof count is refused with the unit's id."""
        with pytest.raises(InvalidSalienceInputError, match="'bad'"):
            SalienceInput("bad", "text", T0, -1)

    def test_mixed_naive_and_aware_timestamps_are_refused(self) -> None:
        """Timestamps with and without a timezone cannot be compared; the error says to add one."""
        units = [unit("a", "A fact."), SalienceInput("b", "B fact.", datetime(2022, 5, 20), 1)]
        with pytest.raises(InvalidSalienceInputError, match="timezone"):
            score_units(units, None)

    def test_negative_weight_is_refused(self) -> None:
        """A negative weight is refused; zero switches a part off."""
        with pytest.raises(InvalidSalienceInputError, match="use 0"):
            SalienceWeights(recency=-0.1)


class TestChatter:
    def test_filler_is_chatter_and_short_facts_are_not(self) -> None:
        """'ok thanks, bye' carries nothing; 'Nate loves cats.' is a fact however short."""
        from dreamer.rollup.salience import is_chatter

        assert is_chatter("ok thanks, that's all for now")
        assert is_chatter("Sounds good! See you tomorrow, bye")
        assert not is_chatter("Nate loves cats.")
        assert not is_chatter("Grafana listens on port 3000 on host hermes-mon.")

    @pytest.mark.parametrize(
        "text",
        [
            "Caroline and Melanie had a conversation on 8 May 2023 at 1:56 pm.",
            "Joanna and Nate caught up on January 23, 2022, at 2:01 pm.",
            "Tim and John spoke at 10:29 am on 9 August, 2023.",
            "Gina and Jon met at 4:04 pm on 20 January, 2023.",
            "Caroline and Melanie catch up after a long time.",
            "Joanna and Nate conversed at 3:35 pm on 12 May, 2022.",
            "Nate and Joanna talked at 8:10 pm on 7 November, 2022.",
        ],
    )
    def test_contact_records_are_chatter(self, text: str) -> None:
        """'X and Y caught up at <time> on <date>' records a session, not a fact: it is chatter."""
        from dreamer.rollup.salience import is_chatter, is_contact_record

        assert is_contact_record(text) and is_chatter(text)

    @pytest.mark.parametrize(
        "text",
        [
            "Alice met Bob at the conference in 2019.",
            "Alice met Bob in 2019.",
            "Jon and Gina, at 10:43 am on 4 February, 2023, discussed Jon's business endeavors.",
            "Caroline called Melanie about the adoption agency.",
            "Nate caught a cold on 3 May.",
        ],
    )
    def test_facts_about_meetings_are_not_contact_records(self, text: str) -> None:
        """A meeting without a clock time, a topic, or a single person keeps the unit a fact."""
        from dreamer.rollup.salience import is_chatter, is_contact_record

        assert not is_contact_record(text) and not is_chatter(text)

    def test_units_without_a_contact_word_skip_the_detail_analysis(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Only a unit holding a contact word gets the costly protected-detail analysis."""
        from dreamer.rollup import salience

        analysed: list[str] = []
        real = salience.protected_details

        def recording(text: str) -> Any:
            analysed.append(text)
            return real(text)

        monkeypatch.setattr(salience, "protected_details", recording)
        salience.is_chatter("Maria volunteers at the homeless shelter with her aunt.")
        salience.is_chatter("Tim and John spoke at 10:29 am on 9 August, 2023.")
        assert analysed == ["Tim and John spoke at 10:29 am on 9 August, 2023."]


class TestClosingLinesAndCatchUps:
    """Session notes LoCoMo summaries carry (how a conversation began or ended) are contact records;
    a goodbye or a catch-up that carries any other content stays a fact."""

    @pytest.mark.parametrize(
        "text",
        [
            "James and John catch up on recent events at 9:23 pm…",
            "James and John catch up on recent events at 9:23 pm on 21 January, 2022.",
            "The conversation ended with mutual goodbyes.",
            "The conversation ended with warm goodbyes and well-wishes.",
            "The conversation ended with a friendly farewell.",
            "They shared goodbyes, wishing each other a great day.",
            "They ended the conversation with well-wishes and a promise to catch up soon.",
        ],
    )
    def test_closing_lines_and_catch_ups_are_contact_records(self, text: str) -> None:
        """A closing line or a 'catch up on recent events' note is dropped as a contact record."""
        from dreamer.rollup.salience import chatter_reason, is_chatter

        assert chatter_reason(text) == "contact record" and is_chatter(text)

    @pytest.mark.parametrize(
        "ref",
        [
            ("30", "session_17_summary", 7),
            ("41", "session_22_summary", 6),
            ("42", "session_9_summary", 4),
            ("42", "session_23_summary", 11),
            ("42", "session_7_summary", 5),
        ],
    )
    def test_real_closing_lines_are_contact_records(self, ref: Any) -> None:
        """The closing lines of real LoCoMo session summaries are dropped as contact records."""
        from dreamer.rollup.salience import chatter_reason

        assert chatter_reason(sentence(ref)) == "contact record"

    @pytest.mark.parametrize(
        "text",
        [
            "Alice met Bob at a conference in 2019.",
            "John recently had to say goodbye to his dog, Max, who was part of the family for 10 years.",
            "The conversation ended with Nate expressing his love for turtles.",
            "Nate expressed interest in making his own cork board and they bid each other goodbye.",
            "Maria and John caught up on their recent community involvement at 8:06 pm.",
            "James and John attended a chess event in March.",
            "Tim offered tips for visiting and bid farewell.",
            "Alice chatted with Bob about the new job offer and said goodbye.",
        ],
    )
    def test_goodbyes_and_catch_ups_with_content_stay_facts(self, text: str) -> None:
        """A goodbye to a pet, a topic after 'ended with', an event attended: still a fact."""
        from dreamer.rollup.salience import chatter_reason

        assert chatter_reason(text) is None

    @pytest.mark.parametrize(
        "ref",
        [
            ("30", "session_19_summary", 5),
            ("41", "session_16_summary", 7),
            ("42", "session_25_summary", 6),
            ("41", "session_29_summary", 0),
            ("43", "session_12_summary", 7),
        ],
    )
    def test_real_endings_that_carry_a_fact_stay_facts(self, ref: Any) -> None:
        """Real summary sentences about an ending or a meeting that say something more are kept."""
        from dreamer.rollup.salience import chatter_reason

        assert chatter_reason(sentence(ref)) is None

    def test_filler_and_contact_records_give_their_reason(self) -> None:
        """The reason a run report counts: 'filler' for small talk, 'contact record' for a session note."""
        from dreamer.rollup.salience import chatter_reason

        assert chatter_reason("ok thanks, bye") == "filler"
        assert chatter_reason("Tim and John spoke at 10:29 am on 9 August, 2023.") == "contact record"
        assert chatter_reason("") == "filler"
        assert chatter_reason("Nate loves cats.") is None

    def test_a_huge_closing_line_is_a_contact_record_and_markup_keeps_a_unit(self) -> None:
        """A huge unit of repeated closing words is still a contact record; words of injected markup
        count as content, so such a unit goes to the summariser rather than being dropped."""
        from dreamer.rollup.salience import chatter_reason

        assert chatter_reason("The conversation ended with goodbyes. " * 2000) == "contact record"
        assert chatter_reason("The conversation ended with <script>alert(1)</script> goodbyes.") is None
