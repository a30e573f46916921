"""The snapshot block, byte for byte as Hermes' MemoryStore._render_block produces it."""

from __future__ import annotations

from dreamer.hermes.memory.entries import Target, usage_percent
from dreamer.hermes.memory.render import render_block

RULE = "══════════════════════════════════════════════"


class TestHeader:
    """Header line: title, whole percent, thousands separators, over-budget flag."""

    def test_rule_is_46_double_bars(self) -> None:
        """The rule above and below the header is 46 '═'."""
        block = render_block(Target.MEMORY, ["x"], 2200)
        assert block.split("\n")[0] == RULE
        assert len(RULE) == 46

    def test_percent_uses_hermes_float_truncation(self) -> None:
        """638/2200 prints 28% (float truncation, as Hermes), not the 29% integer division gives."""
        assert usage_percent(638, 2200) == 28
        block = render_block(Target.MEMORY, ["a" * 638], 2200)
        assert block.split("\n")[1] == "MEMORY (your personal notes) [28% — 638/2,200 chars]"

    def test_over_the_limit_is_capped_at_100_without_a_flag(self) -> None:
        """Over the limit: 100% and nothing else in the header (Hermes adds no flag)."""
        block = render_block(Target.USER, ["a" * 1400], 1375)
        assert block.split("\n")[1] == "USER PROFILE (who the user is) [100% — 1,400/1,375 chars]"

    def test_empty_renders_empty_string(self) -> None:
        """No entries, no block."""
        assert render_block(Target.MEMORY, [], 2200) == ""


class TestOverLimit:
    """A file far over its limit is rendered whole, as Hermes renders it."""

    def test_nothing_is_cut(self) -> None:
        """6,006 characters under a 2,200 limit: every character is in the block, no marker."""
        entries = ["A" * 2000, "B" * 2000, "C" * 2000]
        content = "\n§\n".join(entries)
        expected = f"{RULE}\nMEMORY (your personal notes) [100% — 6,006/2,200 chars]\n{RULE}\n{content}"
        assert render_block(Target.MEMORY, entries, 2200) == expected
