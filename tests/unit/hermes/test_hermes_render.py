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

    def test_percent_is_capped_at_100_and_flagged_over_budget(self) -> None:
        """Over the limit: 100% and ' ⚠ OVER BUDGET' inside the brackets."""
        block = render_block(Target.USER, ["a" * 1400], 1375)
        assert (
            block.split("\n")[1] == "USER PROFILE (who the user is) [100% — 1,400/1,375 chars ⚠ OVER BUDGET]"
        )

    def test_exactly_at_limit_is_not_over_budget(self) -> None:
        """A file exactly at its limit shows 100% without the flag."""
        block = render_block(Target.USER, ["a" * 1375], 1375)
        assert block.split("\n")[1] == "USER PROFILE (who the user is) [100% — 1,375/1,375 chars]"

    def test_empty_renders_empty_string(self) -> None:
        """No entries, no block."""
        assert render_block(Target.MEMORY, [], 2200) == ""


class TestTruncation:
    """Content over max(2 × limit, 4000) keeps 70% head, 20% tail and a marker."""

    def test_memory_over_render_cap(self) -> None:
        """MEMORY cap 4400: head 3080, tail 880, marker naming the 2,046 omitted chars."""
        entries = ["A" * 2000, "B" * 2000, "C" * 2000]
        content = "\n§\n".join(entries)
        assert len(content) == 6006
        expected = (
            f"{RULE}\nMEMORY (your personal notes) [100% — 6,006/2,200 chars ⚠ OVER BUDGET]\n{RULE}\n"
            + content[:3080]
            + "\n\n[... 2,046 chars truncated — memory over budget (6,006/2,200); "
            "consolidate via memory(action=remove/replace) ...]\n\n" + content[-880:]
        )
        assert render_block(Target.MEMORY, entries, 2200) == expected

    def test_user_cap_is_4000_floor(self) -> None:
        """USER cap is max(2750, 4000) = 4000: head 2800, tail 800."""
        entries = ["u" * 4001]
        block = render_block(Target.USER, entries, 1375)
        body = block.split("\n", 3)[3]
        assert body.startswith(
            "u" * 2800 + "\n\n[... 401 chars truncated — memory over budget (4,001/1,375);"
        )
        assert body.endswith("...]\n\n" + "u" * 800)

    def test_at_the_cap_nothing_is_cut(self) -> None:
        """Content exactly at the cap is shown whole."""
        block = render_block(Target.MEMORY, ["z" * 4400], 2200)
        assert block.endswith("\n" + "z" * 4400)
