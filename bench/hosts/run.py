"""The simulation's phases, in order, and the result they make.

1. **Join**: every host starts (first heartbeat, then its heartbeat thread); measured from when the
   last one starts until every host's view of the live hosts is the same.
2. **Steady**: ``cycles`` cycles over every profile. The spread is the first one's; the round trips
   are over all of them.
3. **One global upstream bank**: a second set of profiles whose runs hold their leases for a
   while (``work_s``, standing for the LLM calls), one cycle with them spread over as many upstream
   banks as the main phases have, then one cycle with all of them promoting into one bank, so that every
   run needs the same upstream lease.
4. **Dead host**: host 0 stops mid-cycle without ``leave``: it takes its next run's two leases and
   stops beating. Then cycles until every profile it ran in the last steady cycle has been run by
   a live host.
5. **Join**: a new host 0 (a new seat) joins mid-cycle; cycles until it has run every profile the
   rendezvous now gives it.
6. **Clean stop**: host 1 stops mid-cycle with ``leave``; cycles until its profiles are run again.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any

from bench.hosts.cluster import Cluster
from bench.hosts.host import CycleStats, Run, SimHost
from bench.hosts.measures import (
    lease_safety,
    outcomes,
    recovery,
    round_trips,
    same_cycle_duplicates,
    spread,
    unrun,
)
from dreamer.jobs.leases import preferred_host
from dreamer.state import StateStore

__all__ = ["GLOBAL_BANK", "bank_for", "profile_names", "simulate"]

GLOBAL_BANK = "global"


def profile_names(n: int, prefix: str = "p") -> list[str]:
    return [f"{prefix}{i:05d}" for i in range(n)]


def bank_for(per_bank: int) -> Callable[[str], str]:
    """The upstream bank of a profile: one per ``per_bank`` profiles in order, or one global bank
    (``per_bank`` 0)."""
    if per_bank <= 0:
        return lambda profile: GLOBAL_BANK
    return lambda profile: f"up{int(profile[1:]) // per_bank:04d}"


def banks_round_robin(banks: int) -> Callable[[str], str]:
    """The upstream bank of a profile among ``banks`` of them, in turn."""
    return lambda profile: f"up{int(profile[1:]) % banks:04d}"


def _wall(stats: Sequence[CycleStats]) -> float:
    return max(s.ended for s in stats) - min(s.started for s in stats)


def _cycle_summary(cluster: Cluster, k: int, profiles: Sequence[str]) -> dict[str, Any]:
    stats = [s for s in cluster.stats if s.cycle == k]
    runs = cluster.runs([k])
    started, ended = cluster.span[k]
    return {
        "cycle": k,
        "phase": cluster.phase[k],
        "hosts": len(stats),
        "wall_s": ended - started,
        "runs": len(runs),
        "runs_per_s": len(runs) / (ended - started) if ended > started else None,
        "unrun": unrun(runs, profiles, k),
        "same_cycle_duplicates": same_cycle_duplicates(runs, [k])[k],
        **outcomes(stats),
    }


def _until(cluster: Cluster, phase: str, profiles: Sequence[str], bank_of: Callable[[str], str],
           done: Callable[[], bool], max_cycles: int) -> None:
    for _ in range(max_cycles):
        if done():
            return
        cluster.cycle(phase, profiles, bank_of)


def _last_share(cluster: Cluster, host: SimHost, phase: str = "steady") -> set[str]:
    """The profiles ``host`` ran in the last cycle of ``phase`` (and after it, of the main set)."""
    last = max(cluster.cycles_of(phase))
    return {r.profile for r in cluster.runs([last]) if r.owner == host.owner}


def _stop_phase(
    cluster: Cluster, phase: str, host: SimHost, how: str, profiles: Sequence[str],
    bank_of: Callable[[str], str], max_cycles: int, share_phase: str,
) -> dict[str, Any]:
    share = _last_share(cluster, host, share_phase)
    stats = cluster.cycle(phase, profiles, bank_of, stopping=host, how=how)
    mine = next(s for s in stats if s.owner == host.owner)

    def measured() -> dict[str, Any]:
        return recovery(cluster.runs(), share, by=None, not_by=host.owner, since=mine.stopped_at,
                        since_cycle=mine.cycle, ttl_s=cluster.ttl_s)

    _until(cluster, phase, profiles, bank_of, lambda: measured()["all_s"] is not None, max_cycles)
    held = [name.split(":", 1)[1] for name in mine.held if name.startswith("profile:")]
    result = measured()
    result.update(
        host=host.label,
        how=how,
        ran_before_stop=mine.ran,
        held=list(mine.held),
        held_profile_s=recovery(cluster.runs(), held, by=None, not_by=host.owner, since=mine.stopped_at,
                                since_cycle=mine.cycle, ttl_s=cluster.ttl_s)["all_s"] if held else None,
        cycles_run=[_cycle_summary(cluster, k, profiles) for k in cluster.cycles_of(phase)],
    )
    return result


def _join_phase(cluster: Cluster, label: str, profiles: Sequence[str], bank_of: Callable[[str], str],
                max_cycles: int, before: set[str]) -> dict[str, Any]:
    """A new seat labelled ``label`` joins mid-cycle; ``before``: what the last host of that label
    ran (its owner id is new, so the rendezvous gives it other profiles)."""
    joiner = cluster.host(label)
    owners = [h.owner for h in cluster.live] + [joiner.owner]
    moved = [p for p in profiles if preferred_host(p, owners) == joiner.owner]
    stats = cluster.cycle("join", profiles, bank_of, joining=joiner)
    mine = next(s for s in stats if s.owner == joiner.owner)

    def measured() -> dict[str, Any]:
        return recovery(cluster.runs(), moved, by=joiner.owner, not_by=None, since=mine.started,
                        since_cycle=mine.cycle, ttl_s=cluster.ttl_s)

    _until(cluster, "join", profiles, bank_of, lambda: measured()["all_s"] is not None, max_cycles)
    result = measured()
    late = [r for r in cluster.runs() if r.profile in set(moved) and r.owner != joiner.owner
            and r.start >= mine.started]
    result.update(
        host=label, how="join", moved_runs_by_old_owners=len(late),
        moved_it_ran_before=len(set(moved) & before),
        ran_before=len(before),
        cycles_run=[_cycle_summary(cluster, k, profiles) for k in cluster.cycles_of("join")],
    )
    return result


def _bank_cycle(cluster: Cluster, phase: str, names: Sequence[str], banks: int,
                work_s: float) -> dict[str, Any]:
    bank_of = banks_round_robin(banks) if banks > 1 else bank_for(0)
    stats = cluster.cycle(phase, names, bank_of, work_s=work_s)
    k = stats[0].cycle
    waits = [w for s in stats for w in s.upstream_waits]
    summary = _cycle_summary(cluster, k, names)
    summary.update(
        banks=banks,
        spread=spread(cluster.runs([k]), [s.host for s in stats], len(names)),
        upstream_wait_mean_s=statistics.fmean(waits) if waits else None,
        upstream_wait_max_s=max(waits, default=None),
        upstream_waited=sum(1 for w in waits if w > 0.05),
    )
    return summary


def _banks_phase(cluster: Cluster, n: int, banks: int, work_s: float) -> dict[str, Any] | None:
    """The same ``n`` profiles twice, each run holding its leases ``work_s``: spread over ``banks``
    upstream banks (as many as the main phases have), then all into one global bank."""
    if n <= 0:
        return None
    names = profile_names(n, "g")
    return {
        "profiles": n,
        "work_s": work_s,
        "banks": _bank_cycle(cluster, "banks, work", names, banks, work_s) if banks > 1 else None,
        "global": _bank_cycle(cluster, "global bank, work", names, 1, work_s),
    }


def simulate(
    open_store: Callable[[], StateStore],
    *,
    own_beat_store: bool,
    profiles: int,
    hosts: int,
    ttl_s: float,
    cycles: int,
    per_bank: int,
    global_profiles: int,
    work_s: float,
    max_cycles_after: int,
    seed: int = 0,
) -> dict[str, Any]:
    """Run the phases on stores from ``open_store`` (one database) and measure them."""
    names = profile_names(profiles)
    bank_of = bank_for(per_bank)
    cluster = Cluster(open_store, own_beat_store=own_beat_store, ttl_s=ttl_s, seed=seed)
    try:
        for i in range(hosts):
            cluster.add(f"host{i}")
        agree_s = cluster.agree(timeout_s=max(10 * ttl_s, 30.0))
        for _ in range(cycles):
            cluster.cycle("steady", names, bank_of)
        steady = cluster.cycles_of("steady")
        first = [s for s in cluster.stats if s.cycle == steady[0]]
        result: dict[str, Any] = {
            "agree_s": agree_s,
            "spread": spread(cluster.runs([steady[0]]), [s.host for s in first], profiles),
            "steady": [_cycle_summary(cluster, k, names) for k in steady],
            "round_trips": round_trips([s for s in cluster.stats if s.cycle in set(steady)]),
            "upstream_banks": _banks_phase(
                cluster, global_profiles, -(-profiles // per_bank) if per_bank > 0 else 1, work_s
            ),
        }
        first_host0 = _last_share(cluster, cluster.live[0])
        transitions = [
            _stop_phase(cluster, "dead host", cluster.live[0], "kill", names, bank_of, max_cycles_after,
                        "steady"),
            _join_phase(cluster, "host0", names, bank_of, max_cycles_after, first_host0),
        ]
        leaving = next(h for h in cluster.live if h.label == "host1")
        transitions.append(
            _stop_phase(cluster, "clean stop", leaving, "leave", names, bank_of, max_cycles_after, "join")
        )
        result["transitions"] = transitions
        result["safety"] = _safety(cluster, steady)
        result["beats_failed"] = sum(h.beats_failed for h in cluster.every)
        result["longest_beat_gap_s"] = max(h.longest_beat_gap() for h in cluster.every)
        result["longest_beat_s"] = max(max(h.beat_took, default=0.0) for h in cluster.every)
        result["late_beats"] = [
            {"host": h.label, "gap_s": gap} for h in cluster.every for gap in h.beat_gaps() if gap > ttl_s
        ]
        return result
    finally:
        cluster.close()


def _safety(cluster: Cluster, steady: Sequence[int]) -> dict[str, Any]:
    """The log's checks: what must be 0 (``duplicates``: runs of one profile, or into one bank, by
    two hosts at once; tokens not raised by a takeover), and the profiles run by two hosts one after
    the other in one cycle: none in a steady cycle while every heartbeat comes within the lease
    time (a host whose heartbeat is later is dead to the others meanwhile, and they run its
    profiles), some in the cycles where a host stops or joins."""
    runs = cluster.runs()
    checks = lease_safety(runs)
    per_cycle = same_cycle_duplicates(runs, sorted(cluster.phase))
    steady_dupes = sum(per_cycle[k] for k in steady)
    transition_dupes = {
        phase: sum(per_cycle[k] for k in cluster.cycles_of(phase))
        for phase in dict.fromkeys(cluster.phase.values())
        if phase != "steady"
    }
    lost = sum(s.lease_lost + s.watermark_moved for s in cluster.stats)
    examples = _steady_duplicates(runs, steady)
    return {
        "runs": len(runs),
        **checks,
        "steady_same_cycle_duplicates": steady_dupes,
        "transition_same_cycle_duplicates": transition_dupes,
        "refused_commits": lost,
        "steady_duplicate_examples": examples,
        # What the leases promise: never two hosts holding one profile, or one bank, at once.
        "duplicates": checks["overlapping"] + checks["bank_overlapping"],
        "tokens_ok": checks["token_not_increasing"] == 0 and checks["bank_token_not_increasing"] == 0,
    }


def _steady_duplicates(runs: Sequence[Run], steady: Sequence[int], most: int = 5) -> list[str]:
    """The first few profiles run by two hosts in one steady cycle, with who ran them and when."""
    seen: dict[tuple[int, str], list[Run]] = defaultdict(list)
    for r in runs:
        if r.cycle in set(steady):
            seen[(r.cycle, r.profile)].append(r)
    return [
        f"cycle {k} {p}: " + "; ".join(f"{r.owner} token {r.token} {r.start:.3f}-{r.end:.3f}" for r in group)
        for (k, p), group in sorted(seen.items())
        if len({r.owner for r in group}) > 1
    ][:most]
