"""An entry's age, from the dates it names and when the audit first saw it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from dreamer.hermes.audit.age import entry_age, entry_dates

NOW = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)


class TestAge:
    """Entry age from a written date, else from the first time the audit saw it."""

    def test_date_formats(self) -> None:
        """ISO, '1 March 2025' and 'March 3, 2025' are all read; invalid dates are ignored."""
        text = "2025-01-02, 1 March 2025, Mar 3, 2025 and 2025-02-30"
        assert [d.isoformat() for d in entry_dates(text)] == ["2025-01-02", "2025-03-01", "2025-03-03"]

    def test_newest_past_date_counts(self) -> None:
        """Age runs from the newest date not after today; a future deadline is ignored."""
        age = entry_age("offer 2025-02-01, decide by 2025-04-01, seen 2025-02-10", None, NOW)
        assert (age.days, age.basis) == (19, "dated 2025-02-10")

    def test_first_seen_without_date(self) -> None:
        """Undated entries are as old as the audit's first sighting."""
        age = entry_age("deal pending", NOW - timedelta(days=20), NOW)
        assert age.days == 20 and age.basis.startswith("first seen")

    def test_never_seen_is_zero(self) -> None:
        """An undated entry seen for the first time is 0 days old."""
        assert entry_age("deal pending", None, NOW).days == 0
