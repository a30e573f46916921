"""The operator's path through the real commands: ``dreamer hermes install`` (a subprocess) and
Hermes' own CLI (hermes-agent 0.19.0, run as its ``hermes`` script runs it) in a temporary Hermes
home, with HOME moved into the test's directory so that no real ``~/.hermes`` is read or written.

The commands ``dreamer hermes install`` tells the operator to run are run as printed, through the
shell: a ``hermes`` on PATH that is the installed Hermes under this interpreter.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

pytest.importorskip("hermes_cli.main", reason="hermes-agent is not installed (pip install -e '.[test]')")

from dreamer.hermes_provider.install import configured_provider

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[3]
#: Hermes' console script, for this interpreter (the ``hermes`` on PATH may belong to another).
HERMES_SCRIPT = (
    "#!/bin/sh\n"
    f'exec {shlex.quote(sys.executable)} -c "import sys; from hermes_cli.main import main; '
    'sys.argv[0] = \'hermes\'; sys.exit(main())" "$@"\n'
)


@dataclass
class Shell:
    """An environment like an operator's: HOME in the test's directory, Hermes on PATH, no
    Hindsight variable, and HERMES_HOME only when a test sets it."""

    env: dict[str, str]

    def run(self, line: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
        """A command line as the operator types it (``HERMES_HOME=... hermes ...`` included)."""
        return subprocess.run(
            ["/bin/sh", "-c", line], cwd=REPO, env=self.env, capture_output=True, text=True, timeout=timeout
        )

    def dreamer(self, *args: str) -> subprocess.CompletedProcess[str]:
        return self.run(shlex.join([sys.executable, "-m", "dreamer", "hermes", "install", *args]))

    def hermes(self, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
        return self.run(f"HERMES_HOME={shlex.quote(str(home))} " + shlex.join(["hermes", *args]))


@pytest.fixture
def shell(tmp_path: Path) -> Shell:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "hermes").write_text(HERMES_SCRIPT, encoding="utf-8")
    (bin_dir / "hermes").chmod(0o755)
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("HINDSIGHT_", "HERMES_")) and k != "NOTIFY_SOCKET"
    }
    env.update(HOME=str(tmp_path / "user"), PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}")
    env["PYTHONPATH"] = str(REPO)
    (tmp_path / "user").mkdir()
    return Shell(env)


def quoted_command(text: str) -> str:
    """The one command a message gives in backticks."""
    (command,) = re.findall(r"`([^`]+)`", text)
    return command


def indented_command(text: str, after: str) -> str:
    """The command on the indented line that follows the line ending with ``after``."""
    lines = text.splitlines()
    index = next(i for i, line in enumerate(lines) if line.endswith(after))
    return lines[index + 1].strip()


def hindsight_json(home: Path) -> None:
    """A config.json naming a server of one's own (nothing is sent to it by these commands)."""
    (home / "hindsight").mkdir(parents=True, exist_ok=True)
    config = {"mode": "local_external", "api_url": "http://127.0.0.1:9", "bank_id": "notes"}
    (home / "hindsight" / "config.json").write_text(json.dumps(config), encoding="utf-8")


class TestInstallMessages:
    def test_a_missing_home_gives_the_non_interactive_setup_that_makes_it(
        self, shell: Shell, tmp_path: Path
    ) -> None:
        """``--home`` naming no directory: exit 2 and ``HERMES_HOME=<home> hermes setup
        --non-interactive`` (``hermes setup`` alone asks questions); run as printed, it makes a
        home the install then accepts."""
        home = tmp_path / "agents" / "coder"
        first = shell.dreamer("--home", str(home))
        assert first.returncode == 2, first.stdout
        assert f"{home} does not exist" in first.stderr
        command = quoted_command(first.stderr)
        assert command == f"HERMES_HOME={home} hermes setup --non-interactive"
        made = shell.run(command)
        assert made.returncode == 0, made.stderr
        hindsight_json(home)
        again = shell.dreamer("--home", str(home))
        assert again.returncode == 0, again.stderr
        assert "__init__.py: written" in again.stdout

    def test_a_directory_that_is_no_hermes_home_gets_the_same_command(
        self, shell: Shell, tmp_path: Path
    ) -> None:
        """An empty directory: "not a Hermes home" and the same non-interactive setup for it."""
        home = tmp_path / "empty"
        home.mkdir()
        result = shell.dreamer("--home", str(home))
        assert result.returncode == 2
        assert f"{home} is not a Hermes home" in result.stderr
        assert quoted_command(result.stderr) == f"HERMES_HOME={home} hermes setup --non-interactive"

    def test_the_home_hermes_resolves_anyway_gets_the_command_without_hermes_home(
        self, shell: Shell, tmp_path: Path
    ) -> None:
        """No ``--home``, ``$HERMES_HOME`` set: the command is the bare ``hermes setup
        --non-interactive``, which acts on that same home."""
        home = tmp_path / "hermes-home"
        shell.env["HERMES_HOME"] = str(home)
        result = shell.dreamer()
        assert result.returncode == 2
        assert quoted_command(result.stderr) == "hermes setup --non-interactive"

    def test_uninstall_gives_the_command_that_resets_memory_provider(
        self, shell: Shell, tmp_path: Path
    ) -> None:
        """Install, then the printed ``hermes config set memory.provider dreamer``; uninstall says
        config.yaml still names dreamer and prints ``hermes config set memory.provider ''``, which,
        run as printed, leaves Hermes' built-in memory only."""
        home = tmp_path / "hermes-home"
        assert shell.hermes(home, "setup", "--non-interactive").returncode == 0
        hindsight_json(home)
        installed = shell.dreamer("--home", str(home))
        assert installed.returncode == 0, installed.stderr
        select = indented_command(installed.stdout, "or run")
        assert select == f"HERMES_HOME={home} hermes config set memory.provider dreamer"
        assert shell.run(select).returncode == 0
        assert configured_provider(home) == "dreamer"
        removed = shell.dreamer("--home", str(home), "--uninstall")
        assert removed.returncode == 0, removed.stderr
        assert f"{home / 'config.yaml'} still sets memory.provider: dreamer" in removed.stdout
        reset = indented_command(removed.stdout, "for Hermes' built-in memory only, run")
        assert reset == f"HERMES_HOME={home} hermes config set memory.provider ''"
        assert shell.run(reset).returncode == 0
        assert configured_provider(home) == ""
        quiet = shell.dreamer("--home", str(home))
        assert quiet.returncode == 0
        again = shell.dreamer("--home", str(home), "--uninstall")
        assert "still sets memory.provider" not in again.stdout

    def test_a_home_without_any_server_configured_is_warned_about(self, shell: Shell, tmp_path: Path) -> None:
        """No config.json and no HINDSIGHT_* variable: the install still writes the plugin, and warns
        that Hermes will find the provider unavailable and what to write; a ``.env`` that sets
        ``HINDSIGHT_API_URL`` silences it."""
        home = tmp_path / "hermes-home"
        assert shell.hermes(home, "setup", "--non-interactive").returncode == 0
        result = shell.dreamer("--home", str(home))
        assert result.returncode == 0, result.stderr
        assert (
            "warning: Hermes will find the provider unavailable: no Hindsight configuration" in result.stdout
        )
        assert str(home / "hindsight" / "config.json") in result.stdout
        (home / ".env").write_text("HINDSIGHT_API_URL=http://127.0.0.1:9\n", encoding="utf-8")
        assert "warning:" not in shell.dreamer("--home", str(home)).stdout


class TestHermesShowsTheProvider:
    @pytest.fixture
    def home(self, shell: Shell, tmp_path: Path) -> Path:
        """A home made by Hermes, the plugin installed by the real command, memory.provider set by
        Hermes' own ``config set``."""
        home = tmp_path / "hermes-home"
        assert shell.hermes(home, "setup", "--non-interactive").returncode == 0
        hindsight_json(home)
        assert shell.dreamer("--home", str(home)).returncode == 0
        assert shell.hermes(home, "config", "set", "memory.provider", "dreamer").returncode == 0
        return home

    def test_memory_status_shows_the_provider_active_with_its_turn_spool(
        self, shell: Shell, home: Path
    ) -> None:
        """``hermes memory status``: provider dreamer, plugin installed, available, the spool's path
        and the turns waiting (none), and dreamer marked active among the installed providers."""
        result = shell.hermes(home, "memory", "status")
        assert result.returncode == 0, result.stderr
        out = result.stdout
        assert "Provider:  dreamer" in out
        assert "Plugin:    installed ✓" in out and "Status:    available ✓" in out
        assert f"turn spool: {home / 'dreamer'}/turns-notes-" in out
        assert "turns waiting: 0" in out
        assert "• dreamer  (no setup needed) ← active" in out

    def test_memory_status_shows_why_a_broken_config_makes_it_unavailable(
        self, shell: Shell, home: Path
    ) -> None:
        """A config.json that is not JSON: ``hermes memory status`` says not available and shows the
        provider's reason, naming the file and the line."""
        (home / "hindsight" / "config.json").write_text('{"banks": ', encoding="utf-8")
        out = shell.hermes(home, "memory", "status").stdout
        assert "Status:    not available ✗" in out
        assert f"problem: {home / 'hindsight' / 'config.json'}: invalid JSON at line 1" in out

    def test_plugins_list_says_not_enabled_while_the_provider_is_active(
        self, shell: Shell, home: Path
    ) -> None:
        """What the install's note explains, pinned against Hermes 0.19.0: ``plugins list`` shows
        dreamer "not enabled" (its column is plugins.enabled) while memory status has it active;
        ``plugins disable`` flips only the column, the provider stays available and active."""
        listed = shell.hermes(home, "plugins", "list", "--plain", "--no-bundled").stdout
        assert re.search(r"^not enabled\s+user\s+\S+\s+dreamer$", listed, re.MULTILINE), listed
        assert "Status:    available ✓" in shell.hermes(home, "memory", "status").stdout
        assert shell.hermes(home, "plugins", "disable", "dreamer").returncode == 0
        listed = shell.hermes(home, "plugins", "list", "--plain", "--no-bundled").stdout
        assert re.search(r"^disabled\s+user\s+\S+\s+dreamer$", listed, re.MULTILINE), listed
        status = shell.hermes(home, "memory", "status").stdout
        assert "Status:    available ✓" in status and "• dreamer  (no setup needed) ← active" in status

    def test_the_install_says_what_plugins_list_shows_and_how_to_check(
        self, shell: Shell, home: Path
    ) -> None:
        """The closing message names ``hermes memory status`` for this home and explains the "not
        enabled" of ``hermes plugins list``."""
        out = shell.dreamer("--home", str(home)).stdout
        assert f"check: HERMES_HOME={home} hermes memory status" in out
        assert '`hermes plugins list` shows dreamer as "not enabled" even while it is active' in out
        assert "memory.provider alone loads one" in out
