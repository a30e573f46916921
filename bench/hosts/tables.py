"""The tables of ``python -m bench.hosts``, from its result (the same document ``--json`` prints)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bench._common import render_table

__all__ = ["tables"]


def _verdict(ok: bool) -> str:
    return "met" if ok else "MISSED"


def spread_table(result: Mapping[str, Any]) -> str:
    s = result["spread"]
    rows = [[host, n, n / s["ideal"] if s["ideal"] else None] for host, n in s["per_host"].items()]
    return render_table(
        "(1) Spread: profiles run per host in the first steady cycle (rendezvous hashing)",
        ["host", "profiles", "÷ ideal"],
        rows,
        [
            f"ideal {s['ideal']:.1f}; min {s['min']}, max {s['max']}, max ÷ ideal {s['max_over_ideal']:.3f}",
            f"the hosts agreed on who is alive {result['agree_s']:.2f} s after the last one started",
        ],
    )


def _cycle_rows(result: Mapping[str, Any]) -> list[list[object]]:
    cycles = list(result["steady"])
    banks = result.get("upstream_banks") or {}
    cycles.extend(c for c in (banks.get("banks"), banks.get("global")) if c)
    for t in result["transitions"]:
        cycles.extend(t["cycles_run"])
    return [
        [
            c["phase"], c["cycle"], c["hosts"], c["wall_s"], c["runs"], c["runs_per_s"], c["unrun"],
            c["same_cycle_duplicates"], c.get("busy_profile", 0), c.get("busy_upstream", 0),
            c.get("lease_lost", 0) + c.get("watermark_moved", 0),
        ]
        for c in sorted(cycles, key=lambda c: c["cycle"])
    ]


def _banks_note(result: Mapping[str, Any]) -> list[str]:
    banks = result.get("upstream_banks")
    if not banks:
        return []
    out = [
        f"banks, work / global bank, work: {banks['profiles']} other profiles whose runs hold their "
        f"leases {banks['work_s'] * 1000:g} ms, spread over "
        f"{(banks.get('banks') or {}).get('banks', 1)} upstream banks, then all into one bank"
    ]
    for c in (banks.get("banks"), banks.get("global")):
        if c:
            out.append(
                f"  {c['phase']}: waited for the upstream lease {c['upstream_waited']} times, mean "
                f"{c['upstream_wait_mean_s']:.3f} s, max {c['upstream_wait_max_s']:.2f} s; runs per host "
                + ", ".join(f"{h} {n}" for h, n in c["spread"]["per_host"].items())
            )
    return out


def cycles_table(result: Mapping[str, Any]) -> str:
    notes = [
        "unrun: profiles no host ran in that cycle; dup: profiles run by two hosts in it (one after the "
        "other: never at once, see (4))",
        "busy profile / busy upstream: a run skipped because the profile's lease was held, or the "
        "upstream bank's stayed taken for 2 s (RUN_LOCK_WAIT_S)",
        *_banks_note(result),
    ]
    return render_table(
        "Cycles (every host walks every profile; the cycle ends when the last host is done)",
        ["phase", "cycle", "hosts", "wall s", "runs", "runs/s", "unrun", "dup", "busy profile",
         "busy upstream", "refused commits"],
        _cycle_rows(result),
        notes,
    )


def transitions_table(result: Mapping[str, Any]) -> str:
    what = {"kill": "dies (no leave)", "join": "joins (new seat)", "leave": "stops (leave)"}
    rows = [
        [
            f"{t['host']} {what[t['how']]}", t["profiles"], t["covered"], t["first_s"], t["median_s"],
            t["all_s"], t["all_ttl"], t["cycles"], t.get("held_profile_s"),
            t.get("moved_runs_by_old_owners"),
        ]
        for t in result["transitions"]
    ]
    return render_table(
        f"(2) A host stops or joins mid-cycle: seconds until its profiles are run again "
        f"(lease time {result['ttl']:g} s)",
        ["event", "profiles", "run again", "first s", "median s", "all s", "all ÷ ttl", "cycles",
         "held lease s", "old owners' runs"],
        rows,
        [
            "profiles: those it ran in the cycle before (dies, stops) or the rendezvous moves to it "
            "(joins); all s: until the last of them was run (by another host, or by the new one)",
            "cycles: how many cycles after the one it stopped or joined in (0: the same cycle); held "
            "lease s: until the profile whose lease it died holding was run",
            "old owners' runs: runs of the moved profiles by their former hosts after the new one "
            "started, before they saw it",
            *[
                f"of the {t['profiles']} profiles the new {t['host']} (a new owner id) was given, "
                f"{t['moved_it_ran_before']} are among the {t['ran_before']} the {t['host']} before it ran"
                for t in result["transitions"] if t["how"] == "join" and "moved_it_ran_before" in t
            ],
        ],
    )


def round_trips_table(result: Mapping[str, Any]) -> str:
    rt = result["round_trips"]
    rows = [[kind, n] for kind, n in rt["per_run_by_kind"].items()]
    rows.append(["all, per run", rt["per_run"]])
    unit = "round trips" if result["backend"] == "postgres" else "statements"
    beat = ", ".join(f"{k} {v:.1f}" for k, v in rt["beat_by_kind_per_host_per_cycle"].items())
    return render_table(
        f"(3) Database {unit} per profile run (steady cycles, {rt['runs']} runs)",
        ["statement", "per run"],
        rows,
        [
            f"per host per cycle: {rt['per_host_per_cycle']:.0f} ({rt['run_per_host_per_cycle']:.0f} by "
            f"runs, {rt['beat_per_host_per_cycle']:.1f} by heartbeats: {beat})",
            f"seconds per host per cycle waiting for the write lock (advisory lock / BEGIN IMMEDIATE): "
            f"{rt['lock_wait_s_per_host_per_cycle']:.2f}",
            "every execute counted, BEGIN and COMMIT included; an executemany counts as one (psycopg "
            "pipelines it)",
        ],
    )


def safety_table(result: Mapping[str, Any]) -> str:
    s = result["safety"]
    late = result.get("late_beats", [])
    steady_ok = s["steady_same_cycle_duplicates"] == 0
    rows = [
        ["runs of one profile by two hosts at once", s["overlapping"], _verdict(s["overlapping"] == 0)],
        ["runs into one upstream bank by two hosts at once", s["bank_overlapping"],
         _verdict(s["bank_overlapping"] == 0)],
        ["duplicates (the two above)", s["duplicates"], _verdict(s["duplicates"] == 0)],
        ["profile token not raised by a takeover", s["token_not_increasing"],
         _verdict(s["token_not_increasing"] == 0)],
        ["bank token not raised by a takeover", s["bank_token_not_increasing"],
         _verdict(s["bank_token_not_increasing"] == 0)],
        ["profiles run by two hosts in one steady cycle", s["steady_same_cycle_duplicates"],
         _verdict(steady_ok) if steady_ok or not late else "MISSED (late heartbeat)"],
    ]
    by_phase = ", ".join(f"{p} {n}" for p, n in s["transition_same_cycle_duplicates"].items())
    notes = [
        "profiles run by two hosts one after the other in a cycle where a host stopped or joined: "
        + by_phase,
        f"commits refused by a fence or a moved watermark: {s['refused_commits']}; failed heartbeats: "
        f"{result['beats_failed']}; longest time between two heartbeats of a host: "
        f"{result['longest_beat_gap_s']:.2f} s (lease time {result['ttl']:g} s, a beat every "
        f"{result['ttl'] / 3:.2f} s)",
    ]
    if late:
        notes.append(
            f"{len(late)} heartbeats came later than the lease time (the host was dead to the others "
            "meanwhile): " + ", ".join(f"{b['host']} {b['gap_s']:.2f} s" for b in late[:6])
        )
    notes += [f"e.g. {line}" for line in s.get("steady_duplicate_examples", [])[:3]]
    return render_table(
        f"(4) Duplicate runs, from the log of {s['runs']} runs (profile, host, token, time)",
        ["check", "count", "must be 0"],
        rows,
        notes,
    )


def tables(result: Mapping[str, Any]) -> list[str]:
    return [
        spread_table(result),
        cycles_table(result),
        transitions_table(result),
        round_trips_table(result),
        safety_table(result),
    ]
