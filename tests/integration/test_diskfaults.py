"""A full or read-only file system under the state file is said as such, in one line, and never
called damage (the user would be told to move a healthy file aside): real tmpfs mounts, real
SQLite files, the real CLI in a subprocess."""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from dreamer.backends.base import RetainItem
from dreamer.backends.embedded.backend import EmbeddedBackend
from dreamer.config import Config
from dreamer.state import StateStore
from tests.support.cli import run_dreamer
from tests.support.configs import config_data, loaded
from tests.support.smallfs import fill, remount_read_only, small_fs


def dreamer(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_dreamer(config, *args)


#: The config file, its loaded configuration, and the mounted file system holding the state dir.
Mounted = tuple[Path, Config, Path]


@pytest.fixture
def mounted(tmp_path: Path) -> Iterator[Mounted]:
    with small_fs(tmp_path / "fs", 1024) as where:
        cfg = loaded(tmp_path, config_data(state_dir=str(where / "state")))
        StateStore.open(cfg.state_path).close()

        async def seed() -> None:
            backend = EmbeddedBackend(cfg.embedded_path)
            try:
                await backend.retain(
                    "private__hermes__research", [RetainItem("Grafana listens on port 3000 on host mon.")]
                )
            finally:
                await backend.aclose()

        asyncio.run(seed())
        yield tmp_path / "config.toml", cfg, where


class TestFullDisk:
    @pytest.mark.parametrize("command", ["status", "rollup"])
    def test_a_healthy_file_on_a_full_disk_is_not_called_damaged(
        self, mounted: Mounted, command: str
    ) -> None:
        """No byte free: the command says the file system is full and to free space, that the file
        is not damaged; never "move it aside"; the file is left as it was."""
        config, cfg, where = mounted
        before = cfg.state_path.read_bytes()
        fill(where)
        proc = dreamer(config, command, "--log-format", "console")
        output = proc.stdout + proc.stderr
        assert proc.returncode in (1, 75), output
        assert "is full" in output and "free space there" in output, output
        assert "move it aside" not in output and "Traceback" not in output, output
        assert cfg.state_path.read_bytes() == before

    def test_a_run_with_40_kib_free_logs_one_line_per_failure(self, mounted: Mounted) -> None:
        """40 KiB free: the roll-up cannot write its run record or its store; each failure is one
        log line naming the full file system, in console format without a traceback."""
        config, _cfg, where = mounted
        fill(where, leave_bytes=40 * 1024)
        proc = dreamer(config, "rollup", "--log-format", "console")
        output = proc.stdout + proc.stderr
        assert "Traceback" not in output, output
        assert "is full" in output, output
        record_lines = [line for line in output.splitlines() if "could not write the run record" in line]
        assert all("is full" in line for line in record_lines), output


class TestReadOnly:
    def test_a_read_only_file_system_is_named_with_the_fix(self, mounted: Mounted) -> None:
        """The state directory's file system remounted read-only: one line saying it is read-only and
        what to set; nothing said about damage."""
        config, _cfg, where = mounted
        remount_read_only(where)
        proc = dreamer(config, "rollup", "--log-format", "console")
        output = proc.stdout + proc.stderr
        assert proc.returncode != 0, output
        assert "Traceback" not in output and "move it aside" not in output, output
        assert "read-only" in output, output
