"""`dreamer rollup`'s text report: every fate of the units and every reason one was dropped."""

from __future__ import annotations

from dreamer.commands.rollup import format_report
from dreamer.rollup.report import LEFT_OUT, RollupReport


class TestFormatReport:
    def test_the_text_report_names_every_fate_and_reason(self) -> None:
        """`dreamer rollup` prints the batches, each fate's count and the reasons units were dropped."""
        report = RollupReport(profile="research", run_id="r1", units_seen=5, batches=2, units_pending=1)
        report.count_chatter(["contact record"])
        report.count_fates({"a", "b", "c"}, promoted={"a"}, merged={"b"})
        text = format_report(report)
        assert "units in 2 batch(es): 1 promoted, 1 merged, 1 chatter, 1 left out, 1 pending" in text
        assert "1 contact record" in text and f"1 {LEFT_OUT}" in text
