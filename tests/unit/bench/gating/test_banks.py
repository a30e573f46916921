"""The benchmarks' synthetic banks: distinct units and texts, and a valid configuration with one
bank per profile."""

from __future__ import annotations

from pathlib import Path

from bench.gating.banks import gating_config, synthetic_text, varied_text
from bench.gating.gate import profile_names


class TestSetup:
    def test_synthetic_units_are_distinct(self) -> None:
        """Every index gives another sentence, so no unit is a duplicate of another."""
        texts = {synthetic_text(i) for i in range(5000)}
        assert len(texts) == 5000

    def test_config_has_one_profile_per_bank(self, tmp_path: Path) -> None:
        """The generated configuration is valid and maps each profile to its own bank."""
        config = gating_config(profile_names(12), tmp_path, {"kind": "embedded"}, "x_")
        assert len(config.enabled_profiles()) == 12
        assert config.bank_id("p0003") == "x_bank_p0003"


class TestVariedText:
    def test_varied_texts_are_distinct(self) -> None:
        """Texts of different indices differ."""
        texts = {varied_text(i) for i in range(20_000)}
        assert len(texts) == 20_000
