"""MEMORY_WRITERS.md: who is registered to write an agent's memory files, and why not when nobody is."""

from __future__ import annotations

from pathlib import Path

from dreamer.hermes.audit.writers import is_registered_writer, registered_writers


class TestWriterRegistry:
    """MEMORY_WRITERS.md lists who may write the memory files."""

    def test_list_items_headings_and_tables(self) -> None:
        """Names as first word of list items, bold, code, headings or table rows count."""
        text = "# Writers\n- hermes\n* **dreamer**: weekly audit\n| `curator` | nightly |\n## janitor\n"
        assert registered_writers(text) >= {"hermes", "dreamer", "curator", "janitor"}

    def test_struck_or_negated_names_do_not_count(self) -> None:
        """'~~dreamer~~' and 'not dreamer' do not register dreamer."""
        assert "dreamer" not in registered_writers("- ~~dreamer~~ (revoked)\n- not dreamer\n")

    def test_missing_registry_means_not_registered(self, tmp_path: Path) -> None:
        """Without the file nobody is registered, and the reason says how to fix it."""
        registered, reason = is_registered_writer(tmp_path / "MEMORY_WRITERS.md", "dreamer")
        assert not registered
        assert "- dreamer" in reason

    def test_case_insensitive(self, tmp_path: Path) -> None:
        """'- Dreamer' registers 'dreamer'."""
        (tmp_path / "MEMORY_WRITERS.md").write_text("- Dreamer\n", encoding="utf-8")
        assert is_registered_writer(tmp_path / "MEMORY_WRITERS.md", "dreamer")[0]
