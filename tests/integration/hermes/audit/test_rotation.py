"""Canary rotation on real agent folders: one locked step over both files, recorded in the ledger,
a crash between the files caught, concurrent rotations in real processes, and edits caught."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from dreamer.hermes.audit.canary import ROTATED, ROTATING, canary_lines
from dreamer.hermes.audit.ledger import parse_ledger
from dreamer.hermes.audit.report import AuditStatus
from dreamer.hermes.audit.rotation import RotationRefusedError, rotate_canaries
from dreamer.hermes.audit.run import audit_agent
from dreamer.hermes.audit.settings import AgentFiles, AuditSettings

REPO_ROOT = Path(__file__).resolve().parents[4]
NOW = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)
CANARY = "CANARY: Do not modify this line"
FORCED = AuditSettings(force=True, url_timeout_s=1.0)
# A safety net against a hung child, not a performance expectation.
HANG_GUARD_S = 120.0

# Rotates the canaries of the agent folder argv[1]; with argv[2] == "crash" the process dies
# (os._exit, no cleanup, as a kill would) right after MEMORY.md is written.
ROTATOR = r"""
import os, sys
from datetime import UTC, datetime
from pathlib import Path
from dreamer.hermes.audit.rotation import rotate_canaries
from dreamer.hermes.audit.settings import AgentFiles, AuditSettings
agent = AgentFiles("a", Path(sys.argv[1]))
crash = (lambda: os._exit(9)) if sys.argv[2] == "crash" else None
rotation = rotate_canaries(agent, AuditSettings(), datetime.now(UTC), between_files=crash)
print(rotation.token)
"""


def make_agent(root: Path) -> AgentFiles:
    memories = root / "memories"
    memories.mkdir(parents=True)
    (memories / "MEMORY.md").write_text(
        f"Agent canary entry.\n{CANARY} mem-1\n§\nThe NAS is nas01.lan at 192.168.1.20.", encoding="utf-8"
    )
    (memories / "USER.md").write_text(f"{CANARY} user-1\n§\nUser's name is Ada.", encoding="utf-8")
    (memories / "MEMORY_WRITERS.md").write_text("- dreamer\n", encoding="utf-8")
    return AgentFiles("a", memories)


def canaries(agent: AgentFiles) -> tuple[tuple[str, ...], tuple[str, ...]]:
    return (
        canary_lines(agent.memory_path.read_text(encoding="utf-8")),
        canary_lines(agent.user_path.read_text(encoding="utf-8")),
    )


def run_rotator(agent: AgentFiles, mode: str) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")]))
    return subprocess.Popen(
        [sys.executable, "-c", ROTATOR, str(agent.memories_dir), mode],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


class TestRotation:
    def test_rotation_changes_both_canaries_and_the_next_audit_passes(self, tmp_path: Path) -> None:
        """Both canary lines end in the same new token, the ledger holds ROTATING then ROTATED with the
        token, the rest of each file is unchanged, and the audit after it is COMPLETE."""
        agent = make_agent(tmp_path)
        assert audit_agent(agent, FORCED, NOW).status is AuditStatus.COMPLETE  # the baseline
        before_memory, before_user = canaries(agent)

        rotation = rotate_canaries(agent, AuditSettings(), NOW + timedelta(hours=1))

        memory, user = canaries(agent)
        assert memory == (f"{CANARY} (token {rotation.token})",) != before_memory
        assert user == (f"{CANARY} (token {rotation.token})",) != before_user
        assert "The NAS is nas01.lan at 192.168.1.20." in agent.memory_path.read_text(encoding="utf-8")
        assert agent.memory_path.read_text(encoding="utf-8").startswith("Agent canary entry.\n")
        blocks = parse_ledger(agent.ledger_path.read_text(encoding="utf-8"))
        assert [b.status for b in blocks[-2:]] == [ROTATING, ROTATED]
        assert blocks[-1].fields["canary_token"] == rotation.token
        assert blocks[-1].fields["canary_memory"] == rotation.canary_memory

        report = audit_agent(agent, FORCED, NOW + timedelta(hours=2))
        assert report.status is AuditStatus.COMPLETE, report.reason

    def test_a_canary_edited_without_a_rotation_is_critical(self, tmp_path: Path) -> None:
        """A canary line still holding the marker but changed since the last ledger block (a hand edit,
        or a stale copy put back) is CRITICAL, names the file and changes nothing."""
        agent = make_agent(tmp_path)
        audit_agent(agent, FORCED, NOW)
        raw = agent.user_path.read_text(encoding="utf-8")
        agent.user_path.write_text(raw.replace("user-1", "user-2"), encoding="utf-8")
        ledger_before = agent.ledger_path.read_bytes()

        report = audit_agent(agent, FORCED, NOW + timedelta(days=1))

        assert report.status is AuditStatus.CRITICAL
        assert "USER.md" in report.reason and "outside a rotation" in report.reason
        assert "MEMORY.md" not in report.reason.split("changed")[0]
        assert agent.ledger_path.read_bytes() == ledger_before
        with pytest.raises(RotationRefusedError, match="outside a rotation"):
            rotate_canaries(agent, AuditSettings(), NOW + timedelta(days=1))

    def test_a_stale_copy_from_before_a_rotation_is_critical(self, tmp_path: Path) -> None:
        """Putting back MEMORY.md as it was before a rotation is caught, with the token to restore."""
        agent = make_agent(tmp_path)
        audit_agent(agent, FORCED, NOW)
        stale = agent.memory_path.read_bytes()
        rotation = rotate_canaries(agent, AuditSettings(), NOW)
        agent.memory_path.write_bytes(stale)

        report = audit_agent(agent, FORCED, NOW + timedelta(days=1))

        assert report.status is AuditStatus.CRITICAL
        assert "MEMORY.md" in report.reason and rotation.token in report.reason

    def test_a_dry_run_reports_the_breach_too(self, tmp_path: Path) -> None:
        """A requested dry run checks the canaries against the ledger as well, and writes nothing."""
        agent = make_agent(tmp_path)
        audit_agent(agent, FORCED, NOW)
        agent.memory_path.write_text(
            agent.memory_path.read_text(encoding="utf-8").replace("mem-1", "forged"), encoding="utf-8"
        )
        report = audit_agent(agent, AuditSettings(force=True, dry_run=True), NOW + timedelta(days=1))
        assert report.status is AuditStatus.CRITICAL


class TestInterruptedRotation:
    def test_a_crash_between_the_files_is_reported_then_finished(self, tmp_path: Path) -> None:
        """A rotation that dies after MEMORY.md (a real process, exiting at once) leaves a half-rotated
        pair: the audit is CRITICAL and says which file holds which canary; a new rotation finishes it
        and the audit after that passes."""
        agent = make_agent(tmp_path)
        audit_agent(agent, FORCED, NOW)
        child = run_rotator(agent, "crash")
        child.communicate(timeout=HANG_GUARD_S)
        assert child.returncode == 9
        memory, user = canaries(agent)
        assert "(token " in memory[0] and user == (f"{CANARY} user-1",)  # half rotated

        report = audit_agent(agent, FORCED, NOW + timedelta(hours=1))
        assert report.status is AuditStatus.CRITICAL
        assert "did not finish" in report.reason
        assert "MEMORY.md holds the new canary" in report.reason
        assert "USER.md holds the old canary" in report.reason

        rotation = rotate_canaries(agent, AuditSettings(), NOW + timedelta(hours=2))
        assert rotation.finished_interrupted
        assert canaries(agent) == ((f"{CANARY} (token {rotation.token})",),) * 2
        assert audit_agent(agent, FORCED, NOW + timedelta(hours=3)).status is AuditStatus.COMPLETE

    def test_an_interrupted_rotation_does_not_excuse_a_forged_canary(self, tmp_path: Path) -> None:
        """After a crash, a canary matching neither the old nor the new token refuses the rotation."""
        agent = make_agent(tmp_path)
        audit_agent(agent, FORCED, NOW)
        child = run_rotator(agent, "crash")
        child.communicate(timeout=HANG_GUARD_S)
        agent.user_path.write_text(f"{CANARY} forged\n§\nUser's name is Ada.", encoding="utf-8")
        with pytest.raises(RotationRefusedError, match=r"USER\.md holds a canary of neither"):
            rotate_canaries(agent, AuditSettings(), NOW + timedelta(hours=1))


class TestConcurrentRotations:
    def test_two_processes_rotating_at_once_leave_one_consistent_token(self, tmp_path: Path) -> None:
        """Two rotations in two processes are serialised by the locks: both finish, both files end with
        the token of the second, the ledger holds two whole ROTATING/ROTATED pairs, and the audit
        after them passes."""
        agent = make_agent(tmp_path)
        audit_agent(agent, FORCED, NOW)
        children = [run_rotator(agent, "ok") for _ in range(2)]
        tokens = []
        for child in children:
            out, err = child.communicate(timeout=HANG_GUARD_S)
            assert child.returncode == 0, err
            tokens.append(out.strip())
        blocks = parse_ledger(agent.ledger_path.read_text(encoding="utf-8"))
        rotation_steps = [
            (b.status, b.fields["canary_token"]) for b in blocks if b.fields.get("mode") == "rotation"
        ]
        assert len(rotation_steps) == 4
        first, second = rotation_steps[0][1], rotation_steps[2][1]
        assert rotation_steps == [(ROTATING, first), (ROTATED, first), (ROTATING, second), (ROTATED, second)]
        assert sorted(tokens) == sorted([first, second])
        assert canaries(agent) == ((f"{CANARY} (token {second})",),) * 2
        assert audit_agent(agent, FORCED, NOW + timedelta(hours=1)).status is AuditStatus.COMPLETE


class TestScheduledRotation:
    def test_an_audit_rotates_once_the_interval_passed(self, tmp_path: Path) -> None:
        """With canary_rotation_days=30, an audit 31 days after the first recorded canaries rotates
        them (ledger trigger: scheduled), and an audit a day later does not rotate again."""
        agent = make_agent(tmp_path)
        settings = AuditSettings(force=True, canary_rotation_days=30)
        assert audit_agent(agent, settings, NOW).canary_rotation == ""
        before = canaries(agent)

        report = audit_agent(agent, settings, NOW + timedelta(days=31))

        assert report.status is AuditStatus.COMPLETE and report.canary_rotation
        assert canaries(agent) != before
        blocks = parse_ledger(agent.ledger_path.read_text(encoding="utf-8"))
        assert blocks[-1].status == ROTATED and blocks[-1].fields["trigger"] == "scheduled"
        assert audit_agent(agent, settings, NOW + timedelta(days=32)).canary_rotation == ""

    def test_a_missing_canary_refuses_a_rotation_and_changes_nothing(self, tmp_path: Path) -> None:
        """No canary line in USER.md: the rotation is refused naming the file; no file or ledger changes."""
        agent = make_agent(tmp_path)
        agent.user_path.write_text("User's name is Ada.", encoding="utf-8")
        memory_before = agent.memory_path.read_bytes()
        with pytest.raises(RotationRefusedError, match=r"USER\.md has no canary line"):
            rotate_canaries(agent, AuditSettings(), NOW)
        assert agent.memory_path.read_bytes() == memory_before
        assert not agent.ledger_path.exists()

    def test_an_entry_quoting_the_marker_keeps_every_word(self, tmp_path: Path) -> None:
        """An entry that quotes the marker inside its text (a licence key after it) is not a canary
        line: the rotation changes the canary line of its own and leaves the entry byte for byte."""
        agent = make_agent(tmp_path)
        quoting = f"Licence: the file's canary reads '{CANARY}' and must stay. Key LK-99-ABCD, renew in May."
        raw = agent.memory_path.read_text(encoding="utf-8") + "\n§\n" + quoting
        agent.memory_path.write_text(raw, encoding="utf-8")
        rotation = rotate_canaries(agent, AuditSettings(), NOW)
        after = agent.memory_path.read_text(encoding="utf-8")
        assert quoting in after.split("\n")
        assert f"{CANARY} (token {rotation.token})" in after.split("\n")
        assert "mem-1" not in after

    def test_a_file_that_only_quotes_the_marker_is_refused(self, tmp_path: Path) -> None:
        """USER.md whose only marker is quoted inside an entry: refused naming the file, nothing written."""
        agent = make_agent(tmp_path)
        agent.user_path.write_text(f"Ada wrote '{CANARY}' on a sticky note, key 4411.", encoding="utf-8")
        before = agent.user_path.read_bytes()
        with pytest.raises(RotationRefusedError, match=r"USER\.md only quotes the canary marker"):
            rotate_canaries(agent, AuditSettings(), NOW)
        assert agent.user_path.read_bytes() == before
        assert not agent.ledger_path.exists()

    def test_a_symlinked_memory_file_is_rotated_through_the_link(self, tmp_path: Path) -> None:
        """A MEMORY.md that is a link to a file the folder's owner owns is rotated as Hermes writes it:
        through the link, which stays a link, its target holding the new canary."""
        agent = make_agent(tmp_path)
        target = tmp_path / "elsewhere.md"
        target.write_bytes(agent.memory_path.read_bytes())
        agent.memory_path.unlink()
        agent.memory_path.symlink_to(target)
        rotation = rotate_canaries(agent, AuditSettings(), NOW)
        assert agent.memory_path.is_symlink()
        assert canary_lines(target.read_text(encoding="utf-8")) == (f"{CANARY} (token {rotation.token})",)


def dreamer(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The `dreamer` command run as a user runs it, with a config naming the agent `a`."""
    env = {**os.environ, "DREAMER_CONFIG": str(home / "config.toml")}
    env.pop("NOTIFY_SOCKET", None)
    return subprocess.run(
        [sys.executable, "-m", "dreamer", *args],
        cwd=home,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


class TestCommand:
    def configured(self, tmp_path: Path, **audit: object) -> AgentFiles:
        from tests.support.configs import config_data, write_toml

        agent = make_agent(tmp_path / "home")
        data = config_data(agents={"a": {"memories_dir": str(agent.memories_dir)}}, audit=audit)
        write_toml(tmp_path / "config.toml", data)
        return agent

    def test_rotate_canary_rotates_and_says_so(self, tmp_path: Path) -> None:
        """`dreamer audit --rotate-canary --agent a` rotates (exit 0, fingerprints printed); on a
        forged canary it refuses with the reason (exit 1) and no traceback."""
        agent = self.configured(tmp_path)
        done = dreamer(tmp_path, "audit", "--rotate-canary", "--agent", "a")
        assert done.returncode == 0, done.stderr
        assert "a: canaries rotated" in done.stdout
        assert canaries(agent)[0][0].startswith(f"{CANARY} (token ")

        agent.user_path.write_text(f"{CANARY} forged\n§\nUser's name is Ada.", encoding="utf-8")
        refused = dreamer(tmp_path, "audit", "--rotate-canary", "--agent", "a")
        assert refused.returncode == 1
        assert "canaries NOT rotated" in refused.stdout and "outside a rotation" in refused.stdout
        assert "Traceback" not in refused.stderr

    def test_help_teaches_the_option_and_dry_run_is_refused(self, tmp_path: Path) -> None:
        """`--help` explains --rotate-canary and the schedule key; with --dry-run it is a usage error."""
        self.configured(tmp_path)
        helped = dreamer(tmp_path, "audit", "--help")
        assert "--rotate-canary" in helped.stdout and "canary_rotation_days" in helped.stdout
        misuse = dreamer(tmp_path, "audit", "--rotate-canary", "--dry-run")
        assert misuse.returncode == 2 and "--rotate-canary" in misuse.stderr

    def test_rotation_days_out_of_bounds_is_a_config_error(self, tmp_path: Path) -> None:
        """audit.canary_rotation_days above 3650 is refused naming the key."""
        self.configured(tmp_path, canary_rotation_days=100_000)
        done = dreamer(tmp_path, "audit", "--rotate-canary")
        assert done.returncode != 0 and "canary_rotation_days" in done.stderr
