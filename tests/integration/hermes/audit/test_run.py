"""The memory audit on real agent directories, real HTTP servers on 127.0.0.1 and real files."""

from __future__ import annotations

import hashlib
import http.server
import os
import socket
import sys
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import structlog

from dreamer.hermes.audit.ledger import parse_ledger
from dreamer.hermes.audit.report import AuditReport, AuditStatus
from dreamer.hermes.audit.run import audit_agent
from dreamer.hermes.audit.settings import AgentFiles, AuditSettings
from dreamer.hermes.audit.trigger import needs_audit

NOW = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)
CANARY = "CANARY: Do not modify this line"
#: The tests' servers listen on 127.0.0.1, the one host whose URLs these audits may check.
FAST = AuditSettings(url_timeout_s=1.0, verify_hosts=("127.0.0.1",))


# --- fixtures ---------------------------------------------------------------------------------


def write_store(path: Path, entries: list[str]) -> None:
    path.write_text("\n§\n".join(entries), encoding="utf-8")


def read_store(path: Path) -> list[str]:
    return [e.strip() for e in path.read_text(encoding="utf-8").split("\n§\n") if e.strip()]


def make_agent(
    root: Path,
    name: str,
    memory: list[str],
    user: list[str],
    *,
    registered: bool = True,
    config: str | None = "model:\n  default: anthropic/claude-opus-4.6\n  provider: auto\n",
    skills: bool = True,
) -> AgentFiles:
    home = root / name
    memories = home / "memories"
    memories.mkdir(parents=True)
    write_store(memories / "MEMORY.md", memory)
    write_store(memories / "USER.md", user)
    if registered:
        (memories / "MEMORY_WRITERS.md").write_text(
            "# Writers\n- hermes\n- dreamer: audit\n", encoding="utf-8"
        )
    config_path = None
    if config is not None:
        config_path = home / "config.yaml"
        config_path.write_text(config, encoding="utf-8")
    skills_dir = None
    if skills:
        skills_dir = home / "skills"
        skills_dir.mkdir()
    return AgentFiles(name, memories, config_path, skills_dir)


def snapshot_tree(root: Path) -> dict[str, str]:
    """Every file under root with the hash of its bytes."""
    return {
        str(path.relative_to(root)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


class _Quiet(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b"ok"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_HEAD(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def http_url() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


def action_kinds(report: AuditReport) -> list[tuple[str, str, str]]:
    return [(a.kind, a.file, a.outcome) for a in report.actions]


# --- tests ------------------------------------------------------------------------------------


class TestEveryAction:
    """One audit applying each kind of action to a realistic agent directory."""

    def test_full_audit(self, tmp_path: Path, http_url: str) -> None:
        """Deletes, moves, skill move, dedup, marks, model correction: files, skill and report agree."""
        dead = f"http://127.0.0.1:{closed_port()}/v1"
        memory = [
            CANARY,
            "Session note: we just fixed the flaky login test in this session.",
            "Verbal offer from Acme, deal pending (2025-02-01).",
            "As of 2025-01-10 the repo had 1,204 stars.",
            "User's name is Ada Lovelace; she lives in London.",
            "Always run pytest before committing; never push to main.",
            f"Inference endpoint: {dead}",
            f"Embedding endpoint: {http_url}",
            "Default model: gpt-4o",
            "The project is written in Rust.",
        ]
        user = [
            CANARY,
            "User prefers concise answers without emoji.",
            "Staging DSN lives in ~/.config/app/db.env",
            "the project is written in rust.",
        ]
        agent = make_agent(tmp_path, "mumuni", memory, user)

        report = audit_agent(agent, FAST, NOW)

        assert report.status is AuditStatus.COMPLETE, report.to_json()
        assert report.counts == {
            "deletions": 4,
            "moves": 3,
            "corrections": 1,
            "unverified": 1,
            "reverified": 0,
            "compressions": 0,
        }
        assert all(a.outcome == "applied" for a in report.actions)
        assert read_store(agent.memory_path) == [
            CANARY,
            f"Inference endpoint: {dead} [UNVERIFIED]",
            f"Embedding endpoint: {http_url}",
            "Default model: anthropic/claude-opus-4.6",
            "The project is written in Rust.",
            "Staging DSN lives in ~/.config/app/db.env",
        ]
        assert read_store(agent.user_path) == [
            CANARY,
            "User prefers concise answers without emoji.",
            "User's name is Ada Lovelace; she lives in London.",
        ]
        assert agent.rules_skill_path is not None
        assert (
            "- Always run pytest before committing; never push to main.\n"
            in agent.rules_skill_path.read_text(encoding="utf-8")
        )
        assert report.canary_intact is True
        assert report.utilisation_after is not None and report.utilisation_before is not None
        assert report.utilisation_after.memory_chars < report.utilisation_before.memory_chars
        assert report.unresolved == ()

    def test_report_json_has_the_contract_fields(self, tmp_path: Path) -> None:
        """The JSON report names status, utilisation before/after, counts, unresolved and drift alerts."""
        agent = make_agent(tmp_path, "tanko", [CANARY, "Session note: this session was short."], [CANARY])
        data = __import__("json").loads(audit_agent(agent, FAST, NOW).to_json())
        assert data["status"] == "COMPLETE"
        assert data["utilisation_before"]["memory_chars"] > data["utilisation_after"]["memory_chars"]
        assert data["counts"]["deletions"] == 1
        assert data["unresolved"] == [] and data["drift_alerts"] == []
        assert data["ledger_updated"] is True

    def test_temporary_state_ages_from_first_sighting(self, tmp_path: Path) -> None:
        """An undated pending deal survives its first audit and is deleted 15 days later."""
        pending = "Verbal offer from Acme, deal pending."
        agent = make_agent(tmp_path, "koby", [CANARY, pending], [CANARY])
        first = audit_agent(agent, FAST, NOW)
        assert first.counts["deletions"] == 0
        assert pending in read_store(agent.memory_path)
        assert agent.state_path.exists()

        later = audit_agent(agent, FAST, NOW + timedelta(days=15))
        assert later.status is AuditStatus.COMPLETE
        assert later.actions[0].reason == "Temporary State, 15 days old (first seen 2025-03-01)"
        assert pending not in read_store(agent.memory_path)

    def test_move_into_a_full_file_keeps_the_entry(self, tmp_path: Path) -> None:
        """An identity entry that does not fit in USER.md stays in MEMORY.md and is unresolved."""
        identity = "User's name is Ada Lovelace; she lives in London."
        agent = make_agent(tmp_path, "koonimo", [CANARY, identity], [CANARY, "u" * 1300])
        report = audit_agent(agent, FAST, NOW)
        assert report.counts["moves"] == 0
        assert identity in read_store(agent.memory_path)
        assert identity not in read_store(agent.user_path)
        assert "move to USER.md not possible" in report.unresolved[0].reason

    def test_low_confidence_entry_is_never_deleted(self, tmp_path: Path) -> None:
        """An ambiguous entry stays in place and is listed as unresolved with the reason."""
        ambiguous = "User prefers that you always answer in French."
        agent = make_agent(tmp_path, "mumuni", [CANARY, ambiguous], [CANARY, ambiguous])
        report = audit_agent(agent, FAST, NOW)
        assert ambiguous in read_store(agent.memory_path) and ambiguous in read_store(agent.user_path)
        assert [u.file for u in report.unresolved] == ["MEMORY.md", "USER.md"]
        assert all("uncertain" in u.reason for u in report.unresolved)

    def test_scalar_model_config_is_read(self, tmp_path: Path) -> None:
        """'model: name' at the top of config.yaml is the value model entries are corrected to."""
        agent = make_agent(
            tmp_path, "tanko", [CANARY, "Chat model: llama3"], [CANARY], config="model: qwen3:32b # local\n"
        )
        audit_agent(agent, FAST, NOW)
        assert "Chat model: qwen3:32b" in read_store(agent.memory_path)

    def test_external_edit_blocks_that_file_only(self, tmp_path: Path) -> None:
        """A hand-edited USER.md is backed up and left alone; MEMORY.md is still cleaned."""
        agent = make_agent(tmp_path, "koby", [CANARY, "Session note: this session was long."], [CANARY])
        raw_user = f"{CANARY}\n\n§\n\nSession note: in this session we chatted.\n"
        agent.user_path.write_text(raw_user, encoding="utf-8")
        report = audit_agent(agent, FAST, NOW)
        assert read_store(agent.memory_path) == [CANARY]
        assert agent.user_path.read_text(encoding="utf-8") == raw_user
        backups = list(agent.memories_dir.glob("USER.md.bak.*"))
        assert len(backups) == 1 and backups[0].read_text(encoding="utf-8") == raw_user
        assert any("not written through the memory store" in u.reason for u in report.unresolved)


class TestCanaries:
    """A missing canary stops everything; a present one survives unchanged."""

    @pytest.mark.parametrize("broken", ["MEMORY.md", "USER.md"])
    def test_missing_canary_is_critical_and_changes_nothing(self, tmp_path: Path, broken: str) -> None:
        """Without the canary line in either file: CRITICAL, an error log, and not one byte changed."""
        memory = [CANARY, "Session note: this session was long."]
        user = [CANARY, "User prefers tea."]
        if broken == "MEMORY.md":
            memory = memory[1:]
        else:
            user = user[1:]
        agent = make_agent(tmp_path, "mumuni", memory, user)
        before = snapshot_tree(tmp_path)
        with structlog.testing.capture_logs() as logs:
            report = audit_agent(agent, FAST, NOW)
        assert report.status is AuditStatus.CRITICAL
        assert "CANARY BREACH" in report.reason and broken in report.reason
        assert report.canaries[broken] is False
        assert {k: v for k, v in snapshot_tree(tmp_path).items() if not k.endswith(".lock")} == before
        assert not agent.ledger_path.exists()
        assert [log["event"] for log in logs if log["log_level"] == "error"] == ["hermes_audit_canary_breach"]

    def test_canary_lines_survive_unchanged(self, tmp_path: Path) -> None:
        """Canary entries, even one that reads like a session note, are byte-identical afterwards."""
        memory_canary = f"Session note: {CANARY} (mumuni)"
        agent = make_agent(tmp_path, "mumuni", [memory_canary, "Session note: this session."], [CANARY])
        report = audit_agent(agent, FAST, NOW)
        assert report.canary_intact is True
        assert read_store(agent.memory_path) == [memory_canary]
        assert read_store(agent.user_path) == [CANARY]


class TestDryRun:
    """A dry run plans everything and changes nothing."""

    def test_dry_run_changes_no_file(self, tmp_path: Path) -> None:
        """Every file under the agent's home hashes the same afterwards and no file appears."""
        agent = make_agent(
            tmp_path,
            "koonimo",
            [CANARY, "Session note: this session.", "User's name is Ada.", "Default model: gpt-4o"],
            [CANARY, "Staging DSN lives in ~/.config/app/db.env"],
        )
        before = snapshot_tree(tmp_path)
        report = audit_agent(agent, AuditSettings(dry_run=True), NOW)
        assert snapshot_tree(tmp_path) == before
        assert report.status is AuditStatus.DRY_RUN and report.dry_run
        assert {a.outcome for a in report.actions} == {"planned"}
        assert report.counts == {
            "deletions": 1,
            "moves": 2,
            "corrections": 1,
            "unverified": 0,
            "reverified": 0,
            "compressions": 0,
        }
        assert not report.ledger_updated


class TestWriterRegistry:
    """Changes are applied only when Dreamer is a registered writer for the agent."""

    def test_unregistered_writer_runs_as_dry_run(self, tmp_path: Path) -> None:
        """Without a registry entry the memory files stay as they are and the report says why."""
        agent = make_agent(
            tmp_path, "tanko", [CANARY, "Session note: this session."], [CANARY], registered=False
        )
        memory_before = agent.memory_path.read_bytes()
        report = audit_agent(agent, FAST, NOW)
        assert report.status is AuditStatus.DRY_RUN
        assert report.writer_registered is False
        assert "MEMORY_WRITERS.md does not exist" in report.reason
        assert agent.memory_path.read_bytes() == memory_before
        (entry,) = parse_ledger(agent.ledger_path.read_text(encoding="utf-8"))
        assert entry.status == "DRY_RUN" and entry.fields["writer_registered"] == "false"
        assert not needs_audit(agent, FAST, NOW + timedelta(days=1))[0]

    def test_a_fifo_registry_is_an_error_not_a_hang(self, tmp_path: Path) -> None:
        """A FIFO at MEMORY_WRITERS.md (which would block the audit job for ever) ends the audit
        in error naming the file; the memory files stay as they are."""
        agent = make_agent(
            tmp_path, "tanko", [CANARY, "Session note: this session."], [CANARY], registered=False
        )
        os.mkfifo(agent.writers_path)
        memory_before = agent.memory_path.read_bytes()
        report = audit_agent(agent, FAST, NOW)
        assert report.status is AuditStatus.ERROR
        assert "MEMORY_WRITERS.md" in report.reason and "not a regular file" in report.reason
        assert agent.memory_path.read_bytes() == memory_before

    def test_registry_without_dreamer(self, tmp_path: Path) -> None:
        """A registry that lists other writers only also forces a dry run."""
        agent = make_agent(
            tmp_path, "tanko", [CANARY, "Session note: this session."], [CANARY], registered=False
        )
        agent.writers_path.write_text("- hermes\n- ~~dreamer~~\n", encoding="utf-8")
        report = audit_agent(agent, FAST, NOW)
        assert report.status is AuditStatus.DRY_RUN
        assert "dreamer is not registered in MEMORY_WRITERS.md" in report.reason


class TestLedger:
    """One ledger block per audit, appended, never rewritten; drift read from the previous block."""

    def test_append_only_across_audits(self, tmp_path: Path) -> None:
        """A second audit leaves every earlier byte of the ledger as it was and adds one block."""
        agent = make_agent(tmp_path, "koby", [CANARY, "Session note: this session."], [CANARY])
        audit_agent(agent, FAST, NOW)
        first = agent.ledger_path.read_bytes()
        write_store(agent.memory_path, [CANARY, "Session note: in this session again."])
        audit_agent(agent, AuditSettings(force=True, url_timeout_s=1.0), NOW + timedelta(days=1))
        second = agent.ledger_path.read_bytes()
        assert second.startswith(first) and len(second) > len(first)
        entries = parse_ledger(second.decode("utf-8"))
        assert [e.timestamp for e in entries] == [NOW, NOW + timedelta(days=1)]
        assert entries[0].fields["deletions"] == "1"
        assert "Session note" not in agent.memory_path.read_text(encoding="utf-8")

    def test_summary_goes_to_the_ledger_not_the_memory_files(self, tmp_path: Path) -> None:
        """The action summary is in the ledger and no summary entry is added to MEMORY.md or USER.md."""
        agent = make_agent(tmp_path, "koby", [CANARY, "Session note: this session."], [CANARY])
        audit_agent(agent, FAST, NOW)
        assert "- action: DELETE MEMORY.md [applied]" in agent.ledger_path.read_text(encoding="utf-8")
        assert read_store(agent.memory_path) == [CANARY] and read_store(agent.user_path) == [CANARY]

    def test_drift_alerts_from_previous_block(self, tmp_path: Path) -> None:
        """An audit 30 days after one that left MEMORY.md above 70% raises gap and capacity alerts."""
        agent = make_agent(tmp_path, "koby", [CANARY, "Fact number one. " + "x" * 1600], [CANARY])
        audit_agent(agent, FAST, NOW)
        report = audit_agent(agent, FAST, NOW + timedelta(days=30))
        assert [alert.split(" —")[0] for alert in report.drift_alerts] == [
            "ALERT: Audit gap",
            "ALERT: Previous audit failed to reduce MEMORY.md below 70% (left it at 75.0%)",
        ]
        block = parse_ledger(agent.ledger_path.read_text(encoding="utf-8"))[-1]
        assert block.fields["drift_alerts"] == "2"


class TestUrlVerification:
    """Technical configs are checked against the live URL with a short timeout."""

    def test_closed_port_is_marked_not_deleted(self, tmp_path: Path) -> None:
        """A connection refused on 127.0.0.1 marks the entry [UNVERIFIED] and keeps it."""
        url = f"http://127.0.0.1:{closed_port()}/health"
        agent = make_agent(tmp_path, "mumuni", [CANARY, f"Search API endpoint: {url}"], [CANARY])
        report = audit_agent(agent, FAST, NOW)
        assert read_store(agent.memory_path) == [CANARY, f"Search API endpoint: {url} [UNVERIFIED]"]
        assert report.counts["unverified"] == 1 and report.counts["deletions"] == 0

    def test_answering_server_is_verified(self, tmp_path: Path, http_url: str) -> None:
        """A local server that answers leaves the entry unmarked."""
        agent = make_agent(tmp_path, "mumuni", [CANARY, f"Search API endpoint: {http_url}"], [CANARY])
        report = audit_agent(agent, FAST, NOW)
        assert read_store(agent.memory_path) == [CANARY, f"Search API endpoint: {http_url}"]
        assert report.counts["unverified"] == 0

    def test_mark_is_cleared_when_the_server_answers_again(self, tmp_path: Path, http_url: str) -> None:
        """An entry marked earlier loses [UNVERIFIED] once its URL answers."""
        agent = make_agent(
            tmp_path, "mumuni", [CANARY, f"Search API endpoint: {http_url} [UNVERIFIED]"], [CANARY]
        )
        report = audit_agent(agent, FAST, NOW)
        assert read_store(agent.memory_path) == [CANARY, f"Search API endpoint: {http_url}"]
        assert report.counts["reverified"] == 1

    def test_silent_server_times_out_and_is_marked(self, tmp_path: Path) -> None:
        """A port that accepts connections but never answers counts as not answering."""
        with socket.socket() as silent:
            silent.bind(("127.0.0.1", 0))
            silent.listen(8)
            url = f"http://127.0.0.1:{silent.getsockname()[1]}/v1"
            agent = make_agent(tmp_path, "mumuni", [CANARY, f"Search API endpoint: {url}"], [CANARY])
            report = audit_agent(agent, AuditSettings(url_timeout_s=0.2, verify_hosts=("127.0.0.1",)), NOW)
        assert report.counts["unverified"] == 1


_OPENED: list[str] = []
_WATCHED: list[str] = []
_PATH_EVENTS = {
    "open",
    "os.listdir",
    "os.scandir",
    "os.rename",
    "os.replace",
    "os.remove",
    "os.rmdir",
    "os.mkdir",
    "os.chmod",
    "os.utime",
    "os.truncate",
}


def _record_paths(event: str, args: tuple[object, ...]) -> None:
    if not _WATCHED or event not in _PATH_EVENTS:
        return
    for arg in args:
        if isinstance(arg, str | bytes | os.PathLike):
            path = os.path.abspath(os.fsdecode(arg))
            if any(path == root or path.startswith(root + os.sep) for root in _WATCHED):
                _OPENED.append(f"{event} {path}")


sys.addaudithook(_record_paths)


class TestIsolation:
    """Auditing one agent never reads or writes a file of another."""

    def test_auditing_a_touches_nothing_of_b(self, tmp_path: Path) -> None:
        """Every open/list/rename during A's audit is recorded: none is under B's home, B is unchanged."""
        a = make_agent(
            tmp_path, "mumuni", [CANARY, "Session note: this session.", "User's name is Ada."], [CANARY]
        )
        b = make_agent(tmp_path, "tanko", [CANARY, "Session note: this session."], [CANARY])
        b_home = b.memories_dir.parent
        before = snapshot_tree(b_home)
        mtimes = {p: p.stat().st_mtime_ns for p in b_home.rglob("*")}
        _OPENED.clear()
        _WATCHED.append(str(b_home))
        try:
            report = audit_agent(a, FAST, NOW)
        finally:
            _WATCHED.clear()
        assert report.status is AuditStatus.COMPLETE
        assert report.counts["deletions"] == 1 and report.counts["moves"] == 1
        assert _OPENED == []
        assert snapshot_tree(b_home) == before
        assert {p: p.stat().st_mtime_ns for p in b_home.rglob("*")} == mtimes

    def test_the_hook_sees_an_audit_of_b(self, tmp_path: Path) -> None:
        """The recorder does catch B's files when B itself is audited (so the test above can fail)."""
        b = make_agent(tmp_path, "tanko", [CANARY, "Session note: this session."], [CANARY])
        _OPENED.clear()
        _WATCHED.append(str(b.memories_dir.parent))
        try:
            audit_agent(b, FAST, NOW)
        finally:
            _WATCHED.clear()
        # MEMORY.md is opened relative to its folder, held open (disk.py): the hook sees the folder.
        assert f"open {b.memories_dir}" in _OPENED
        assert any(event.endswith("MEMORY.md.lock") for event in _OPENED)
