"""Where the state file is, and who may create it: the service and a shell find one state with
``state_dir`` unset, and the commands that only read (``status``, ``card``, ``recall``) never create
a state file, saying instead where they looked."""

from __future__ import annotations

import json
import os
import shutil
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from dreamer.config import SERVICE_STATE_DIR, SYSTEM_CONFIG_DIR, parse_config
from tests.support.cli import run_dreamer
from tests.support.configs import config_data, write_toml
from tests.support.daemon_harness import DaemonProcess, NotifySocket, daemon_config, has, job_finished

UNIT = Path(__file__).resolve().parents[2] / "systemd" / "dreamer.service"


def without_state_dir(data: dict[str, object]) -> dict[str, object]:
    data = dict(data)
    data.pop("state_dir", None)
    return data


class TestDefaultStateDir:
    def test_the_system_configuration_keeps_its_state_where_the_unit_puts_it(self) -> None:
        """With state_dir unset, /etc/dreamer/config.toml means /var/lib/dreamer, also with no
        systemd variable set (a shell), so a shell reads what the service wrote."""
        cfg = parse_config(without_state_dir(config_data()), base_dir=SYSTEM_CONFIG_DIR, environ={})
        assert cfg.state_dir == SERVICE_STATE_DIR
        assert cfg.state_path == SERVICE_STATE_DIR / "state.sqlite3"

    def test_the_unit_gives_the_service_those_two_directories(self) -> None:
        """The shipped unit's ConfigurationDirectory= and StateDirectory= name the directories the
        default follows; a unit that moved either would split the service's state from a shell's."""
        lines = UNIT.read_text(encoding="utf-8").splitlines()
        assert "ConfigurationDirectory=dreamer" in lines and Path("/etc/dreamer") == SYSTEM_CONFIG_DIR
        assert "StateDirectory=dreamer" in lines and Path("/var/lib/dreamer") == SERVICE_STATE_DIR
        assert f"ExecStart=/usr/local/bin/dreamer run --config {SYSTEM_CONFIG_DIR}/config.toml" in lines

    def test_state_directory_wins_and_state_dir_wins_over_both(self, tmp_path: Path) -> None:
        """$STATE_DIRECTORY (its first entry) is the default under systemd; a state_dir in the file
        is always what it says."""
        env = {"STATE_DIRECTORY": f"{tmp_path}/a:{tmp_path}/b"}
        cfg = parse_config(without_state_dir(config_data()), base_dir=SYSTEM_CONFIG_DIR, environ=env)
        assert cfg.state_dir == tmp_path / "a"
        own = config_data(state_dir=str(tmp_path / "own"))
        cfg = parse_config(own, base_dir=SYSTEM_CONFIG_DIR, environ=env)
        assert cfg.state_dir == tmp_path / "own"

    def test_any_other_configuration_keeps_its_state_beside_it(self, tmp_path: Path) -> None:
        """A configuration outside /etc/dreamer, with no systemd variable, keeps ``state/`` beside it."""
        cfg = parse_config(without_state_dir(config_data()), base_dir=tmp_path, environ={})
        assert cfg.state_dir == tmp_path / "state"


class TestReadingCreatesNothing:
    @pytest.fixture
    def config(self, tmp_path: Path) -> Path:
        return write_toml(tmp_path / "etc" / "config.toml", config_data(state_dir=str(tmp_path / "state")))

    def test_status_without_a_state_file_says_where_it_looked(self, tmp_path: Path, config: Path) -> None:
        """`dreamer status` with no state file creates neither it nor its directory (nor the
        embedded store in it), exits 0, and names the file it looked for and how to point it at
        the service's."""
        done = run_dreamer(config, "status")
        assert done.returncode == 0, done.stderr
        assert not (tmp_path / "state").exists()
        expected = f"no state file at {tmp_path / 'state' / 'state.sqlite3'}"
        assert expected in done.stdout and "set state_dir" in done.stdout
        assert "research: " in done.stdout and "never run" in done.stdout

    def test_status_json_says_the_state_file_is_missing(self, tmp_path: Path, config: Path) -> None:
        """`status --json` carries state_exists false and the same sentence, for scripts."""
        done = run_dreamer(config, "status", "--json")
        assert done.returncode == 0, done.stderr
        doc = json.loads(done.stdout)
        assert doc["state_exists"] is False and "no state file at" in doc["state_missing"]
        assert [row["last_run"] for row in doc["profiles"]] == [None]
        assert not (tmp_path / "state").exists()

    def test_card_and_recall_without_a_state_file_create_nothing(self, tmp_path: Path, config: Path) -> None:
        """`dreamer card` (also with --write) and `dreamer recall` read no state into being."""
        card = run_dreamer(config, "card")
        assert card.returncode == 0, card.stderr
        assert "no state file at" in card.stdout and "(research: no promoted cards yet)" in card.stdout
        written = run_dreamer(config, "card", "--write", "--json")
        assert written.returncode == 0, written.stderr
        assert json.loads(written.stdout)["written"] == []
        recall = run_dreamer(config, "recall", "anything", "--profile", "research")
        assert recall.returncode == 0, recall.stderr
        assert not (tmp_path / "state" / "state.sqlite3").exists()

    def test_a_link_where_the_state_file_should_be_is_refused_by_name(
        self, tmp_path: Path, config: Path
    ) -> None:
        """A dangling link at the state file's path is not taken for "no state file": status
        refuses it, naming the link (exit 73), and creates nothing behind it."""
        (tmp_path / "state").mkdir()
        (tmp_path / "state" / "state.sqlite3").symlink_to(tmp_path / "elsewhere.sqlite3")
        done = run_dreamer(config, "status")
        assert done.returncode != 0
        assert "symbolic link" in done.stderr and not (tmp_path / "elsewhere.sqlite3").exists()


@pytest.fixture
def system_dirs() -> Iterator[None]:
    """/etc/dreamer and /var/lib/dreamer for the length of one test, made and removed by it; the
    test is skipped where they exist already or cannot be made (not root)."""
    if SYSTEM_CONFIG_DIR.exists() or SERVICE_STATE_DIR.exists() or SERVICE_STATE_DIR.is_symlink():
        pytest.skip(f"{SYSTEM_CONFIG_DIR} or {SERVICE_STATE_DIR} exists on this host; not touched")
    if os.geteuid() != 0:
        pytest.skip(f"making {SYSTEM_CONFIG_DIR} and {SERVICE_STATE_DIR} needs root")
    try:
        yield
    finally:
        shutil.rmtree(SYSTEM_CONFIG_DIR, ignore_errors=True)
        shutil.rmtree(SERVICE_STATE_DIR, ignore_errors=True)


class TestServiceAndShell:
    def test_a_shell_reads_the_state_the_service_wrote(self, tmp_path: Path, system_dirs: None) -> None:
        """The daemon started as the unit starts it (--config /etc/dreamer/config.toml, state_dir
        unset, $STATE_DIRECTORY=/var/lib/dreamer) writes its run records; `dreamer status` from a
        shell (no systemd variable) reads that state: the run is there, nothing under /etc."""
        config = write_toml(SYSTEM_CONFIG_DIR / "config.toml", without_state_dir(daemon_config(tmp_path)))
        SERVICE_STATE_DIR.mkdir(mode=0o750)
        env = {"STATE_DIRECTORY": str(SERVICE_STATE_DIR), "CONFIGURATION_DIRECTORY": str(SYSTEM_CONFIG_DIR)}
        with NotifySocket() as notify:
            env["NOTIFY_SOCKET"] = notify.path
            args = ["-m", "dreamer", "run", "--config", str(config), "--log-format", "json"]
            with DaemonProcess(args, log_path=tmp_path / "out.log", env=env) as daemon:
                notify.wait_for(has("READY", "1"), what="READY=1")
                daemon.wait_for_records(job_finished("research"), count=1)
                daemon.send(signal.SIGTERM)
                assert daemon.wait() == 0
        assert (SERVICE_STATE_DIR / "state.sqlite3").is_file()
        done = run_dreamer(config, "status", "--json")
        assert done.returncode == 0, done.stderr
        doc = json.loads(done.stdout)
        assert doc["state"] == str(SERVICE_STATE_DIR / "state.sqlite3") and doc["state_exists"] is True
        assert doc["profiles"][0]["last_run"] is not None
        assert sorted(p.name for p in SYSTEM_CONFIG_DIR.iterdir()) == ["config.toml"]
