"""A LoCoMo-shaped conversation written for the benchmark's tests (no dataset text)."""

from __future__ import annotations

from typing import Any


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
