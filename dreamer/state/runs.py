"""The run records of the state file: each run's start, end, outcome and counts, and their sums."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from dreamer.state.base import StoreBase
from dreamer.state.records import RunRecord, RunTotal, iso, parse_time
from dreamer.state.schema import state_errors

__all__ = ["END_RUN", "SUMMED_COUNTS", "RunRecords"]

END_RUN = "UPDATE runs SET finished_at = ?, outcome = ?, detail = ?, counts = ? WHERE run_id = ?"

#: Run counts the operator metrics add up per job and outcome, beside promoted and reinforced.
SUMMED_COUNTS = ("llm_tokens", "cards_accepted", "cards_rejected", "units_recarded")


class RunRecords(StoreBase):
    """The run-record part of :class:`~dreamer.state.StateStore`."""

    @state_errors
    def record_run_start(self, run_id: str, job_id: str, started_at: datetime) -> None:
        self._conn.execute(
            "INSERT INTO runs (run_id, job_id, started_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
            (run_id, job_id, iso(started_at)),
        )

    @state_errors
    def record_run_end(
        self,
        run_id: str,
        outcome: str,
        detail: str,
        counts: Mapping[str, int],
        finished_at: datetime,
    ) -> None:
        self._conn.execute(
            END_RUN,
            (iso(finished_at), outcome, detail, json.dumps(dict(counts)), run_id),
        )

    @state_errors
    def runs(self, job_id: str | None = None, limit: int = 50) -> list[RunRecord]:
        """Most recent first."""
        sql = "SELECT run_id, job_id, started_at, finished_at, outcome, detail, counts FROM runs"
        args: tuple[Any, ...] = ()
        if job_id is not None:
            sql += " WHERE job_id = ?"
            args = (job_id,)
        sql += f" ORDER BY started_at DESC, {self.dialect.insertion_order} DESC LIMIT ?"
        rows = self._conn.execute(sql, (*args, limit)).fetchall()
        return [
            RunRecord(
                r[0], r[1], parse_time(r[2]) or datetime.min, parse_time(r[3]), r[4], r[5], json.loads(r[6])
            )
            for r in rows
        ]

    @state_errors
    def llm_tokens_since(self, since: datetime, *, except_run: str | None = None) -> int:
        """The LLM tokens (``counts.llm_tokens``) of the runs finished since ``since``, but one."""
        tokens = self.dialect.json_number.format(column="counts", key="llm_tokens")
        row = self._conn.execute(
            f"SELECT COALESCE(SUM({tokens}), 0) FROM runs "
            f"WHERE finished_at >= ? AND run_id {self.dialect.is_not} ?",
            (iso(since), except_run),
        ).fetchone()
        return int(row[0])

    @state_errors
    def consecutive(self, job_id: str, outcome: str) -> int:
        """How many of the job's most recent finished runs in a row ended with ``outcome``."""
        n = 0
        for run in self.runs(job_id, limit=1000):
            if run.outcome is None:
                continue
            if run.outcome != outcome:
                break
            n += 1
        return n

    @state_errors
    def run_totals(self) -> list[RunTotal]:
        """Per job and outcome: how many runs ended so, their promoted and reinforced counts added
        up, and when the last of them finished (for the operator metrics)."""
        def total(key: str) -> str:
            return f"COALESCE(SUM({self.dialect.json_number.format(column='counts', key=key)}), 0)"

        sums = ", ".join(total(k) for k in SUMMED_COUNTS)
        rows = self._conn.execute(
            f"SELECT job_id, outcome, COUNT(*), {total('promoted')}, "
            f"{total('reinforced')}, MAX(finished_at), {sums} "
            "FROM runs WHERE outcome IS NOT NULL GROUP BY job_id, outcome ORDER BY job_id, outcome"
        ).fetchall()
        return [
            RunTotal(
                r[0],
                r[1],
                r[2],
                int(r[3]),
                int(r[4]),
                parse_time(r[5]),
                dict(zip(SUMMED_COUNTS, map(int, r[6:]), strict=True)),
            )
            for r in rows
        ]
