"""Watermarks with tie handling: a unit at the boundary instant is new once."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from dreamer.state import Watermark

T0 = datetime(2026, 1, 1, tzinfo=UTC)


class TestWatermark:
    def test_equal_timestamps_are_neither_skipped_nor_repeated(self) -> None:
        """A unit sharing the boundary instant is new unless its id was already rolled up."""
        wm = Watermark().advanced_to([(T0, "a"), (T0, "b")])
        assert wm.created_at == T0 and wm.boundary_ids == {"a", "b"}
        assert not wm.is_new(T0, "a")
        assert wm.is_new(T0, "c")
        assert wm.is_new(T0 + timedelta(microseconds=1), "a")
        assert not wm.is_new(T0 - timedelta(seconds=1), "z")

    def test_without_overlap_only_the_newest_instant_is_remembered(self) -> None:
        wm = Watermark().advanced_to([(T0, "a"), (T0 + timedelta(seconds=1), "b")])
        assert wm.boundary_ids == {"b"}
        again = wm.advanced_to([(T0 + timedelta(seconds=1), "c")])
        assert again.boundary_ids == {"b", "c"}

    def test_a_late_commit_inside_the_overlap_is_new_once(self) -> None:
        """A unit stamped slightly before the watermark but never seen is picked up, then remembered."""
        overlap = timedelta(minutes=5)
        wm = Watermark().advanced_to([(T0, "a"), (T0 + timedelta(minutes=2), "b")], overlap)
        assert wm.read_from(overlap) == T0 + timedelta(minutes=2) - overlap
        late = T0 + timedelta(minutes=1)
        assert wm.is_new(late, "late", overlap)
        assert not wm.is_new(T0, "a", overlap)
        assert not wm.is_new(T0 - timedelta(minutes=10), "old", overlap)
        after = wm.advanced_to([(late, "late")], overlap)
        assert not after.is_new(late, "late", overlap)
        assert after.created_at == T0 + timedelta(minutes=2)

    def test_ids_older_than_the_overlap_are_forgotten(self) -> None:
        """The remembered set stays bounded by the overlap window."""
        overlap = timedelta(minutes=5)
        wm = (
            Watermark()
            .advanced_to([(T0, "a")], overlap)
            .advanced_to([(T0 + timedelta(hours=1), "b")], overlap)
        )
        assert wm.boundary_ids == {"b"}


class TestTold:
    """How often a card's fact was found: None for a card found once; one day or a range."""

    def test_a_card_found_once_has_none_and_a_reinforced_one_counts_its_roll_ups(self) -> None:
        from dreamer.state import LedgerCard

        card = LedgerCard("d", "research", "private__hermes", "Sam values Evan.", "sam values evan")
        assert card.told is None
        later = LedgerCard(
            "d",
            "research",
            "private__hermes",
            "Sam values Evan.",
            "sam values evan",
            reinforcements=7,
            promoted_at=datetime(2023, 3, 2, 9, tzinfo=UTC),
            last_seen_at=datetime(2023, 10, 19, 23, tzinfo=UTC),
        )
        assert later.told is not None and later.told.times == 8
        assert later.told.render() == "seen 8 times, 2023-03-02 to 2023-10-19"
        assert later.told.short() == "seen 8×, 2023-03 to 2023-10"

    def test_all_on_one_day_or_in_one_month_names_it_once(self) -> None:
        from dreamer.state import Told

        day = Told(2, T0, T0 + timedelta(hours=3))
        assert day.render() == "seen 2 times, 2026-01-01" and day.short() == "seen 2×, 2026-01"
        assert Told(3, T0, T0 + timedelta(days=20)).short() == "seen 3×, 2026-01"
