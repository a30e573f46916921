"""Drift alerts: a record compared against the previous ledger entry."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from dreamer.hermes.audit.drift import drift_alerts
from dreamer.hermes.audit.ledger import LedgerEntry

NOW = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)


class TestDrift:
    """Drift alerts compared against the previous ledger entry."""

    def previous(self, **fields: str) -> LedgerEntry:
        base = {"memory_util_after": "50.0%", "deletions": "4", "unverified_total": "1"}
        base.update(fields)
        return LedgerEntry(NOW - timedelta(days=14), base)

    def test_no_previous_audit_no_alerts(self) -> None:
        """The first audit has nothing to drift from."""
        assert drift_alerts(None, now=NOW, deletions=50, unverified_total=9) == ()

    def test_quiet_when_nothing_drifts(self) -> None:
        """A timely audit with similar numbers raises nothing."""
        assert drift_alerts(self.previous(), now=NOW, deletions=5, unverified_total=2) == ()

    def test_audit_gap(self) -> None:
        """More than 21 days since the last audit is an audit gap."""
        previous = LedgerEntry(NOW - timedelta(days=22), {})
        (alert,) = drift_alerts(previous, now=NOW, deletions=0, unverified_total=0)
        assert alert.startswith("ALERT: Audit gap")

    def test_previous_audit_left_memory_above_70(self) -> None:
        """A previous MEMORY.md after-utilisation above 70% is a capacity alert."""
        (alert,) = drift_alerts(
            self.previous(memory_util_after="71.0%"), now=NOW, deletions=4, unverified_total=1
        )
        assert "below 70%" in alert

    def test_unverified_growing(self) -> None:
        """Three more unverified entries than last time is an alert; two is not."""
        assert not drift_alerts(self.previous(), now=NOW, deletions=4, unverified_total=3)
        (alert,) = drift_alerts(self.previous(), now=NOW, deletions=4, unverified_total=4)
        assert alert.startswith("ALERT: Unverified configs growing")

    def test_deletions_accelerating(self) -> None:
        """More than 50% more deletions than the previous audit is an alert."""
        assert not drift_alerts(self.previous(), now=NOW, deletions=6, unverified_total=1)
        (alert,) = drift_alerts(self.previous(), now=NOW, deletions=7, unverified_total=1)
        assert "deletions up 75%" in alert
