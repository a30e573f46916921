"""The one-line STATUS systemd shows for the daemon: jobs, what runs, the last and next run, reloads.

Pure: the daemon passes its plan, last runs and scheduler times; :func:`format_status` returns the
line it sends with ``STATUS=``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

from dreamer.jobs.spec import JobSpec
from dreamer.service.plan import KIND_NOUNS
from dreamer.service.runner import RunResult

# STATUS keeps the reason of a failed reload short so the rest of the line stays visible.
MAX_REASON_CHARS = 300


@dataclass(frozen=True, slots=True)
class ReloadRecord:
    """The last reload: when, whether the new configuration was taken, and why not if it was not.
    ``last_ok_at`` is when a configuration was last taken by a reload (this one, when it was)."""

    at: datetime
    ok: bool
    detail: str
    last_ok_at: datetime | None = None

    def after(self, previous: ReloadRecord | None) -> ReloadRecord:
        """This reload as the daemon keeps it: a failed one remembers the last one that worked."""
        if self.ok:
            return dataclasses.replace(self, last_ok_at=self.at)
        return dataclasses.replace(self, last_ok_at=previous.last_ok_at if previous is not None else None)


def format_time(ts: datetime, now: datetime) -> str:
    """``13:02Z`` for today (UTC), ``2025-01-31 13:02Z`` for another day."""
    ts = ts.astimezone(UTC)
    if ts.date() == now.astimezone(UTC).date():
        return ts.strftime("%H:%MZ")
    return ts.strftime("%Y-%m-%d %H:%MZ")


def count_jobs(plan: Mapping[str, JobSpec]) -> str:
    """``3 profiles``, or ``3 profiles, 2 agents`` once other kinds of jobs exist."""
    by_kind: dict[str, int] = {}
    for spec in plan.values():
        by_kind[spec.kind] = by_kind.get(spec.kind, 0) + 1
    by_kind.setdefault("rollup", 0)
    parts = []
    for kind in sorted(by_kind, key=lambda k: (k != "rollup", k)):
        n = by_kind[kind]
        singular, plural = KIND_NOUNS.get(kind, (f"{kind} job", f"{kind} jobs"))
        parts.append(f"{n} {singular if n == 1 else plural}")
    return ", ".join(parts)


def format_status(
    *,
    plan: Mapping[str, JobSpec],
    last_runs: Mapping[str, RunResult],
    running: Iterable[str],
    next_runs: Mapping[str, datetime | None],
    last_reload: ReloadRecord | None,
    now: datetime,
    stopping: bool = False,
) -> str:
    """The one-line STATUS systemd shows, e.g.
    ``3 profiles; last: research promoted 12:00Z; next: homelab 13:02Z``.

    After a reload it ends with ``last reload 12:03Z``. After a failed one it starts with
    ``reload failed 12:05Z: <reason>`` until a reload succeeds, and ends with the time of the last
    reload that worked, if one did (never the failed one's: that would read as taken).
    """

    def label(job_id: str) -> str:
        spec = plan.get(job_id)
        return spec.label if spec is not None else job_id

    parts: list[str] = []
    if stopping:
        parts.append("stopping")
    if last_reload is not None and not last_reload.ok:
        reason = last_reload.detail
        if len(reason) > MAX_REASON_CHARS:
            reason = reason[: MAX_REASON_CHARS - 3] + "..."
        parts.append(f"reload failed {format_time(last_reload.at, now)}: {reason}")
    parts.append(count_jobs(plan))
    running_labels = sorted(label(j) for j in running)
    if running_labels:
        parts.append("running: " + ", ".join(running_labels))
    if last_runs:
        for jid, run in sorted(last_runs.items()):
            in_a_row = run.outcome.counts.get("deferred_in_a_row", 0)
            if in_a_row:
                parts.append(f"{label(jid)} deferred {in_a_row}x in a row")
        last = max(last_runs.values(), key=lambda r: r.finished_at)
        parts.append(
            f"last: {label(last.job_id)} {last.outcome.outcome} {format_time(last.finished_at, now)}"
        )
    upcoming = [(t, j) for j, t in next_runs.items() if t is not None and j in plan]
    if upcoming and not stopping:
        when, jid = min(upcoming)
        parts.append(f"next: {label(jid)} {format_time(when, now)}")
    elif not plan:
        parts.append("nothing scheduled")
    if last_reload is not None and last_reload.last_ok_at is not None:
        parts.append(f"last reload {format_time(last_reload.last_ok_at, now)}")
    return "; ".join(parts)
