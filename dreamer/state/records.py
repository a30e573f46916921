"""What the state file holds, as plain values: watermarks, ledger cards, reinforcements, run records."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Literal

#: Where a peer card's reading stopped in its scope's rank order: the last rank row read.
RankPosition = tuple[int, int, int, float, str]


def iso(ts: datetime | None) -> str | None:
    if ts is None:
        return None
    if ts.tzinfo is None:
        ts = ts.replace(tzinfo=UTC)
    return ts.astimezone(UTC).isoformat(timespec="microseconds")


def parse_time(text: str | None) -> datetime | None:
    return None if text is None else datetime.fromisoformat(text)


@dataclass(frozen=True, slots=True)
class Watermark:
    """How far a profile's bank has been rolled up. ``created_at=None`` means never.

    ``seen`` holds the ids (with their times) of the units rolled up within ``overlap`` of the
    newest one. The next run reads from ``created_at - overlap`` and skips those ids, so a unit
    that shares the boundary instant, or that a slow writer committed with a slightly older
    timestamp, is neither skipped nor repeated.
    """

    created_at: datetime | None = None
    seen: Mapping[str, datetime] = field(default_factory=dict)
    unit_count: int = 0
    last_write_at: datetime | None = None
    rolled_at: datetime | None = None

    def read_from(self, overlap: timedelta) -> datetime | None:
        """Where the next listing starts."""
        return None if self.created_at is None else self.created_at - overlap

    def is_new(self, created_at: datetime, unit_id: str, overlap: timedelta = timedelta(0)) -> bool:
        """True when a unit lies after this watermark (or inside its overlap, unseen)."""
        if self.created_at is None or created_at > self.created_at:
            return True
        return created_at >= self.created_at - overlap and unit_id not in self.seen

    def advanced_to(
        self, units: Iterable[tuple[datetime, str]], overlap: timedelta = timedelta(0)
    ) -> Watermark:
        """The watermark after rolling up ``units`` (pairs of created_at and id)."""
        seen = dict(self.seen)
        newest = self.created_at
        for created_at, unit_id in units:
            seen[unit_id] = created_at
            if newest is None or created_at > newest:
                newest = created_at
        if newest is not None:
            seen = {i: t for i, t in seen.items() if t >= newest - overlap}
        return Watermark(newest, seen, self.unit_count, self.last_write_at, self.rolled_at)

    @property
    def boundary_ids(self) -> frozenset[str]:
        return frozenset(self.seen)


@dataclass(frozen=True, slots=True)
class StoredVector:
    """A card's embedding as stored: float16 bytes, and the model and length that made it."""

    model_id: str
    dimension: int
    blob: bytes


@dataclass(frozen=True, slots=True)
class VectorRow:
    """A stored vector as a reader of one bank and one model gets it back, in ``seq`` order."""

    seq: int
    document_id: str
    text: str
    blob: bytes


@dataclass(frozen=True, slots=True)
class LedgerCard:
    """A card Dreamer promoted upstream, and how often it was seen again since."""

    document_id: str
    profile: str
    upstream_bank: str
    text: str
    normalized: str
    kind: str = "fact"
    source_ids: tuple[str, ...] = ()
    profiles: tuple[str, ...] = ()
    reinforcements: int = 0
    promoted_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    last_seen_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    supersedes: str | None = None
    run_id: str = ""
    #: The dedup sketch of `text` (`dreamer.rollup.similarity.Sketch.dumps`), kept so later runs can rule
    #: this card out cheaply; None for rows written before sketches existed.
    sketch: str | None = None
    #: The words the dedup finds this card by (:func:`dreamer.rollup.candidates.index_words`),
    #: written to the word index with the card; empty when read back or not indexed.
    words: tuple[str, ...] = ()
    #: How many content and residual words the card has (its Jaccard denominators' part).
    word_sizes: tuple[int, int] = (0, 0)
    #: The card's embedding, written with its row when an embedder is configured; None when read back.
    vector: StoredVector | None = None

    @property
    def told(self) -> Told | None:
        """How often and over what time the card's fact was found: None for a card found once."""
        if self.reinforcements <= 0:
            return None
        return Told(self.reinforcements + 1, self.promoted_at, self.last_seen_at)


@dataclass(frozen=True, slots=True)
class Told:
    """A fact found by more than one roll-up: how many found it (the one that promoted its card,
    and each that reinforced it with sources it did not have), the first and the last."""

    times: int
    first: datetime
    last: datetime

    def render(self) -> str:
        """``seen 8 times, 2023-03-02 to 2023-10-19`` (one date when all fell on one day)."""
        first, last = _day(self.first), _day(self.last)
        return f"seen {self.times} times, {first}" + ("" if last == first else f" to {last}")

    def short(self) -> str:
        """``seen 8×, 2023-03 to 2023-10``: the months, for a line with little room."""
        first, last = _day(self.first)[:7], _day(self.last)[:7]
        return f"seen {self.times}×, {first}" + ("" if last == first else f" to {last}")

    def to_json(self) -> dict[str, object]:
        return {"times": self.times, "first": iso(self.first), "last": iso(self.last), "text": self.render()}


def _day(moment: datetime) -> str:
    return moment.date().isoformat()


@dataclass(frozen=True, slots=True)
class Reinforcement:
    """A duplicate seen again: one more count and the new sources merged into the card's provenance."""

    document_id: str
    source_ids: tuple[str, ...]
    profile: str


@dataclass(frozen=True, slots=True)
class RunRecord:
    run_id: str
    job_id: str
    started_at: datetime
    finished_at: datetime | None
    outcome: str | None
    detail: str
    counts: Mapping[str, int]


@dataclass(frozen=True, slots=True)
class RunTotal:
    """The runs of one job that ended with one outcome."""

    job_id: str
    outcome: str
    runs: int
    promoted: int
    reinforced: int
    last_finished_at: datetime | None
    #: The sums of the other counts the metrics show (`dreamer.state.runs.SUMMED_COUNTS`).
    sums: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class WordScan:
    """One range of the ledger's word index to read: the cards holding ``word`` whose content
    (``side`` "content") or residual (``side`` "residual") word set has ``shortest`` to ``longest``
    words."""

    word: str
    side: Literal["content", "residual"]
    shortest: int
    longest: int


@dataclass(frozen=True, slots=True)
class CandidateCard:
    """A ledger card as the dedup reads it: id, text and stored sketch (None when missing)."""

    document_id: str
    text: str
    sketch: str | None


@dataclass(frozen=True, slots=True)
class Decision:
    """One decision a run made about one unit (or, with ``unit_id`` None, about a card), as the run
    made it: what became of it (``verdict``: "new", "duplicate", "conflict", "chatter",
    "left_out"), the card it went into or was folded into (``document_id``; for a duplicate the
    card it matched, ``matched_id``), the rule that decided (``reason``) and its scores."""

    run_id: str
    profile: str
    unit_id: str | None
    verdict: str
    reason: str
    document_id: str | None = None
    matched_id: str | None = None
    scores: Mapping[str, float] = field(default_factory=dict)
    decided_at: datetime | None = None
