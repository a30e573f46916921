"""What the log of runs is made to say: spread, lease safety, duplicates, recovery, round trips."""

from __future__ import annotations

import pytest

from bench.hosts.host import CycleStats, Run
from bench.hosts.measures import (
    lease_safety,
    outcomes,
    recovery,
    round_trips,
    same_cycle_duplicates,
    spread,
    unrun,
)


def run(profile: str = "p1", owner: str = "a#1", token: int = 1, *, start: float = 0.0, end: float = 1.0,
        cycle: int = 0, bank: str = "up", bank_token: int = 1, bank_at: float | None = None) -> Run:
    return Run(profile, owner.split("#")[0], owner, token, bank, bank_token, cycle, start,
               start if bank_at is None else bank_at, end)


class TestSpread:
    def test_min_max_and_the_ideal_share(self) -> None:
        """A host that ran nothing counts as 0; max ÷ ideal is against profiles ÷ hosts."""
        runs = [run(owner="a#1"), run(owner="a#1"), run(owner="b#1")]
        s = spread(runs, ["a", "b", "c"], 3)
        assert s["per_host"] == {"a": 2, "b": 1, "c": 0}
        assert (s["min"], s["max"], s["ideal"], s["max_over_ideal"]) == (0, 2, 1.0, 2.0)


class TestLeaseSafety:
    def test_sequential_runs_with_raised_tokens_are_clean(self) -> None:
        """One host after another, the token raised at each takeover and kept by the same owner."""
        runs = [
            run(owner="a#1", token=1, start=0, end=1, bank_token=1),
            run(owner="a#1", token=1, start=2, end=3, bank_token=1),
            run(owner="b#1", token=2, start=4, end=5, bank_token=2),
        ]
        assert lease_safety(runs) == {
            "overlapping": 0, "bank_overlapping": 0, "token_not_increasing": 0, "bank_token_not_increasing": 0
        }

    def test_two_hosts_at_once_are_counted(self) -> None:
        """A run taking a profile while another host's run still holds it overlaps, even when a
        shorter run of the first host's lies between them."""
        runs = [
            run(owner="a#1", token=1, start=0, end=10, bank_token=1),
            run(owner="b#1", token=2, start=5, end=6, profile="p1", bank="other", bank_token=1),
        ]
        assert lease_safety(runs)["overlapping"] == 1
        assert lease_safety(runs)["bank_overlapping"] == 0

    def test_a_takeover_that_keeps_the_token_is_counted(self) -> None:
        """Another owner with the same token, or any lower one, breaks the fencing."""
        same = [run(owner="a#1", token=3, start=0, end=1), run(owner="b#1", token=3, start=2, end=3)]
        lower = [run(owner="a#1", token=3, start=0, end=1), run(owner="a#1", token=2, start=2, end=3)]
        assert lease_safety(same)["token_not_increasing"] == 1
        assert lease_safety(lower)["token_not_increasing"] == 1

    def test_bank_holds_are_checked_from_when_the_bank_was_taken(self) -> None:
        """Two profiles of one bank: their runs overlap on the bank only if the bank was held."""
        runs = [
            run("p1", "a#1", start=0, bank_at=0.5, end=1, bank_token=1),
            run("p2", "b#1", start=0.6, bank_at=0.9, end=2, bank_token=2),
        ]
        assert lease_safety(runs)["bank_overlapping"] == 1
        runs[1] = run("p2", "b#1", start=0.6, bank_at=1.1, end=2, bank_token=2)
        assert lease_safety(runs)["bank_overlapping"] == 0


class TestCycles:
    def test_same_cycle_duplicates_count_profiles_run_by_two_owners(self) -> None:
        runs = [run("p1", "a#1", cycle=0), run("p1", "b#1", cycle=0, start=2, end=3),
                run("p1", "a#1", cycle=1), run("p2", "a#1", cycle=1)]
        assert same_cycle_duplicates(runs, [0, 1, 2]) == {0: 1, 1: 0, 2: 0}

    def test_unrun(self) -> None:
        runs = [run("p1", cycle=0), run("p2", cycle=1)]
        assert unrun(runs, ["p1", "p2", "p3"], 0) == 2


class TestRecovery:
    def test_seconds_and_cycles_until_every_profile_ran_elsewhere(self) -> None:
        """Runs by the host that stopped, and runs before it stopped, do not count."""
        runs = [
            run("p1", "b#1", start=4, end=5, cycle=1),
            run("p1", "b#1", start=1, end=1.5, cycle=0),  # before the stop
            run("p2", "a#1", start=5, end=6, cycle=1),  # the stopped host itself
            run("p2", "c#1", start=8, end=9, cycle=2),
        ]
        r = recovery(runs, ["p1", "p2"], by=None, not_by="a#1", since=3.0, since_cycle=0, ttl_s=2.0)
        assert (r["covered"], r["first_s"], r["all_s"], r["all_ttl"], r["cycles"]) == (2, 2.0, 6.0, 3.0, 2)

    def test_incomplete_has_no_total(self) -> None:
        r = recovery([run("p1", "b#1", start=4, end=5)], ["p1", "p2"], by=None, not_by="a#1", since=3.0,
                     since_cycle=0, ttl_s=1.0)
        assert (r["covered"], r["all_s"], r["cycles"]) == (1, None, None)
        assert r["first_s"] == pytest.approx(2.0)

    def test_by_the_joining_host_only(self) -> None:
        runs = [run("p1", "b#1", start=4, end=5), run("p1", "j#1", start=6, end=7)]
        r = recovery(runs, ["p1"], by="j#1", not_by=None, since=3.0, since_cycle=0, ttl_s=1.0)
        assert r["all_s"] == 4.0


class TestRoundTrips:
    def test_per_run_and_per_host_cycle(self) -> None:
        """A run's statements are divided by the runs that committed; beats by the host-cycles."""
        a = CycleStats("a", "a#1", 0, ran=2, statements={"run": {"BEGIN": 4, "COMMIT": 4},
                                                        "beat": {"BEGIN": 1}},
                       statement_s={"run BEGIN": 0.5, "run COMMIT": 0.1, "beat BEGIN": 9.0})
        b = CycleStats("b", "b#1", 0, ran=2, busy_profile=1, statements={"run": {"BEGIN": 4}})
        rt = round_trips([a, b])
        assert rt["per_run"] == 3.0
        assert rt["per_run_by_kind"] == {"BEGIN": 2.0, "COMMIT": 1.0}
        assert rt["beat_per_host_per_cycle"] == 0.5
        assert rt["per_host_per_cycle"] == 6.5
        assert rt["lock_wait_s_per_host_per_cycle"] == 0.25
        assert outcomes([a, b])["busy_profile"] == 1
