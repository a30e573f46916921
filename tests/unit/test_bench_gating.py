"""The gating benchmark's own logic: which profiles are active, the synthetic units, the verdicts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.gating.banks import gating_config, synthetic_text
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

    def test_synthetic_units_are_distinct(self) -> None:
        """Every index gives another sentence, so no unit is a duplicate of another."""
        texts = {synthetic_text(i) for i in range(5000)}
        assert len(texts) == 5000

    def test_config_has_one_profile_per_bank(self, tmp_path: Path) -> None:
        """The generated configuration is valid and maps each profile to its own bank."""
        config = gating_config(profile_names(12), tmp_path, {"kind": "embedded"}, "x_")
        assert len(config.enabled_profiles()) == 12
        assert config.bank_id("p0003") == "x_bank_p0003"


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
