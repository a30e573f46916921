"""The LoCoMo benchmark's parsing of the dataset: session times, dialogue ids, sentences, questions."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from bench._common import BenchError
from bench.locomo.data import (
    dia_ids,
    evidence_sessions,
    load_conversations,
    parse_conversation,
    parse_session_time,
    split_sentences,
)
from tests.support.locomo_conversation import fixture_conversation


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
