"""The memory-operating-rules skill: rules as list items, each written once."""

from __future__ import annotations

from pathlib import Path

from dreamer.hermes.audit.skills import append_rule, format_rule


class TestRules:
    def test_skill_items_and_no_repeats(self, tmp_path: Path) -> None:
        """Rules become list items with indented continuation lines, and are listed once."""
        assert format_rule("first\nsecond") == "- first\n  second\n"
        path = tmp_path / "memory-operating-rules" / "SKILL.md"
        assert append_rule(path, "Always test.")
        assert not append_rule(path, "Always test.")
        text = path.read_text(encoding="utf-8")
        assert text.startswith("---\nname: memory-operating-rules\n")
        assert text.count("- Always test.") == 1
