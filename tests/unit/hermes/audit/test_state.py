"""The audit's own state: when each entry was first seen, kept across audits."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from dreamer.hermes.audit.state import AuditState, entry_key, load_state, save_state, with_entries_seen

NOW = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)


class TestState:
    """First-seen times kept in the agent's own state file."""

    def test_known_entries_keep_their_time_and_gone_ones_drop(self) -> None:
        """Merging keeps old first-seen times, adds new entries at now, forgets vanished ones."""
        old = NOW - timedelta(days=30)
        state = AuditState({entry_key("kept"): old, entry_key("gone"): old})
        merged = with_entries_seen(state, ["kept", "new"], NOW)
        assert merged.first_seen_of("Kept") == old  # normalised: case-insensitive
        assert merged.first_seen_of("new") == NOW
        assert merged.first_seen_of("gone") is None

    def test_save_and_load(self, tmp_path: Path) -> None:
        """The state survives a save/load round trip."""
        path = tmp_path / "MEMORY_AUDIT_STATE.json"
        save_state(path, AuditState({entry_key("a"): NOW}))
        assert load_state(path).first_seen_of("a") == NOW
