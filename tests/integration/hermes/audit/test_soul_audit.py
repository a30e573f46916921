"""SOUL.md in the memory audit, on real Hermes-shaped homes: stale or fresh, moves in both directions,
dry runs, and a SOUL.md that is missing, unreadable or a symbolic link."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

from dreamer.hermes.audit.ledger import parse_ledger
from dreamer.hermes.audit.report import AuditStatus
from dreamer.hermes.audit.run import audit_agent
from dreamer.hermes.audit.settings import AgentFiles, AuditSettings

NOW = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)
CANARY = "CANARY: Do not modify this line"
FORCED = AuditSettings(force=True, url_timeout_s=0.5)
DEFAULT_SOUL = "# Hermes\n\nYou are Hermes, a helpful assistant.\n\nBe concise and kind.\n"
KOBY_SOUL = (
    "# Koby\n\nYou are Koby, the homelab agent: terse, precise, a seasoned sysadmin.\n\n"
    "- Always run `zpool status` on nas01 before touching /mnt/tank.\n"
    "- The Grafana endpoint is http://grafana.lan:3000 on host 192.168.1.30.\n"
)
PERSONA = "Your name is Koby and your tone is dry and to the point."
FACT = "The NAS nas01 holds the ZFS pool tank with 4 disks."


def hermes_home(root: Path, memory: list[str] | None = None, soul: str | None = KOBY_SOUL) -> AgentFiles:
    """~/.hermes with a default SOUL.md and the profile koby under profiles/, as Hermes lays it out."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "SOUL.md").write_text(DEFAULT_SOUL, encoding="utf-8")
    home = root / "profiles" / "koby"
    memories = home / "memories"
    memories.mkdir(parents=True)
    (memories / "MEMORY.md").write_text("\n§\n".join(memory or [CANARY, FACT]), encoding="utf-8")
    (memories / "USER.md").write_text(CANARY, encoding="utf-8")
    (memories / "MEMORY_WRITERS.md").write_text("- dreamer\n", encoding="utf-8")
    (home / "config.yaml").write_text("model:\n  default: qwen3\n", encoding="utf-8")
    if soul is not None:
        (home / "SOUL.md").write_text(soul, encoding="utf-8")
    return AgentFiles(
        "koby", memories, home / "config.yaml", soul_path=home / "SOUL.md", default_soul_path=root / "SOUL.md"
    )


def set_age(path: Path, days_before: int) -> None:
    stamp = (NOW - timedelta(days=days_before)).timestamp()
    os.utime(path, (stamp, stamp), follow_symlinks=False)


def tree(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.is_symlink()
    }


class TestStale:
    def test_a_copy_of_the_default_profiles_soul_is_stale(self, tmp_path: Path) -> None:
        """A profile whose SOUL.md is the default's text (whitespace aside) gets a warning naming it."""
        agent = hermes_home(tmp_path, soul=DEFAULT_SOUL.replace("\n\n", "\n\n\n"))
        report = audit_agent(agent, FORCED, NOW)
        assert report.soul is not None and report.soul["state"] == "stale"
        assert any("identical to the default profile's SOUL.md" in w for w in report.warnings)
        block = parse_ledger(agent.ledger_path.read_text(encoding="utf-8"))[-1]
        assert block.fields["soul"] == "stale"

    def test_a_link_to_the_default_profiles_soul_is_stale(self, tmp_path: Path) -> None:
        """A SOUL.md that is a symbolic link to the default one is stale, and the link is left alone."""
        agent = hermes_home(tmp_path, soul=None)
        assert agent.soul_path is not None
        agent.soul_path.symlink_to(tmp_path / "SOUL.md")
        report = audit_agent(agent, FORCED, NOW)
        assert report.soul is not None and report.soul["state"] == "stale"
        assert any("link to the default profile's SOUL.md" in w for w in report.warnings)
        assert agent.soul_path.is_symlink()
        assert (tmp_path / "SOUL.md").read_text(encoding="utf-8") == DEFAULT_SOUL

    def test_a_soul_older_than_config_and_memory_is_stale(self, tmp_path: Path) -> None:
        """SOUL.md 90 days older than both config.yaml and the memory files is stale, with the ages."""
        agent = hermes_home(tmp_path)
        assert agent.soul_path is not None and agent.config_yaml is not None
        set_age(agent.soul_path, 100)
        for path in (agent.config_yaml, agent.memory_path, agent.user_path):
            set_age(path, 10)
        report = audit_agent(agent, AuditSettings(force=True, dry_run=True), NOW)
        assert report.soul is not None and report.soul["state"] == "stale"
        (warning,) = [w for w in report.warnings if "SOUL.md" in w]
        assert "90 days before config.yaml" in warning and "90 days before the memory files" in warning

    def test_a_personal_recent_soul_is_fresh(self, tmp_path: Path) -> None:
        """A SOUL.md of its own, older than the memory files but newer than config.yaml, is fresh:
        no warning."""
        agent = hermes_home(tmp_path)
        assert agent.soul_path is not None and agent.config_yaml is not None
        set_age(agent.config_yaml, 200)
        set_age(agent.soul_path, 100)
        report = audit_agent(agent, AuditSettings(force=True, dry_run=True), NOW)
        assert report.soul is not None and report.soul["state"] == "fresh"
        assert not any("SOUL.md" in w for w in report.warnings)


class TestMoves:
    def test_persona_moves_to_soul_and_config_moves_out_rules_stay(self, tmp_path: Path) -> None:
        """A persona entry in MEMORY.md moves into SOUL.md; SOUL.md's technical config (host, URL)
        moves to MEMORY.md; its operating rule and persona paragraph stay where they are."""
        agent = hermes_home(tmp_path, memory=[CANARY, FACT, PERSONA])
        assert agent.soul_path is not None
        report = audit_agent(agent, FORCED, NOW)
        assert report.status is AuditStatus.COMPLETE, report.to_json()
        moves = {(a.file, a.destination, a.outcome) for a in report.actions if a.kind == "MOVE"}
        assert moves == {("MEMORY.md", "SOUL.md", "applied"), ("SOUL.md", "MEMORY.md", "applied")}
        soul = agent.soul_path.read_text(encoding="utf-8")
        memory = agent.memory_path.read_text(encoding="utf-8")
        assert PERSONA in soul and PERSONA not in memory
        assert "grafana.lan:3000" in memory and "grafana.lan:3000" not in soul
        assert "- Always run `zpool status` on nas01 before touching /mnt/tank." in soul
        assert "You are Koby, the homelab agent" in soul and "# Koby" in soul
        assert report.counts["moves"] == 2

    def test_dry_run_shows_the_moves_and_changes_nothing(self, tmp_path: Path) -> None:
        """A requested dry run lists both planned moves and writes no file at all."""
        agent = hermes_home(tmp_path, memory=[CANARY, FACT, PERSONA])
        before = tree(tmp_path)
        report = audit_agent(agent, AuditSettings(force=True, dry_run=True), NOW)
        moves = [a for a in report.actions if a.kind == "MOVE"]
        planned = {(a.file, a.destination) for a in moves if a.outcome == "planned"}
        assert planned == {("MEMORY.md", "SOUL.md"), ("SOUL.md", "MEMORY.md")}
        assert tree(tmp_path) == before

    def test_a_soul_block_changed_since_reading_is_not_lost(self, tmp_path: Path) -> None:
        """When SOUL.md's block cannot be removed (it changed meanwhile), the copy added to MEMORY.md
        is taken back: the block is in exactly one file."""
        from dreamer.hermes.audit.soul import SoulBlock, SoulMove
        from dreamer.hermes.audit.soul_audit import apply_soul_moves
        from dreamer.hermes.memory.store import MemoryStore

        agent = hermes_home(tmp_path)
        assert agent.soul_path is not None
        move = SoulMove(SoulBlock("Grafana is at http://grafana.lan:3000.", "- Grafana is at gone"), "config")
        (record,) = apply_soul_moves([move], MemoryStore(agent.memories_dir), agent.soul_path)
        assert record.outcome == "skipped" and "no longer in" in record.detail
        assert "grafana.lan:3000" not in agent.memory_path.read_text(encoding="utf-8")


class TestBrokenSoul:
    def test_a_missing_soul_is_reported_and_persona_stays(self, tmp_path: Path) -> None:
        """No SOUL.md: a note says so, the persona entry stays in MEMORY.md as unresolved with the
        reason, and no SOUL.md is created."""
        agent = hermes_home(tmp_path, memory=[CANARY, FACT, PERSONA], soul=None)
        assert agent.soul_path is not None
        report = audit_agent(agent, FORCED, NOW)
        assert report.soul is not None and report.soul["state"] == "missing"
        assert any("SOUL.md not audited" in n and "does not exist" in n for n in report.notes)
        assert any(u.entry == PERSONA and "cannot move to SOUL.md" in u.reason for u in report.unresolved)
        assert PERSONA in agent.memory_path.read_text(encoding="utf-8")
        assert not agent.soul_path.exists()

    def test_an_unreadable_soul_is_reported_and_left_as_it_is(self, tmp_path: Path) -> None:
        """A SOUL.md that is not UTF-8 is reported unreadable; its bytes and the persona entry stay."""
        agent = hermes_home(tmp_path, memory=[CANARY, FACT, PERSONA], soul=None)
        assert agent.soul_path is not None
        agent.soul_path.write_bytes(b"You are \xff\xfe Koby")
        report = audit_agent(agent, FORCED, NOW)
        assert report.soul is not None and report.soul["state"] == "unreadable"
        assert any("cannot read" in n for n in report.notes)
        assert agent.soul_path.read_bytes() == b"You are \xff\xfe Koby"
        assert PERSONA in agent.memory_path.read_text(encoding="utf-8")

    def test_a_fifo_or_device_soul_is_unreadable_not_a_hang(self, tmp_path: Path) -> None:
        """A FIFO at SOUL.md (which would block the audit job for ever) or a link to /dev/zero
        (read without end) is reported unreadable; the persona entry stays in MEMORY.md."""
        for kind in ("fifo", "device"):
            agent = hermes_home(tmp_path / kind, memory=[CANARY, FACT, PERSONA], soul=None)
            assert agent.soul_path is not None
            if kind == "fifo":
                os.mkfifo(agent.soul_path)
            else:
                agent.soul_path.symlink_to("/dev/zero")
            report = audit_agent(agent, FORCED, NOW)
            assert report.soul is not None and report.soul["state"] == "unreadable", report.soul
            assert any("not a regular file" in n for n in report.notes), report.notes
            assert PERSONA in agent.memory_path.read_text(encoding="utf-8")

    def test_a_symlinked_soul_is_read_but_never_written(self, tmp_path: Path) -> None:
        """A SOUL.md linking outside the profile is judged, but neither moves into nor out of it are
        made; the link and its target stay byte for byte, the reason is reported."""
        agent = hermes_home(tmp_path, memory=[CANARY, FACT, PERSONA], soul=None)
        assert agent.soul_path is not None
        target = tmp_path / "elsewhere-SOUL.md"
        target.write_text(KOBY_SOUL, encoding="utf-8")
        agent.soul_path.symlink_to(target)
        report = audit_agent(agent, FORCED, NOW)
        assert report.soul is not None and "symbolic link" in (report.soul["not_writable_because"] or "")
        assert any(u.entry == PERSONA and "symbolic link" in u.reason for u in report.unresolved)
        assert target.read_text(encoding="utf-8") == KOBY_SOUL and agent.soul_path.is_symlink()
        assert "grafana.lan:3000" not in agent.memory_path.read_text(encoding="utf-8")


class TestCommand:
    def test_dreamer_audit_finds_the_profiles_soul_and_the_default(self, tmp_path: Path) -> None:
        """`dreamer audit --dry-run --force --json` on a config naming only memories_dir finds the
        profile's SOUL.md beside it and compares it with ~/.hermes/SOUL.md."""
        from tests.support.configs import config_data, write_toml

        agent = hermes_home(tmp_path / "hermes", soul=DEFAULT_SOUL)
        agents = {"koby": {"memories_dir": str(agent.memories_dir)}}
        write_toml(tmp_path / "config.toml", config_data(agents=agents))
        env = {**os.environ, "DREAMER_CONFIG": str(tmp_path / "config.toml")}
        env.pop("NOTIFY_SOCKET", None)
        done = subprocess.run(
            [sys.executable, "-m", "dreamer", "audit", "--dry-run", "--force", "--json"],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        soul = json.loads(done.stdout)["agents"]["koby"]["soul"]
        assert soul["state"] == "stale" and soul["path"] == str(agent.soul_path)
