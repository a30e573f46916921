"""The LoCoMo conversations as the benchmark reads them: sessions, their units of memory, questions.

Each session with dialogue becomes its observations (with their dialogue ids), the sentences of its
summary and its events; a question keeps its evidence (dialogue ids) and its category.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench._common import BenchError

#: "1:56 pm on 8 May, 2023"
_SESSION_TIME = re.compile(
    r"^\s*(?P<hour>\d{1,2}):(?P<minute>\d{2})\s*(?P<ampm>am|pm)\s+on\s+(?P<day>\d{1,2})\s+"
    r"(?P<month>[A-Za-z]+),?\s+(?P<year>\d{4})\s*$",
    re.IGNORECASE,
)
_MONTHS = {
    name: number
    for number, name in enumerate(
        (
            "january", "february", "march", "april", "may", "june",
            "july", "august", "september", "october", "november", "december",
        ),
        start=1,
    )
}  # fmt: skip
_SESSION_KEY = re.compile(r"^session_(\d+)$")
# A sentence ends at ".", "!" or "?" (and a closing quote right after it) followed by whitespace and
# a capital letter or an opening quote; a "." after a lone capital ("J.K. Rowling") is an initial.
_SENTENCE_END = re.compile(r"(?<!\b[A-Z])[.!?][\"'\u201d\u2019]?(?=\s+[\"'\u201c\u2018]?[A-Z])")
_DIA_ID = re.compile(r"^D:?(\d+):(\d+)$")

#: The category of adversarial questions (no answer in the conversation).
ADVERSARIAL = 5
UNIT_KINDS = ("observation", "summary", "event")


class LocomoDataError(BenchError):
    """A conversation file is not shaped like LoCoMo data; the message names the file and the key."""


def parse_session_time(text: str) -> datetime:
    """A session's ``date_time`` ("1:56 pm on 8 May, 2023") as an aware UTC datetime."""
    match = _SESSION_TIME.match(text)
    if match is None:
        raise ValueError(f"not a LoCoMo session time (like '1:56 pm on 8 May, 2023'): {text!r}")
    month = _MONTHS.get(match["month"].casefold())
    if month is None:
        raise ValueError(f"unknown month {match['month']!r} in {text!r}")
    hour = int(match["hour"]) % 12 + (12 if match["ampm"].casefold() == "pm" else 0)
    return datetime(int(match["year"]), month, int(match["day"]), hour, int(match["minute"]), tzinfo=UTC)


def split_sentences(paragraph: str) -> list[str]:
    """A summary cut into sentences (deterministic, context-free)."""
    sentences: list[str] = []
    start = 0
    for end in _SENTENCE_END.finditer(paragraph):
        sentences.append(paragraph[start : end.end()].strip())
        start = end.end()
    rest = paragraph[start:].strip()
    if rest:
        sentences.append(rest)
    return [s for s in sentences if s]


def dia_ids(value: object) -> tuple[str, ...]:
    """Dialogue ids from a LoCoMo evidence field: "D1:3", ["D1:3", "D1:5"], "D8:6; D9:17", "D:11:26".

    Malformed ids (a bare "D") are dropped; the rest are written canonically ("D11:26").
    """
    raw: list[str] = []
    if isinstance(value, str):
        raw = [value]
    elif isinstance(value, list | tuple):
        raw = [v for v in value if isinstance(v, str)]
    found: list[str] = []
    for item in raw:
        for part in re.split(r"[;,\s]+", item):
            match = _DIA_ID.match(part.strip())
            if match:
                found.append(f"D{int(match[1])}:{int(match[2])}")
    return tuple(dict.fromkeys(found))


@dataclass(frozen=True, slots=True)
class SessionUnit:
    """One memory of a session: its text, what kind of memory it is and its dialogue ids."""

    text: str
    kind: str
    dia_ids: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Session:
    number: int
    time: datetime
    units: tuple[SessionUnit, ...]


#: Categories whose answer is a short span of the conversation (1: multi-hop, 4: single-hop), the
#: questions answer-bearing hit@5 is measured on.
ANSWER_BEARING = (1, 4)


@dataclass(frozen=True, slots=True)
class Question:
    question: str
    evidence: tuple[str, ...]
    category: int
    answer: str = ""

    @property
    def adversarial(self) -> bool:
        return self.category == ADVERSARIAL


@dataclass(frozen=True, slots=True)
class Conversation:
    id: str
    sessions: tuple[Session, ...]
    questions: tuple[Question, ...]

    @property
    def profile(self) -> str:
        """The profile alias of this conversation ("c26")."""
        return "c" + re.sub(r"[^a-z0-9]", "", self.id.casefold())


def session_units(data: Mapping[str, Any], number: int) -> tuple[SessionUnit, ...]:
    """The memories of session ``number``: observations, then summary sentences, then events."""
    units: list[SessionUnit] = []
    observations = data.get(f"session_{number}_observation") or {}
    if isinstance(observations, Mapping):
        for facts in observations.values():
            for fact in facts if isinstance(facts, list) else []:
                if isinstance(fact, list) and fact and isinstance(fact[0], str) and fact[0].strip():
                    units.append(
                        SessionUnit(fact[0].strip(), "observation", dia_ids(fact[1] if len(fact) > 1 else []))
                    )
    summary = data.get(f"session_{number}_summary")
    if isinstance(summary, str):
        units.extend(SessionUnit(s, "summary") for s in split_sentences(summary))
    events = data.get(f"events_session_{number}") or {}
    if isinstance(events, Mapping):
        for speaker, items in events.items():
            if speaker == "date" or not isinstance(items, list):
                continue
            units.extend(SessionUnit(e.strip(), "event") for e in items if isinstance(e, str) and e.strip())
    return tuple(units)


def parse_conversation(conversation_id: str, data: Mapping[str, Any]) -> Conversation:
    """A conversation from its parsed JSON; sessions without dialogue (a date only) are skipped."""
    numbers = sorted(
        int(m[1])
        for key in data
        if (m := _SESSION_KEY.match(key)) and isinstance(data[key], list) and data[key]
    )
    sessions: list[Session] = []
    for number in numbers:
        stamp = data.get(f"session_{number}_date_time")
        if not isinstance(stamp, str):
            raise LocomoDataError(
                f"conversation {conversation_id}: session_{number} has no session_{number}_date_time"
            )
        try:
            when = parse_session_time(stamp)
        except ValueError as exc:
            raise LocomoDataError(
                f"conversation {conversation_id}: session_{number}_date_time: {exc}"
            ) from None
        sessions.append(Session(number, when, session_units(data, number)))
    questions = tuple(
        Question(
            str(q.get("question", "")),
            dia_ids(q.get("evidence", [])),
            int(q.get("category", 0)),
            str(q.get("answer", "")),
        )
        for q in data.get("qa", [])
        if isinstance(q, Mapping)
    )
    return Conversation(conversation_id, tuple(sessions), questions)


def load_conversations(directory: Path, limit: int | None = None) -> list[Conversation]:
    """Every ``<id>.json`` of ``directory`` (sorted by id), at most ``limit`` of them."""
    if not directory.is_dir():
        raise BenchError(
            f"no LoCoMo directory at {directory}; pass --data DIR (the folder holding <id>.json)"
        )
    files = sorted(directory.glob("*.json"), key=lambda p: (len(p.stem), p.stem))
    if not files:
        raise BenchError(f"{directory} holds no <id>.json conversation file")
    conversations = []
    for path in files[:limit]:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise LocomoDataError(f"{path}: cannot read it as JSON ({exc})") from None
        if not isinstance(data, Mapping):
            raise LocomoDataError(f"{path}: expected a JSON object")
        conversations.append(parse_conversation(path.stem, data))
    return conversations


def evidence_sessions(evidence: Iterable[str]) -> set[int]:
    """The session numbers of dialogue ids ("D3:12" is in session 3)."""
    return {int(m[1]) for d in evidence if (m := _DIA_ID.match(d))}
