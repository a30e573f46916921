"""The decisions part of :class:`~dreamer.state.StateStore`: what each run decided about each unit it
judged, written by the roll-up's commit in the same transaction as the cards it decided, and read by
``dreamer explain`` by unit and by card.

One row per unit per run that judged it, and one per card a run drafted that no unit row names
(none today: every card cites its units). The rows only grow with the units a profile writes, never
with reads: a unit judged once is one row, however often its card is reinforced later.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from dreamer.state.base import StoreBase
from dreamer.state.records import Decision, iso, parse_time
from dreamer.state.schema import state_errors

__all__ = ["Decisions"]

_COLUMNS = "run_id, profile, unit_id, verdict, reason, document_id, matched_id, scores, decided_at"


def _decision(row: Sequence[object]) -> Decision:
    scores = json.loads(str(row[7]))
    if not isinstance(scores, dict):
        raise ValueError(f"decision scores are not an object: {row[7]!r}")
    return Decision(
        run_id=str(row[0]),
        profile=str(row[1]),
        unit_id=None if row[2] is None else str(row[2]),
        verdict=str(row[3]),
        reason=str(row[4]),
        document_id=None if row[5] is None else str(row[5]),
        matched_id=None if row[6] is None else str(row[6]),
        scores={str(k): float(v) for k, v in scores.items()},
        decided_at=parse_time(str(row[8])),
    )


class Decisions(StoreBase):
    """The decision trail: written by a commit, read by unit or by card, oldest first."""

    def _record_decisions(self, decisions: Sequence[Decision]) -> None:
        """Write a batch's decisions, inside the commit's transaction (never on their own: a
        decision is kept only with the cards and the watermark it decided)."""
        self._conn.executemany(
            f"INSERT INTO decisions ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                (
                    d.run_id,
                    d.profile,
                    d.unit_id,
                    d.verdict,
                    d.reason,
                    d.document_id,
                    d.matched_id,
                    json.dumps(dict(d.scores), sort_keys=True),
                    iso(d.decided_at),
                )
                for d in decisions
            ],
        )

    @state_errors
    def unit_decisions(self, unit_id: str) -> list[Decision]:
        """Every decision about one unit, oldest first."""
        sql = f"SELECT {_COLUMNS} FROM decisions WHERE unit_id = ? ORDER BY seq"
        return [_decision(r) for r in self._conn.execute(sql, (unit_id,))]

    @state_errors
    def card_decisions(self, document_id: str) -> list[Decision]:
        """Every decision that put a unit into a card or folded one into it, oldest first."""
        sql = (
            f"SELECT {_COLUMNS} FROM decisions WHERE document_id = ? "
            f"UNION SELECT {_COLUMNS} FROM decisions WHERE matched_id = ?"
        )
        rows = self._conn.execute(
            f"SELECT * FROM ({sql}) AS d ORDER BY decided_at, unit_id", (document_id, document_id)
        ).fetchall()
        return [_decision(r) for r in rows]

    @state_errors
    def decision_count(self) -> int:
        """How many decisions the trail holds (its size in ``status``)."""
        return int(self._conn.execute("SELECT COUNT(*) FROM decisions").fetchone()[0])
