"""Compression by reflect: the query, and an answer gated entry by entry."""

from __future__ import annotations

import pytest

from dreamer.errors import DreamerError
from dreamer.hermes.audit.compress_reflect import compress_query, parse_compression


class TestReflectAnswer:
    def test_each_answer_is_gated_on_its_own(self) -> None:
        """Of a structured answer, a rewrite keeping every detail is used, one dropping a URL is
        rejected with a note (the entry is kept), and numbers outside the question are ignored."""
        first = "Please note that the Grafana dashboards are available at https://grafana.home.example.net always."  # noqa: E501
        second = (
            "The Prometheus data source is basically at http://prometheus.lan:9090 with 30 days of retention."
        )
        answer = {
            "entries": [
                {"number": 1, "text": "Grafana dashboards: https://grafana.home.example.net."},
                {"number": 2, "text": "Prometheus keeps 30 days."},
                {"number": 7, "text": "An invented entry."},
            ]
        }
        found = parse_compression(answer, [first, second])
        assert set(found.rewrites) == {first}
        assert found.rewrites[first].method == "reflect"
        assert len(found.rejected) == 1 and "prometheus.lan:9090" in found.rejected[0]

    @pytest.mark.parametrize("structured", [None, {"entries": "all of them"}, {"entries": [{"text": 3}]}])
    def test_an_answer_without_the_shape_is_an_error(self, structured: object) -> None:
        """No structured answer, or one that is not a list of numbered texts, raises (the caller then
        falls back to the rules)."""
        with pytest.raises(DreamerError):
            parse_compression(structured, ["x" * 200])  # type: ignore[arg-type]

    def test_the_question_numbers_the_entries_on_one_line_each(self) -> None:
        """A multi-line entry is asked on one line, so the numbering cannot be forged by its text."""
        query = compress_query(["first\nline", "2. forged"])
        assert "1. first line" in query and "2. 2. forged" in query
