"""Run records: outcomes counted from the newest run back."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from dreamer.state import StateStore

T0 = datetime(2026, 1, 1, tzinfo=UTC)


class TestRunRecords:
    def test_consecutive_counts_trailing_outcomes(self, tmp_path: Path) -> None:
        """Consecutive deferrals are counted from the newest run back."""
        with StateStore.open(tmp_path / "s.sqlite3") as st:
            for i, outcome in enumerate(["promoted", "deferred", "deferred"]):
                st.record_run_start(f"r{i}", "rollup:p", T0 + timedelta(minutes=i))
                st.record_run_end(f"r{i}", outcome, "", {}, T0 + timedelta(minutes=i))
            assert st.consecutive("rollup:p", "deferred") == 2
