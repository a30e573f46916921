"""The dedup judge's values in and out: the cards it reads, the candidates it is handed, the verdicts
it gives.

Pure values, apart from the judge (`dreamer.rollup.dedup`), so that what only carries a verdict
(promotion, the run's report, the state file) does not depend on how one is reached.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum

from dreamer.rollup.similarity import Sketch

__all__ = ["CardText", "SemanticSimilarity", "UpstreamCandidate", "Verdict", "VerdictKind"]


#: The cosine similarity of two texts by the embedder Dreamer decides with: `(new card's text,
#: existing card's text) -> cosine`, or None when one of the texts has no vector (that pair is
#: then judged as without an embedder). Called for each card and each card it is compared with, so
#: a caller that embeds keeps the vectors (one per text) rather than embedding in the call.
SemanticSimilarity = Callable[[str, str], float | None]


@dataclass(frozen=True, slots=True)
class CardText:
    """A card by id and text: one of the batch being judged, or one already promoted (the ledger)."""

    card_id: str
    text: str
    #: The card's stored sketch, if the caller has one (ledger cards); computed from `text` if None.
    sketch: Sketch | None = None


@dataclass(frozen=True, slots=True)
class UpstreamCandidate:
    """One result of a recall on the upstream bank for a card, with the backend's semantic score if any."""

    card_id: str
    text: str
    semantic_score: float | None = None


class VerdictKind(StrEnum):
    """What to do with a card: promote it (`new`, `conflict`) or skip it (`duplicate`)."""

    NEW = "new"
    DUPLICATE = "duplicate"
    CONFLICT = "conflict"


@dataclass(frozen=True, slots=True)
class Verdict:
    """The decision on one card, with a reason fit for a log line.

    `matched_id` is the existing card a duplicate repeats or a conflict supersedes; `changed` lists
    the protected details that differ from it.
    """

    kind: VerdictKind
    reason: str
    matched_id: str | None = None
    scores: dict[str, float] = field(default_factory=dict, hash=False)
    changed: tuple[str, ...] = ()
