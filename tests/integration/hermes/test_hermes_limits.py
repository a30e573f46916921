"""The limits in an agent's Hermes config.yaml bind the audit and `dreamer memory`; the command's options."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from dreamer.hermes.audit.report import AuditStatus
from dreamer.hermes.audit.run import audit_agent
from dreamer.hermes.audit.settings import AgentFiles, AuditSettings
from dreamer.hermes.memory.disk import MAX_MEMORY_FILE_BYTES

REPO = Path(__file__).resolve().parents[3]
NOW = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)
CANARY = "CANARY: Do not modify this line"
IDENTITY = "User's name is Ada Lovelace; she lives in London."  # the audit moves it to USER.md
FAST = AuditSettings(url_timeout_s=1.0)


def agent_home(root: Path, config: str | None, *, configured: bool = True) -> AgentFiles:
    """An agent whose MEMORY.md holds an identity entry the audit moves to USER.md (30 chars used)."""
    memories = root / "memories"
    memories.mkdir(parents=True)
    (memories / "MEMORY.md").write_text(f"{CANARY}\n§\n{IDENTITY}", encoding="utf-8")
    (memories / "USER.md").write_text(CANARY, encoding="utf-8")
    (memories / "MEMORY_WRITERS.md").write_text("# Writers\n- hermes\n- dreamer: audit\n", encoding="utf-8")
    config_path = root / "config.yaml"
    if config is not None:
        config_path.write_text(config, encoding="utf-8")
    return AgentFiles("ada", memories, config_path if configured else None, None)


def user_entries(agent: AgentFiles) -> list[str]:
    return [e.strip() for e in agent.user_path.read_text(encoding="utf-8").split("\n§\n") if e.strip()]


class TestAuditHonoursConfigLimits:
    """The audit never fills a file past the limit the agent's config.yaml sets."""

    def test_without_a_lower_limit_the_entry_moves(self, tmp_path: Path) -> None:
        """Control: under Hermes' default 1,375 the identity entry moves to USER.md."""
        agent = agent_home(tmp_path, "model: x\n")
        report = audit_agent(agent, FAST, NOW)
        assert report.status is AuditStatus.COMPLETE, report.to_json()
        assert IDENTITY in user_entries(agent)

    @pytest.mark.parametrize("configured", [True, False], ids=["config_yaml-set", "hermes-layout"])
    def test_a_lower_user_limit_keeps_the_move_out(self, tmp_path: Path, configured: bool) -> None:
        """user_char_limit: 60 (30 used; the move needs 82): USER.md stays within 60 and the entry
        stays in MEMORY.md; found through agents.*.config_yaml or next to the memories folder."""
        config = "model: x\nmemory:\n  memory_enabled: true\n  user_char_limit: 60\n"
        agent = agent_home(tmp_path, config, configured=configured)
        report = audit_agent(agent, FAST, NOW)
        assert report.status is AuditStatus.COMPLETE, report.to_json()
        assert user_entries(agent) == [CANARY]
        assert IDENTITY in agent.memory_path.read_text(encoding="utf-8")
        assert report.to_dict()["utilisation_after"]["user_limit"] == 60  # type: ignore[index]

    def test_an_invalid_limit_is_an_error_and_nothing_changes(self, tmp_path: Path) -> None:
        """user_char_limit: lots: ERROR naming the file and key; both files are byte-for-byte as before."""
        agent = agent_home(tmp_path, "memory:\n  user_char_limit: lots\n")
        before = agent.memory_path.read_bytes(), agent.user_path.read_bytes()
        report = audit_agent(agent, FAST, NOW)
        assert report.status is AuditStatus.ERROR
        assert "config.yaml: memory.user_char_limit" in report.reason
        assert (agent.memory_path.read_bytes(), agent.user_path.read_bytes()) == before


def dreamer(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    config = tmp / "dreamer.toml"
    if not config.exists():
        config.write_text(f'[agents.ada]\nmemories_dir = "{tmp / "memories"}"\n', encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-m", "dreamer", "--config", str(config), "memory", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.slow
class TestMemoryCommand:
    """`dreamer memory` list --json, stats, options on either side of the text, config errors."""

    def test_options_before_or_after_the_text(self, tmp_path: Path) -> None:
        """The text may come first, last, or after `--` when it starts with a dash."""
        (tmp_path / "memories").mkdir()
        assert dreamer(tmp_path, "add", "First entry.", "--agent", "ada", "--target", "user").returncode == 0
        assert dreamer(tmp_path, "add", "--agent", "ada", "--target", "user", "Second entry.").returncode == 0
        dashed = dreamer(tmp_path, "--agent", "ada", "add", "--target", "user", "--", "-5 C offset.")
        assert dashed.returncode == 0, dashed.stderr
        proc = dreamer(tmp_path, "list", "--json", "--agent", "ada", "--target", "user")
        assert proc.returncode == 0, proc.stderr
        doc = json.loads(proc.stdout)
        assert doc["entries"] == ["First entry.", "Second entry.", "-5 C offset."]
        assert (doc["target"], doc["limit"], doc["over_limit"]) == ("user", 1375, False)
        assert doc["chars"] == len("\n§\n".join(doc["entries"]))

    def test_stats_warns_outside_the_output_when_over_the_limit(self, tmp_path: Path) -> None:
        """A file over its config.yaml limit: stats prints the usage, the warning goes to stderr."""
        (tmp_path / "memories").mkdir()
        (tmp_path / "memories" / "MEMORY.md").write_text("x" * 120, encoding="utf-8")
        (tmp_path / "config.yaml").write_text("memory:\n  memory_char_limit: '100'\n", encoding="utf-8")
        proc = dreamer(tmp_path, "stats", "--agent", "ada")
        assert (proc.returncode, proc.stdout) == (0, "memory: 100% — 120/100 chars\n")
        assert "over its limit" in proc.stderr and "by 20 chars" in proc.stderr
        doc = json.loads(dreamer(tmp_path, "stats", "--json", "--agent", "ada").stdout)
        assert (doc["chars"], doc["limit"], doc["over_limit"]) == (120, 100, True)

    def test_an_invalid_config_limit_is_a_config_error(self, tmp_path: Path) -> None:
        """memory_char_limit: 0 exits 78 naming the file and key; nothing is written."""
        (tmp_path / "memories").mkdir()
        (tmp_path / "config.yaml").write_text("memory:\n  memory_char_limit: 0\n", encoding="utf-8")
        proc = dreamer(tmp_path, "add", "x", "--agent", "ada")
        assert proc.returncode == 78
        assert "config.yaml: memory.memory_char_limit" in proc.stderr and "Traceback" not in proc.stderr
        assert not (tmp_path / "memories" / "MEMORY.md").exists()

    def test_json_is_refused_for_a_write(self, tmp_path: Path) -> None:
        """--json with add is a usage error (exit 2), not silently ignored."""
        (tmp_path / "memories").mkdir()
        proc = dreamer(tmp_path, "add", "x", "--json", "--agent", "ada")
        assert proc.returncode == 2 and "--json applies to list and stats" in proc.stderr


class TestAHugeFile:
    """A MEMORY.md of 15.6 MB (a log put in its place): refused in one line by the audit and by
    `dreamer memory`, with the bound named; nothing is written or reported at length."""

    def huge(self, root: Path) -> AgentFiles:
        agent = agent_home(root, None)
        entry = "Deploy note: restart ingest on host atlas after the nightly backup finishes.\n§\n"
        agent.memory_path.write_text(CANARY + "\n§\n" + entry * 200_000, encoding="utf-8")
        assert agent.memory_path.stat().st_size > 15_000_000
        return agent

    def test_the_audit_refuses_it_in_one_line(self, tmp_path: Path) -> None:
        agent = self.huge(tmp_path)
        before = agent.memory_path.stat().st_mtime_ns
        report = audit_agent(agent, FAST, NOW)
        assert report.status is not AuditStatus.COMPLETE
        assert f"{MAX_MEMORY_FILE_BYTES:,}" in report.reason and "trim it" in report.reason, report.reason
        assert len(report.reason) < 400 and "\n" not in report.reason
        assert agent.memory_path.stat().st_mtime_ns == before

    @pytest.mark.parametrize("action", [("add", "One more entry."), ("list",), ("stats",)])
    def test_memory_commands_refuse_it_in_one_line(self, tmp_path: Path, action: tuple[str, ...]) -> None:
        self.huge(tmp_path)
        size = (tmp_path / "memories" / "MEMORY.md").stat().st_size
        proc = dreamer(tmp_path, *action, "--agent", "ada")
        assert proc.returncode != 0
        assert len(proc.stdout) < 1000, proc.stdout[:300]
        assert "far over any memory limit" in proc.stderr and len(proc.stderr.splitlines()) == 1, proc.stderr
        assert (tmp_path / "memories" / "MEMORY.md").stat().st_size == size
