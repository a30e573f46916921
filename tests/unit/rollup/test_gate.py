"""The activity gate: idle banks cost nothing; quiet banks are not starved."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from dreamer.backends.base import BankActivity
from dreamer.rollup.gate import gate
from dreamer.state import Watermark

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def act(count: int, last: datetime | None = NOW, exists: bool = True) -> BankActivity:
    return BankActivity("b", count, last, exists)


class TestGate:
    def test_unknown_or_empty_bank_is_idle(self) -> None:
        """A bank that does not exist yet, or holds nothing, is skipped as idle."""
        assert not gate(Watermark(), None, min_new_units=1, max_quiet_hours=24, now=NOW).run
        assert not gate(Watermark(), act(0, None, False), min_new_units=1, max_quiet_hours=24, now=NOW).run

    def test_no_write_since_watermark_is_idle(self) -> None:
        """Same unit count and no newer write than the watermark saw: idle."""
        wm = Watermark(NOW, {"a": NOW}, 5, NOW, NOW)
        d = gate(wm, act(5, NOW), min_new_units=1, max_quiet_hours=24, now=NOW)
        assert not d.run and d.outcome == "idle"

    def test_first_rollup_runs(self) -> None:
        """A bank never rolled up runs as soon as it has units."""
        assert gate(Watermark(), act(3), min_new_units=10, max_quiet_hours=24, now=NOW).run

    def test_below_min_waits_then_runs_after_max_quiet(self) -> None:
        """One new unit with min_new_units=5 waits, until max_quiet_hours since the last roll-up."""
        wm = Watermark(NOW, {"a": NOW}, 5, NOW - timedelta(hours=1), NOW - timedelta(hours=2))
        d = gate(wm, act(6), min_new_units=5, max_quiet_hours=6, now=NOW)
        assert not d.run and d.pending == 1 and d.outcome == "waiting"
        later = NOW + timedelta(hours=5)
        assert gate(wm, act(6), min_new_units=5, max_quiet_hours=6, now=later).run

    def test_enough_new_units_run(self) -> None:
        """pending >= min_new_units runs at once."""
        wm = Watermark(NOW, {"a": NOW}, 5, NOW - timedelta(hours=1), NOW)
        d = gate(wm, act(10), min_new_units=5, max_quiet_hours=24, now=NOW)
        assert d.run and d.pending == 5
