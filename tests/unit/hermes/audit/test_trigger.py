"""When an audit is due: interval, threshold, force, and the skip rule, from sizes and the ledger only."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from dreamer.hermes.audit.ledger import LedgerRecord, append_record
from dreamer.hermes.audit.report import AuditStatus
from dreamer.hermes.audit.run import audit_agent
from dreamer.hermes.audit.settings import AgentFiles, AuditSettings
from dreamer.hermes.audit.trigger import NaiveTimestampError, needs_audit

NOW = datetime(2025, 3, 1, tzinfo=UTC)
CANARY = "CANARY: Do not modify this line"


def write_store(path: Path, entries: list[str]) -> None:
    path.write_text("\n§\n".join(entries), encoding="utf-8")


def ledger_entry(agent: AgentFiles, when: datetime, memory_chars: int, user_chars: int) -> None:
    append_record(
        agent.ledger_path,
        LedgerRecord(
            timestamp=when,
            status="COMPLETE",
            mode="apply",
            memory_util_before=0.0,
            memory_util_after=memory_chars / 22,
            user_util_before=0.0,
            user_util_after=user_chars / 13.75,
            memory_chars_after=memory_chars,
            user_chars_after=user_chars,
            deletions=0,
            moves=0,
            corrections=0,
            unverified=0,
            reverified=0,
            unverified_total=0,
            unresolved=0,
            canary_intact=True,
            writer_registered=True,
        ),
    )


@pytest.fixture
def agent(tmp_path: Path) -> AgentFiles:
    memories = tmp_path / "memories"
    memories.mkdir()
    write_store(memories / "MEMORY.md", [CANARY, "The project is written in Rust."])
    write_store(memories / "USER.md", [CANARY])
    return AgentFiles("mumuni", memories)


class TestNeedsAudit:
    """needs_audit's decision and its reason."""

    def test_never_audited(self, agent: AgentFiles) -> None:
        """An agent without ledger entries is due."""
        assert needs_audit(agent, AuditSettings(), NOW) == (True, "no audit recorded in the ledger yet")

    def test_recent_audit_and_roomy_files(self, agent: AgentFiles) -> None:
        """A 3-day-old audit with small files is not due, and the reason shows the percentages."""
        ledger_entry(agent, NOW - timedelta(days=3), 62, 31)
        due, reason = needs_audit(agent, AuditSettings(), NOW)
        assert not due
        assert reason.startswith("last audit 3 days ago; MEMORY.md 3.0%, USER.md 2.3%")

    def test_interval_elapsed(self, agent: AgentFiles) -> None:
        """14 days after the last audit one is due again."""
        ledger_entry(agent, NOW - timedelta(days=14), 62, 31)
        assert needs_audit(agent, AuditSettings(), NOW)[0]

    def test_over_threshold_and_changed(self, agent: AgentFiles) -> None:
        """A file above 85% that changed since the last audit triggers immediately."""
        ledger_entry(agent, NOW - timedelta(days=1), 62, 31)
        write_store(agent.memory_path, [CANARY, "x" * 1900])
        due, reason = needs_audit(agent, AuditSettings(), NOW)
        assert due and reason.startswith("MEMORY.md at 87.9% (above 85%)")

    def test_over_threshold_but_unchanged_waits_for_the_interval(self, agent: AgentFiles) -> None:
        """A full file the last audit already saw as it is does not re-trigger every cycle."""
        write_store(agent.user_path, [CANARY, "u" * 1300])
        ledger_entry(agent, NOW - timedelta(days=1), 62, 1300 + 3 + len(CANARY))
        assert not needs_audit(agent, AuditSettings(), NOW)[0]

    def test_force(self, agent: AgentFiles) -> None:
        """force makes an audit due no matter what."""
        ledger_entry(agent, NOW, 62, 31)
        assert needs_audit(agent, AuditSettings(force=True), NOW) == (True, "audit requested")

    def test_missing_directory_is_not_due(self, tmp_path: Path) -> None:
        """A configured agent without its directory is reported, not audited."""
        due, reason = needs_audit(AgentFiles("ghost", tmp_path / "nope"), AuditSettings(), NOW)
        assert not due and "does not exist" in reason

    def test_naive_now_is_refused(self, agent: AgentFiles) -> None:
        """A timestamp without a time zone is a typed error."""
        with pytest.raises(NaiveTimestampError):
            needs_audit(agent, AuditSettings(), datetime(2025, 3, 1))


class TestSkipRule:
    """audit_agent skips when the last audit is young and both files are below 75%."""

    def test_skip(self, agent: AgentFiles) -> None:
        """A young audit and roomy files give SKIP and write nothing."""
        ledger_entry(agent, NOW - timedelta(days=2), 62, 31)
        before = agent.ledger_path.read_bytes()
        report = audit_agent(agent, AuditSettings(), NOW)
        assert report.status is AuditStatus.SKIP
        assert "both files below 75%" in report.reason
        assert agent.ledger_path.read_bytes() == before

    def test_between_75_and_85_is_audited_when_asked(self, agent: AgentFiles) -> None:
        """At 80% the skip rule does not apply even though the trigger has not fired."""
        ledger_entry(agent, NOW - timedelta(days=2), 62, 31)
        write_store(agent.memory_path, [CANARY, "y" * 1700])
        assert not needs_audit(agent, AuditSettings(), NOW)[0]
        report = audit_agent(agent, AuditSettings(dry_run=True), NOW)
        assert report.status is AuditStatus.DRY_RUN

    def test_missing_directory_is_an_error_report(self, tmp_path: Path) -> None:
        """Auditing an agent whose directory is missing returns ERROR with the path."""
        report = audit_agent(AgentFiles("ghost", tmp_path / "nope"), AuditSettings(), NOW)
        assert report.status is AuditStatus.ERROR
        assert "nope" in report.reason


class TestUnreadableFiles:
    """File problems become a due audit that reports ERROR, never an exception in the daemon."""

    def test_unreadable_ledger(self, agent: AgentFiles) -> None:
        """A ledger path that cannot be read makes the audit due and the audit an ERROR report."""
        agent.ledger_path.mkdir()
        due, reason = needs_audit(agent, AuditSettings(), NOW)
        assert due and reason.startswith("cannot read the agent's files")
        report = audit_agent(agent, AuditSettings(), NOW)
        assert report.status is AuditStatus.ERROR
        assert "MEMORY_AUDIT_LEDGER.md" in report.reason
