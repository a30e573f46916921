"""What a promoted card carries: its tags, metadata and document id upstream, and its ledger row.

Pure: a card and its verdict in, a :class:`~dreamer.backends.base.RetainItem` and a
:class:`~dreamer.state.LedgerCard` out. Provenance is the tags ``["rollup", "src:<profile>"]`` plus
string metadata (source bank and unit ids, run id, watermark range, version; ``related_to``, the
stored card a new card is near but could not reinforce). The ``scope:<value>``
tags of its source memories (``dreamer retain --scope``) go up with the card. A conflict adds
``supersedes`` (policy ``recency_wins``) or ``scope:<profile>`` (``keep_both``); a scoped card's
conflict is always kept both: a fact that holds within one scope does not overturn another.
What the tags mean: :mod:`dreamer.cardtags`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from dreamer import __version__
from dreamer.backends.base import RetainItem
from dreamer.cardtags import (
    CARD_MARK,
    RELATED_TO,
    ROLLUP_TAG,
    SCOPE_TAG_PREFIX,
    SUPERSEDES,
    scope_tags,
    source_tag,
)
from dreamer.config import ConflictPolicy
from dreamer.rollup.candidates import index_words, word_sizes
from dreamer.rollup.dedup import Verdict, VerdictKind
from dreamer.rollup.existing import stored_sketch
from dreamer.rollup.report import CardPlan
from dreamer.state import LedgerCard
from dreamer.text import normalize_text

__all__ = [
    "CARD_FACT_TYPES",
    "INPUT_FACT_TYPES",
    "RELATED_TO",
    "ROLLUP_TAG",
    "RunFacts",
    "ledger_row",
    "retain_item",
]

#: Raw facts are rolled up; Hindsight's own ``observation`` units are derived from them
#: (``source_memory_ids``), so taking both would count one fact twice.
INPUT_FACT_TYPES = ("world", "experience")
#: Dreamer's cards upstream are these fact types; Hindsight also derives ``observation`` units from
#: them (same tags, no document id) which must not stand in for the card in dedup matches.
CARD_FACT_TYPES = ("world", "experience")


@dataclass(frozen=True, slots=True)
class RunFacts:
    """What every card of one run records about where it came from."""

    profile: str
    bank_id: str
    upstream_id: str
    run_id: str
    watermark_from: str | None
    watermark_to: str | None
    conflict_policy: ConflictPolicy


def provenance_tags(profile: str) -> list[str]:
    return [ROLLUP_TAG, source_tag(profile)]


def retain_item(
    plan: CardPlan, verdict: Verdict, facts: RunFacts, timestamp: datetime, *, scopes: Sequence[str] = ()
) -> RetainItem:
    """The upstream memory for a card to promote (a new card, or a conflict under the policy).

    ``scopes`` are the ``scope:<value>`` tags of the card's source memories.
    """
    tags = provenance_tags(facts.profile)
    tags.extend(scope_tags(scopes))
    metadata = {
        "source_bank": facts.bank_id,
        "source_profile": facts.profile,
        "source_ids": json.dumps(list(plan.source_ids)),
        "run_id": facts.run_id,
        "watermark_from": facts.watermark_from or "",
        "watermark_to": facts.watermark_to or "",
        "kind": plan.kind,
        CARD_MARK: __version__,
    }
    if verdict.kind == VerdictKind.CONFLICT:
        if facts.conflict_policy == "recency_wins" and not scope_tags(tags):
            if verdict.matched_id:
                metadata[SUPERSEDES] = verdict.matched_id
                tags.append(SUPERSEDES)
        elif not scope_tags(tags):
            tags.append(SCOPE_TAG_PREFIX + facts.profile)
        metadata["conflict"] = ",".join(verdict.changed)
    elif verdict.matched_id:
        # Near a stored card that does not hold its words (`dedup`): promoted beside it, linked.
        metadata[RELATED_TO] = verdict.matched_id
    return RetainItem(
        content=plan.text,
        context=f"Dreamer roll-up of profile {facts.profile}",
        timestamp=timestamp,
        metadata=metadata,
        tags=tuple(tags),
        document_id=plan.document_id,
    )


def ledger_row(plan: CardPlan, item: RetainItem, facts: RunFacts, now: datetime) -> LedgerCard:
    """The local ledger's record of a promoted card, written in the run's one commit with the
    words the dedup will find it by."""
    sketch = stored_sketch(plan.text)  # with its sentences' sketches, when it has several
    return LedgerCard(
        document_id=plan.document_id,
        profile=facts.profile,
        upstream_bank=facts.upstream_id,
        text=plan.text,
        normalized=normalize_text(plan.text),
        kind=plan.kind,
        source_ids=plan.source_ids,
        profiles=(facts.profile,),
        promoted_at=now,
        last_seen_at=now,
        supersedes=item.metadata.get(SUPERSEDES),
        run_id=facts.run_id,
        sketch=sketch.dumps(),
        words=tuple(sorted(index_words(sketch))),
        word_sizes=word_sizes(sketch),
    )
