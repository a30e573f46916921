"""The scale benchmark's measures: VmHWM, the longest watchdog gap, the verdicts."""

from __future__ import annotations

import os
from typing import Any

import pytest

from bench._common import BenchError
from bench.scale.measures import longest_gap, parse_vm_hwm_mib, targets, vm_hwm_mib


def row(cards: int, run_s: float, rss: float = 100.0, gap: float | None = 0.2) -> dict[str, Any]:
    return {"cards": cards, "run_s": run_s, "peak_rss_mib": rss, "watchdog_gap_s": gap}


class TestVmHwm:
    def test_peak_rss_in_mib(self) -> None:
        """VmHWM's kB figure comes out in MiB, whatever lines surround it."""
        status = "Name:\tpython\nVmPeak:\t  999999 kB\nVmHWM:\t  153600 kB\nVmRSS:\t  1024 kB\n"
        assert parse_vm_hwm_mib(status) == 150.0

    def test_missing_line_is_an_error(self) -> None:
        """A status text without VmHWM is refused rather than read as zero."""
        with pytest.raises(BenchError):
            parse_vm_hwm_mib("Name:\tpython\nVmRSS:\t1024 kB\n")

    def test_own_process(self) -> None:
        """A live process has a positive peak RSS."""
        assert vm_hwm_mib(os.getpid()) > 1


class TestLongestGap:
    def test_longest_interval_between_pings(self) -> None:
        """The widest space between consecutive moments, whatever order they arrive in."""
        assert longest_gap([0.0, 0.1, 0.2, 1.5, 1.6]) == pytest.approx(1.3)
        assert longest_gap([1.6, 0.0, 1.5, 0.1]) == pytest.approx(1.4)

    def test_fewer_than_two_moments(self) -> None:
        """One ping or none has no gap."""
        assert longest_gap([]) is None
        assert longest_gap([3.0]) is None


class TestTargets:
    def test_flat_and_fast_is_met(self) -> None:
        """Within every goal, every line reads met."""
        lines = targets([row(10_000, 0.5), row(1_000_000, 0.9)])
        assert len(lines) == 4
        assert all(line.startswith("met") for line in lines)

    def test_growth_and_gaps_are_missed(self) -> None:
        """A slow, large, growing run with a long gap misses all four goals, with its figures."""
        lines = targets([row(10_000, 1.0), row(1_000_000, 30.0, rss=900.0, gap=12.0)])
        assert [line.split()[0] for line in lines] == ["MISSED"] * 4
        assert "30.0x" in lines[2]
        assert "12.00 s (at 1000000 cards)" in lines[3]

    def test_below_1m_says_the_goal_is_for_1m(self) -> None:
        """Judged at a smaller largest size, the line says so; one size has no flatness line."""
        lines = targets([row(10_000, 0.4)])
        assert len(lines) == 3
        assert "(the goal is for 1M)" in lines[0]
