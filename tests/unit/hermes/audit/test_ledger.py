"""The audit ledger: records formatted, appended and parsed back."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from dreamer.hermes.audit.ledger import LedgerRecord, append_record, format_record, parse_ledger

NOW = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)


def record(**changes: object) -> LedgerRecord:
    values: dict[str, object] = {
        "timestamp": NOW,
        "status": "COMPLETE",
        "mode": "apply",
        "memory_util_before": 91.25,
        "memory_util_after": 58.4,
        "user_util_before": 40.0,
        "user_util_after": 47.3,
        "memory_chars_after": 1285,
        "user_chars_after": 650,
        "deletions": 4,
        "moves": 2,
        "corrections": 1,
        "unverified": 1,
        "reverified": 0,
        "unverified_total": 2,
        "unresolved": 1,
        "canary_intact": True,
        "writer_registered": True,
    }
    values.update(changes)
    return LedgerRecord(**values)  # type: ignore[arg-type]


class TestLedger:
    """The ledger block format and its parser."""

    def test_block_has_the_contract_fields(self) -> None:
        """Heading timestamp and every contract field, in order."""
        block = format_record(record(drift_alerts=("ALERT: x",), actions=("DELETE a",)))
        assert block.startswith("\n## 2025-03-01T12:00:00+00:00\n- status: COMPLETE\n")
        for line in (
            "- memory_util_before: 91.2%",
            "- memory_util_after: 58.4%",
            "- user_util_before: 40.0%",
            "- user_util_after: 47.3%",
            "- deletions: 4",
            "- moves: 2",
            "- corrections: 1",
            "- unverified: 1",
            "- unresolved: 1",
            "- drift_alerts: 1",
            "- canary_intact: true",
            "- alert: ALERT: x",
            "- action: DELETE a",
        ):
            assert f"\n{line}\n" in block

    def test_round_trip(self) -> None:
        """Parsing a formatted block gives back its timestamp and values."""
        (entry,) = parse_ledger(format_record(record()))
        assert entry.timestamp == NOW
        assert entry.status == "COMPLETE"
        assert entry.number("memory_util_after") == 58.4
        assert entry.integer("memory_chars_after") == 1285

    def test_multiline_text_cannot_forge_a_block(self) -> None:
        """An action text containing '\\n## date' stays on one line and adds no block."""
        block = format_record(record(actions=("x\n## 2030-01-01T00:00:00+00:00\n- status: FAKE",)))
        entries = parse_ledger(block)
        assert len(entries) == 1 and entries[0].status == "COMPLETE"

    def test_unparseable_headings_are_skipped(self) -> None:
        """A hand-written heading that is not a timestamp does not become an entry."""
        assert parse_ledger("## notes\n- status: COMPLETE\n") == ()

    def test_append_creates_with_header_and_only_appends(self, tmp_path: Path) -> None:
        """The first append writes a header; later appends leave earlier bytes untouched."""
        path = tmp_path / "MEMORY_AUDIT_LEDGER.md"
        append_record(path, record())
        first = path.read_bytes()
        assert first.startswith(b"# Memory audit ledger")
        append_record(path, record(timestamp=NOW + timedelta(days=14)))
        assert path.read_bytes().startswith(first)
        assert len(parse_ledger(path.read_text(encoding="utf-8"))) == 2

    def test_append_after_a_hand_edit_without_newline(self, tmp_path: Path) -> None:
        """A ledger not ending in a newline gets one before the new block, nothing else changes."""
        path = tmp_path / "MEMORY_AUDIT_LEDGER.md"
        path.write_text("# mine", encoding="utf-8")
        append_record(path, record())
        assert path.read_text(encoding="utf-8").startswith("# mine\n\n## 2025-03-01")
