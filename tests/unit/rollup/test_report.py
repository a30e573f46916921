"""A run report's unit counts: every unit a batch summarised is counted once, by what became of it."""

from __future__ import annotations

from dreamer.rollup.report import LEFT_OUT, RollupReport


class TestUnitFates:
    def test_each_unit_counts_once_promoted_before_merged_before_left_out(self) -> None:
        """A unit cited by a promoted and a reinforcing card counts as promoted; one cited by no
        card is left out, with its reason."""
        report = RollupReport(profile="research", run_id="r1")
        report.count_fates({"a", "b", "c", "d"}, promoted={"a", "b"}, merged={"b", "c", "zz"})
        assert (report.units_promoted, report.units_merged, report.units_left_out) == (2, 1, 1)
        assert report.dropped == {LEFT_OUT: 1}

    def test_chatter_is_counted_by_reason_across_batches(self) -> None:
        """Chatter of several batches adds up per reason, in the JSON report and the counts."""
        report = RollupReport(profile="research", run_id="r1")
        report.count_chatter(["filler", "contact record"])
        report.count_chatter(["contact record"])
        assert report.units_chatter == 3
        assert report.to_json()["dropped"] == {"filler": 1, "contact record": 2}
        assert report.counts()["units_chatter"] == 3
