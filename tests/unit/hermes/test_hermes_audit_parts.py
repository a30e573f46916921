"""The audit's small parts: config.yaml model, writer registry, ledger, ages, state, canaries, drift."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from dreamer.hermes.audit.age import entry_age, entry_dates
from dreamer.hermes.audit.canary import canary_lines, is_canary_entry
from dreamer.hermes.audit.config_yaml import ConfigYamlError, parse_model_name, read_model_name
from dreamer.hermes.audit.drift import drift_alerts
from dreamer.hermes.audit.ledger import LedgerEntry, LedgerRecord, append_record, format_record, parse_ledger
from dreamer.hermes.audit.probe import extract_urls
from dreamer.hermes.audit.settings import AuditSettings, InvalidAuditSettingsError
from dreamer.hermes.audit.skills import append_rule, format_rule
from dreamer.hermes.audit.state import AuditState, entry_key, load_state, save_state, with_entries_seen
from dreamer.hermes.audit.writers import is_registered_writer, registered_writers

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


class TestConfigYamlModel:
    """The tiny config.yaml reader finds `model:` in both of Hermes' shapes."""

    def test_scalar_model(self) -> None:
        """'model: name' at top level."""
        assert parse_model_name("provider: x\nmodel: gpt-4o  # main\n") == "gpt-4o"

    def test_mapping_with_default(self) -> None:
        """'model:' mapping with a quoted 'default:' child, comments and blank lines around."""
        text = (
            'x: 1\nmodel:\n  # Default model\n  default: "anthropic/claude-opus-4.6"\n\n'
            '  provider: "auto"\ny: 2\n'
        )
        assert parse_model_name(text) == "anthropic/claude-opus-4.6"

    def test_mapping_with_model_key(self) -> None:
        """Hermes accepts 'model:' as the child key too."""
        assert parse_model_name("model:\n  provider: auto\n  model: qwen3:32b\n") == "qwen3:32b"

    def test_nested_keys_are_not_children(self) -> None:
        """A 'default' deeper than the first child level is ignored."""
        text = "model:\n  provider: x\n  extra:\n    default: wrong\n  default: right\n"
        assert parse_model_name(text) == "right"

    def test_indented_model_key_is_not_top_level(self) -> None:
        """'model:' under another section (e.g. a provider entry) is not the agent's model."""
        assert parse_model_name("providers:\n  dbx:\n    model: other\n") is None

    def test_flow_mapping_is_not_guessed(self) -> None:
        """'model: {default: x}' is outside the supported shapes and yields None."""
        assert parse_model_name("model: {default: x}\n") is None

    def test_missing_file_is_a_typed_error(self, tmp_path: Path) -> None:
        """An absent config.yaml raises ConfigYamlError naming the path."""
        with pytest.raises(ConfigYamlError, match=r"config\.yaml"):
            read_model_name(tmp_path / "config.yaml")


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


class TestAge:
    """Entry age from a written date, else from the first time the audit saw it."""

    def test_date_formats(self) -> None:
        """ISO, '1 March 2025' and 'March 3, 2025' are all read; invalid dates are ignored."""
        text = "2025-01-02, 1 March 2025, Mar 3, 2025 and 2025-02-30"
        assert [d.isoformat() for d in entry_dates(text)] == ["2025-01-02", "2025-03-01", "2025-03-03"]

    def test_newest_past_date_counts(self) -> None:
        """Age runs from the newest date not after today; a future deadline is ignored."""
        age = entry_age("offer 2025-02-01, decide by 2025-04-01, seen 2025-02-10", None, NOW)
        assert (age.days, age.basis) == (19, "dated 2025-02-10")

    def test_first_seen_without_date(self) -> None:
        """Undated entries are as old as the audit's first sighting."""
        age = entry_age("deal pending", NOW - timedelta(days=20), NOW)
        assert age.days == 20 and age.basis.startswith("first seen")

    def test_never_seen_is_zero(self) -> None:
        """An undated entry seen for the first time is 0 days old."""
        assert entry_age("deal pending", None, NOW).days == 0


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


class TestSmallParts:
    """Canary lines, URL extraction, skill items and settings validation."""

    def test_canary_lines(self) -> None:
        """Only lines containing the marker are canary lines; entries holding one are protected."""
        raw = "x\nCANARY: Do not modify this line (mumuni)\n§\ny"
        assert canary_lines(raw) == ("CANARY: Do not modify this line (mumuni)",)
        assert is_canary_entry("a\nCANARY: Do not modify this line")

    def test_url_extraction(self) -> None:
        """URLs lose trailing punctuation and are listed once."""
        text = "API http://127.0.0.1:8/v1, docs (https://example.test/a). again http://127.0.0.1:8/v1"
        assert extract_urls(text) == ("http://127.0.0.1:8/v1", "https://example.test/a")

    def test_skill_items_and_no_repeats(self, tmp_path: Path) -> None:
        """Rules become list items with indented continuation lines, and are listed once."""
        assert format_rule("first\nsecond") == "- first\n  second\n"
        path = tmp_path / "memory-operating-rules" / "SKILL.md"
        assert append_rule(path, "Always test.")
        assert not append_rule(path, "Always test.")
        text = path.read_text(encoding="utf-8")
        assert text.startswith("---\nname: memory-operating-rules\n")
        assert text.count("- Always test.") == 1

    def test_settings_validation(self) -> None:
        """Inconsistent thresholds are refused with the setting named."""
        with pytest.raises(InvalidAuditSettingsError, match="skip_below_pct"):
            AuditSettings(skip_below_pct=90, threshold_pct=85)


class TestDrift:
    """Drift alerts compared against the previous ledger entry."""

    def previous(self, **fields: str) -> LedgerEntry:
        base = {"memory_util_after": "50.0%", "deletions": "4", "unverified_total": "1"}
        base.update(fields)
        return LedgerEntry(NOW - timedelta(days=14), base)

    def test_no_previous_audit_no_alerts(self) -> None:
        """The first audit has nothing to drift from."""
        assert drift_alerts(None, now=NOW, deletions=50, unverified_total=9) == ()

    def test_quiet_when_nothing_drifts(self) -> None:
        """A timely audit with similar numbers raises nothing."""
        assert drift_alerts(self.previous(), now=NOW, deletions=5, unverified_total=2) == ()

    def test_audit_gap(self) -> None:
        """More than 21 days since the last audit is an audit gap."""
        previous = LedgerEntry(NOW - timedelta(days=22), {})
        (alert,) = drift_alerts(previous, now=NOW, deletions=0, unverified_total=0)
        assert alert.startswith("ALERT: Audit gap")

    def test_previous_audit_left_memory_above_70(self) -> None:
        """A previous MEMORY.md after-utilisation above 70% is a capacity alert."""
        (alert,) = drift_alerts(
            self.previous(memory_util_after="71.0%"), now=NOW, deletions=4, unverified_total=1
        )
        assert "below 70%" in alert

    def test_unverified_growing(self) -> None:
        """Three more unverified entries than last time is an alert; two is not."""
        assert not drift_alerts(self.previous(), now=NOW, deletions=4, unverified_total=3)
        (alert,) = drift_alerts(self.previous(), now=NOW, deletions=4, unverified_total=4)
        assert alert.startswith("ALERT: Unverified configs growing")

    def test_deletions_accelerating(self) -> None:
        """More than 50% more deletions than the previous audit is an alert."""
        assert not drift_alerts(self.previous(), now=NOW, deletions=6, unverified_total=1)
        (alert,) = drift_alerts(self.previous(), now=NOW, deletions=7, unverified_total=1)
        assert "deletions up 75%" in alert
