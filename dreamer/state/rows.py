"""How the state file's ledger rows read back: the columns of a card and its decoding, and the
chunking of long id lists into statements SQLite accepts."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import Any

from dreamer.state.records import LedgerCard, parse_time

CARD_COLUMNS = (
    "document_id, profile, upstream_bank, text, normalized, kind, source_ids, profiles, "
    "reinforcements, promoted_at, last_seen_at, supersedes, run_id, sketch"
)
# SQLite's default limit on one statement's parameters is 32766; stay far below it.
CHUNK = 500


def card_from_row(r: Sequence[Any]) -> LedgerCard:
    return LedgerCard(
        document_id=r[0],
        profile=r[1],
        upstream_bank=r[2],
        text=r[3],
        normalized=r[4],
        kind=r[5],
        source_ids=tuple(json.loads(r[6])),
        profiles=tuple(json.loads(r[7])),
        reinforcements=r[8],
        promoted_at=parse_time(r[9]) or datetime.min,
        last_seen_at=parse_time(r[10]) or datetime.min,
        supersedes=r[11],
        run_id=r[12],
        sketch=r[13],
    )


def chunks(values: Sequence[str]) -> Iterator[list[str]]:
    for start in range(0, len(values), CHUNK):
        yield list(values[start : start + CHUNK])


def marks(values: Sequence[object]) -> str:
    return ", ".join("?" * len(values))
