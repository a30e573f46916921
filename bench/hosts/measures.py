"""What the log of runs says: the spread, the safety of the leases, how long a host's profiles wait.

Every function reads the runs (:class:`~bench.hosts.host.Run`: profile, host, owner, tokens,
cycle, when) and the cycles' statistics; none of them touches a database.
"""

from __future__ import annotations

import itertools
import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from bench.hosts.host import CycleStats, Run

__all__ = [
    "lease_safety",
    "outcomes",
    "recovery",
    "round_trips",
    "same_cycle_duplicates",
    "spread",
    "unrun",
]


def spread(runs: Iterable[Run], hosts: Sequence[str], profiles: int) -> dict[str, Any]:
    """Profiles run per host in one cycle: min, max and max ÷ the ideal share (profiles ÷ hosts)."""
    per_host = Counter({h: 0 for h in hosts})
    per_host.update(r.host for r in runs)
    ideal = profiles / len(hosts) if hosts else 0.0
    most = max(per_host.values(), default=0)
    return {
        "per_host": dict(sorted(per_host.items())),
        "min": min(per_host.values(), default=0),
        "max": most,
        "ideal": ideal,
        "max_over_ideal": most / ideal if ideal else None,
    }


def _held(r: Run, key: str) -> tuple[str, float, int]:
    """What a run held under ``key`` ("profile" or "bank"): the lease, since when, its token."""
    return (r.profile, r.start, r.token) if key == "profile" else (r.bank, r.bank_at, r.bank_token)


def _check(runs: Sequence[Run], key: str) -> tuple[int, int]:
    """Overlapping holds by different owners, and tokens that did not go up on a takeover (or went
    down), over the runs of each lease in the order they took it."""
    by: dict[str, list[Run]] = defaultdict(list)
    for r in runs:
        by[_held(r, key)[0]].append(r)
    overlapping = not_increasing = 0
    for group in by.values():
        group.sort(key=lambda r: _held(r, key)[1])
        latest: Run | None = None  # the run, so far, whose hold ends last
        for before, after in itertools.pairwise(group):
            latest = before if latest is None or before.end > latest.end else latest
            if _held(after, key)[1] < latest.end and after.owner != latest.owner:
                overlapping += 1
            token_before, token_after = _held(before, key)[2], _held(after, key)[2]
            if token_after < token_before or (after.owner != before.owner and token_after == token_before):
                not_increasing += 1
    return overlapping, not_increasing


def lease_safety(runs: Sequence[Run]) -> dict[str, int]:
    """The leases' promises, checked on the log.

    - ``overlapping``: a run of a profile that took its lease while another host's run of it still
      held it;
    - ``bank_overlapping``: the same for an upstream bank's lease (one promoter per bank);
    - ``token_not_increasing``: a profile's run by another owner than the run before it whose
      token is not higher (a takeover must raise it), or any later run with a lower one;
    - ``bank_token_not_increasing``: the same for the upstream banks' tokens.
    """
    overlapping, not_increasing = _check(runs, "profile")
    bank_overlapping, bank_not_increasing = _check(runs, "bank")
    return {
        "overlapping": overlapping,
        "bank_overlapping": bank_overlapping,
        "token_not_increasing": not_increasing,
        "bank_token_not_increasing": bank_not_increasing,
    }


def same_cycle_duplicates(runs: Iterable[Run], cycles: Iterable[int]) -> dict[int, int]:
    """Per cycle, the profiles run by more than one host in it."""
    owners: dict[tuple[int, str], set[str]] = defaultdict(set)
    for r in runs:
        owners[(r.cycle, r.profile)].add(r.owner)
    out = {k: 0 for k in cycles}
    for (k, _), who in owners.items():
        if len(who) > 1:
            out[k] = out.get(k, 0) + 1
    return out


def unrun(runs: Iterable[Run], profiles: Iterable[str], cycle: int) -> int:
    """How many of ``profiles`` no host ran in ``cycle``."""
    ran = {r.profile for r in runs if r.cycle == cycle}
    return sum(1 for p in profiles if p not in ran)


def recovery(
    runs: Iterable[Run],
    share: Iterable[str],
    *,
    by: str | None,
    not_by: str | None,
    since: float,
    since_cycle: int,
    ttl_s: float,
) -> dict[str, Any]:
    """How long ``share`` (the profiles a host ran) waited after ``since`` to be run again: by the
    owner ``by`` (a host that joined), or by any owner but ``not_by`` (one that stopped). Seconds
    to the first and to the last profile's run (its end), the last in lease times too, and in how
    many cycles after ``since_cycle`` (0: the same cycle)."""
    wanted = set(share)
    first: dict[str, Run] = {}
    for r in sorted(runs, key=lambda r: r.end):
        if r.profile not in wanted or r.profile in first or r.start < since:
            continue
        if (by is not None and r.owner != by) or (not_by is not None and r.owner == not_by):
            continue
        first[r.profile] = r
    done = [r.end - since for r in first.values()]
    last = max(first.values(), key=lambda r: r.end, default=None)
    complete = len(first) == len(wanted) and last is not None
    all_s = last.end - since if complete and last is not None else None
    return {
        "profiles": len(wanted),
        "covered": len(first),
        "first_s": min(done, default=None),
        "median_s": statistics.median(done) if done else None,
        "all_s": all_s,
        "all_ttl": all_s / ttl_s if all_s is not None else None,
        "cycles": last.cycle - since_cycle if complete and last is not None else None,
    }


def round_trips(stats: Sequence[CycleStats]) -> dict[str, Any]:
    """Statements sent in these host-cycles: per host per cycle (runs and heartbeats), per run (the
    run's own statements, busy attempts included, over the runs that committed) by kind, and the
    seconds spent in the schema lock (PostgreSQL's advisory lock, SQLite's ``BEGIN IMMEDIATE``)."""
    runs = sum(s.ran for s in stats)
    by_kind: Counter[str] = Counter()
    beat: Counter[str] = Counter()
    for s in stats:
        by_kind.update(s.statements.get("run", {}))
        beat.update(s.statements.get("beat", {}))
    n = len(stats) or 1
    lock_s = sum(
        v for s in stats for k, v in s.statement_s.items()
        if k.endswith(("SELECT pg_advisory_xact_lock", "BEGIN")) and k.startswith("run")
    )
    return {
        "host_cycles": len(stats),
        "runs": runs,
        "per_host_per_cycle": (sum(by_kind.values()) + sum(beat.values())) / n,
        "run_per_host_per_cycle": sum(by_kind.values()) / n,
        "beat_per_host_per_cycle": sum(beat.values()) / n,
        "per_run": sum(by_kind.values()) / runs if runs else None,
        "per_run_by_kind": {k: v / runs for k, v in sorted(by_kind.items())} if runs else {},
        "beat_by_kind_per_host_per_cycle": {k: v / n for k, v in sorted(beat.items())},
        "lock_wait_s_per_host_per_cycle": lock_s / n,
    }


def outcomes(stats: Iterable[CycleStats]) -> Mapping[str, int]:
    """The runs and the skips of these host-cycles, summed."""
    total: Counter[str] = Counter()
    for s in stats:
        total.update(
            ran=s.ran, busy_profile=s.busy_profile, busy_upstream=s.busy_upstream,
            lease_lost=s.lease_lost, watermark_moved=s.watermark_moved,
        )
    return dict(total)
