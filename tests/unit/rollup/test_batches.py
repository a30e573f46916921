"""Cutting a run's new units into batches in stream order: nothing skipped, chatter judged in place,
the rest pending as a suffix of the stream."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dreamer.rollup.batches import InvalidBatchError, batch_size, cut_stream, stream_order
from dreamer.rollup.salience import SalienceInput

T0 = datetime(2023, 5, 7, 13, 56, tzinfo=UTC)
CHAT = "ok thanks, bye"
CONTACT = "The conversation ended with mutual goodbyes."


def unit(uid: str, text: str | None = None, seconds: int = 0) -> SalienceInput:
    return SalienceInput(
        uid,
        text if text is not None else f"Fact {uid} about Caroline's adoption plans.",
        T0 + timedelta(seconds=seconds),
    )


def ids(units: tuple[SalienceInput, ...]) -> list[str]:
    return [u.id for u in units]


class TestCut:
    def test_batches_hold_top_n_facts_in_stream_order_and_the_rest_is_pending(self) -> None:
        """Seven facts, batches of two, at most two batches: the first four judged, three pending."""
        units = [unit(f"u{i}", seconds=i) for i in range(7)]
        cut = cut_stream(units, 2, limit=2)
        assert [sorted(ids(b.units)) for b in cut.batches] == [["u0", "u1"], ["u2", "u3"]]
        assert ids(cut.pending) == ["u4", "u5", "u6"]

    def test_chatter_is_judged_with_the_batch_whose_stretch_holds_it(self) -> None:
        """Chatter between facts belongs to the batch being filled, with its reason; it takes no
        place of a fact."""
        units = [
            unit("a", seconds=0),
            unit("b", CHAT, 1),
            unit("c", seconds=2),
            unit("d", CONTACT, 3),
            unit("e", seconds=4),
        ]
        cut = cut_stream(units, 2, limit=5)
        first, second = cut.batches
        assert ids(first.units) == ["a", "b", "c"] and sorted(ids(first.substantive)) == ["a", "c"]
        assert dict(first.chatter) == {"b": "filler"}
        assert ids(second.units) == ["d", "e"] and dict(second.chatter) == {"d": "contact record"}
        assert cut.pending == ()

    def test_trailing_chatter_joins_the_last_batch_even_at_the_limit(self) -> None:
        """Chatter after the last fact is judged now, not left pending behind a full last batch."""
        units = [unit("a", seconds=0), unit("b", seconds=1), unit("c", CHAT, 2)]
        cut = cut_stream(units, 2, limit=1)
        (only,) = cut.batches
        assert ids(only.units) == ["a", "b", "c"] and cut.pending == ()

    def test_chatter_only_is_one_batch_without_input(self) -> None:
        """A stream of chatter is one batch with nothing to summarise, so the watermark passes it."""
        cut = cut_stream([unit("a", CHAT), unit("b", CONTACT, 1)], 3, limit=1)
        (only,) = cut.batches
        assert only.substantive == () and len(only.chatter) == 2

    def test_an_empty_stream_has_no_batch(self) -> None:
        """Nothing new: no batch, nothing pending."""
        assert cut_stream([], 5, limit=3).batches == ()

    def test_units_of_one_instant_are_cut_by_id(self) -> None:
        """Units sharing created_at are ordered by id, so the cut is the watermark's order."""
        units = [unit(u) for u in ("c", "a", "b")]
        cut = cut_stream(units, 1, limit=1)
        assert ids(cut.batches[0].units) == ["a"] and ids(cut.pending) == ["b", "c"]

    def test_salience_orders_a_batch_but_never_moves_a_unit_out(self) -> None:
        """The directive ranks the batch's facts (best first) without changing which units it holds."""
        units = [
            unit("a", "Melanie painted a lake at sunrise.", 0),
            unit("b", "Caroline researched adoption agencies.", 1),
        ]
        cut = cut_stream(units, 2, limit=1, directive="adoption")
        assert ids(cut.batches[0].substantive) == ["b", "a"]
        assert ids(cut.batches[0].units) == ["a", "b"]

    @pytest.mark.parametrize(("size", "limit"), [(0, 1), (1, 0), (-5, 3)])
    def test_a_batch_size_or_limit_below_one_is_refused(self, size: int, limit: int) -> None:
        """A cut that could never judge a unit is refused with a clear error."""
        with pytest.raises(InvalidBatchError, match="at least one"):
            cut_stream([unit("a")], size, limit=limit)

    def test_a_huge_limit_and_size_judge_everything_in_one_batch(self) -> None:
        """Limits far above the stream are harmless."""
        cut = cut_stream([unit(f"u{i}", seconds=i) for i in range(50)], 10**9, limit=10**9)
        assert len(cut.batches) == 1 and len(cut.batches[0].units) == 50


@given(
    st.lists(st.tuples(st.integers(0, 5), st.sampled_from(["fact", CHAT, CONTACT])), max_size=40),
    st.integers(1, 6),
    st.integers(1, 4),
)
def test_every_unit_is_judged_once_or_pending_and_judged_units_are_a_prefix(
    spec: list[tuple[int, str]], size: int, limit: int
) -> None:
    """Whatever the input order: each unit lands in exactly one batch or in pending, the batches
    are a prefix of the stream order and pending its suffix, and no batch holds more than ``size``
    facts."""
    units = [
        unit(f"id{i:02d}", f"Fact {i} about Nate's turtles." if text == "fact" else text, seconds)
        for i, (seconds, text) in enumerate(spec)
    ]
    cut = cut_stream(list(reversed(units)), size, limit=limit)
    judged = [u for b in cut.batches for u in b.units]
    assert judged + list(cut.pending) == stream_order(units)
    assert all(len(b.substantive) <= size for b in cut.batches)
    assert len(cut.batches) <= limit
    for batch in cut.batches:
        assert sorted([*ids(batch.substantive), *batch.chatter]) == sorted(ids(batch.units))


class TestBatchSize:
    def test_a_model_reads_top_n_units_and_the_extractive_summariser_its_own_batch(self) -> None:
        """reflect and llm batches hold top_n units; extractive ones `rollup.extractive_batch`."""
        assert batch_size(20, 100, "reflect") == 20
        assert batch_size(20, 100, "llm") == 20
        assert batch_size(20, 100, "extractive") == 100
