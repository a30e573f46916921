"""The gating benchmark's own logic: which profiles are active, and the verdicts."""

from __future__ import annotations

from typing import Any

from bench.gating.gate import (
    active_profiles,
    gating_targets,
    profile_names,
    walks,
)


def row(backend: str, profiles: int, gate_requests: int, reflect: int = 0, active: int = 1) -> dict[str, Any]:
    return {
        "backend": backend,
        "profiles": profiles,
        "gate_requests": gate_requests,
        "reflect_calls": reflect,
        "summarise_calls": active,
        "active": active,
    }


class TestSetup:
    def test_five_percent_active_at_least_one(self) -> None:
        """5% of the profiles get new units, spread over the list, and never none."""
        assert len(active_profiles(profile_names(100))) == 5
        assert len(active_profiles(profile_names(1000))) == 50
        assert active_profiles(profile_names(10)) == ["p0000"]
        names = active_profiles(profile_names(100))
        assert len(set(names)) == len(names)


class TestTargets:
    def test_constant_requests_meet_the_target(self) -> None:
        """The same gating request count for every N is O(1) in N."""
        lines = gating_targets([row("embedded", 10, 1), row("embedded", 100, 1)])
        assert lines[0].startswith("met")

    def test_more_requests_than_one_walk_miss_the_target(self) -> None:
        """Gating requests beyond one walk of the bank list are reported as missed."""
        lines = gating_targets([row("embedded", 10, 1), row("embedded", 100, 100)])
        assert lines[0].startswith("MISSED")

    def test_one_paged_walk_meets_the_target(self) -> None:
        """A walk over 11 pages of a 1010-bank list is still one walk."""
        big = {**row("hindsight", 1000, 11, reflect=1), "server_banks": 1010, "page_size": 100}
        assert walks(big) == 1
        lines = gating_targets([row("hindsight", 10, 1, reflect=1), big])
        assert lines[0].startswith("met")
        assert lines[1].startswith("met")

    def test_reflect_calls_must_equal_active_profiles(self) -> None:
        """On an LLM backend, fewer reflect calls than active profiles is a miss."""
        lines = gating_targets([row("hindsight", 100, 1, reflect=4, active=5)])
        assert lines[1].startswith("MISSED")
