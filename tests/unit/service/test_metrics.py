"""The operator metrics file: Prometheus' text format, written atomically, never through a link."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

from dreamer.service.metrics import ProfileNow, render, write_textfile
from dreamer.state import RunTotal

T = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


class TestRender:
    def test_families_and_values(self) -> None:
        totals = [
            RunTotal("rollup:research", "promoted", 3, 7, 2, T),
            RunTotal("rollup:research", "deferred", 2, 0, 0, T),
            RunTotal("audit:mumuni", "ok", 1, 0, 0, T),
        ]
        text = render(totals, [ProfileNow("research", 0, 4)], ledger_cards=7)
        lines = text.splitlines()
        assert 'dreamer_runs_total{job_id="rollup:research",outcome="promoted"} 3' in lines
        assert 'dreamer_runs_total{job_id="audit:mumuni",outcome="ok"} 1' in lines
        assert 'dreamer_cards_promoted_total{profile="research"} 7' in lines
        assert 'dreamer_cards_reinforced_total{profile="research"} 2' in lines
        assert f'dreamer_last_success_timestamp_seconds{{profile="research"}} {int(T.timestamp())}' in lines
        assert 'dreamer_backlog_units{profile="research"} 4' in lines
        assert "dreamer_ledger_cards 7" in lines
        assert "# TYPE dreamer_runs_total counter" in lines
        assert text.endswith("\n")

    def test_tokens_and_grounding_are_summed_per_profile(self) -> None:
        """LLM tokens, accepted and rejected cards and re-carded units are counters per profile,
        added up over the outcomes of its runs (audit jobs left out)."""
        sums = {"llm_tokens": 900, "cards_accepted": 4, "cards_rejected": 2, "units_recarded": 3}
        totals = [
            RunTotal("rollup:research", "promoted", 3, 7, 2, T, sums),
            RunTotal("rollup:research", "deferred", 1, 0, 0, T, {"llm_tokens": 100}),
            RunTotal("audit:mumuni", "ok", 1, 0, 0, T, {"llm_tokens": 5}),
        ]
        lines = render(totals, [], ledger_cards=0).splitlines()
        assert 'dreamer_llm_tokens_total{profile="research"} 1000' in lines
        assert 'dreamer_cards_accepted_total{profile="research"} 4' in lines
        assert 'dreamer_cards_rejected_total{profile="research"} 2' in lines
        assert 'dreamer_units_recarded_total{profile="research"} 3' in lines
        assert "# TYPE dreamer_llm_tokens_total counter" in lines

    def test_label_values_are_escaped(self) -> None:
        text = render([RunTotal('rollup:a"b\\c\nd', "failed", 1, 0, 0, None)], [], 0)
        assert 'job_id="rollup:a\\"b\\\\c\\nd"' in text

    def test_a_deferred_profile_without_success_has_no_last_success(self) -> None:
        text = render([RunTotal("rollup:x", "deferred", 4, 0, 0, T)], [ProfileNow("x", 4, None)], 0)
        assert "dreamer_last_success_timestamp_seconds" not in text
        assert 'dreamer_deferred_in_a_row{profile="x"} 4' in text.splitlines()
        assert "dreamer_backlog_units" not in text


class TestWriteTextfile:
    def test_replaces_atomically_and_leaves_no_temporary_file(self, tmp_path: Path) -> None:
        path = tmp_path / "dreamer.prom"
        write_textfile(path, "a 1\n")
        write_textfile(path, "a 2\n")
        assert path.read_text() == "a 2\n"
        assert sorted(os.listdir(tmp_path)) == ["dreamer.prom"]

    def test_a_symlink_is_replaced_not_followed(self, tmp_path: Path) -> None:
        victim = tmp_path / "victim"
        victim.write_text("keep me\n")
        (tmp_path / "dreamer.prom").symlink_to(victim)
        write_textfile(tmp_path / "dreamer.prom", "a 1\n")
        assert victim.read_text() == "keep me\n"
        assert not (tmp_path / "dreamer.prom").is_symlink()
