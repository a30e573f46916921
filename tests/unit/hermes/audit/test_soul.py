"""SOUL.md's pure parts: its blocks and the staleness rules."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from dreamer.hermes.audit.soul import SoulFacts, soul_blocks, stale_reasons

T0 = datetime(2025, 1, 1, tzinfo=UTC)


class TestBlocks:
    def test_paragraphs_and_list_items_are_blocks_headings_and_comments_are_not(self) -> None:
        """Each paragraph and each list item (with its continuation line) is one block; headings,
        HTML comments and front-matter fences are left out; the raw lines are kept for removal."""
        raw = (
            "---\nname: koby\n---\n# Koby\n<!-- persona -->\nYou are Koby,\nterse and precise.\n\n"
            "- Rule one.\n  continued here.\n* Rule two.\n"
        )
        blocks = soul_blocks(raw)
        assert [b.text for b in blocks] == [
            "name: koby",
            "You are Koby, terse and precise.",
            "Rule one. continued here.",
            "Rule two.",
        ]
        assert blocks[2].raw == "- Rule one.\n  continued here."


class TestStaleness:
    def facts(self, **changes: object) -> SoulFacts:
        values: dict[str, object] = {"text": "You are Koby.", "modified": T0}
        values.update(changes)
        return SoulFacts(**values)  # type: ignore[arg-type]

    def test_identical_to_the_default_unless_it_is_the_default(self) -> None:
        """Same text as the default profile's is stale; the default profile's own file is not."""
        assert stale_reasons(self.facts(default_text="You are  Koby.\n"), 14)
        assert stale_reasons(self.facts(default_text="You are Koby.", default_is_same_file=True), 14) == ()

    @pytest.mark.parametrize(
        ("config_days", "memory_days", "stale"),
        [(30, 30, True), (30, 10, False), (10, 30, False), (None, 30, True), (None, None, False)],
    )
    def test_older_than_both_config_and_memory_by_the_margin(
        self, config_days: int | None, memory_days: int | None, stale: bool
    ) -> None:
        """Stale only when more than stale_days (14) older than every known one of config.yaml and
        the memory files."""
        facts = self.facts(
            config_modified=None if config_days is None else T0 + timedelta(days=config_days),
            memory_modified=None if memory_days is None else T0 + timedelta(days=memory_days),
        )
        assert bool(stale_reasons(facts, 14)) is stale
