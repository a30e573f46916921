"""The daemon benchmark's own parts: /proc parsing, the config, the verdicts."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import bench.daemon
from bench.daemon import (
    CLOCK_TICKS,
    config_text,
    cpu_seconds,
    installed_environment,
    parse_args,
    parse_cpu_seconds,
    rss_mib,
    targets,
)
from dreamer.config import load_config


def result(
    ready: float = 0.5, rss: float = 40.0, growth: float = 0.0, cpu_pct: float = 0.1
) -> dict[str, Any]:
    return {
        "idle": {"ready_s": ready, "rss_idle_mib": rss, "idle_cpu_pct": cpu_pct},
        "cycles": {"cycles": 100, "rss_growth_10_to_last_mib": growth},
    }


class TestProc:
    def test_cpu_seconds_with_spaces_in_the_command_name(self) -> None:
        """utime and stime are read after the last parenthesis, whatever the command name holds."""
        stat = f"42 (a (weird) name) S 1 2 3 4 5 6 7 8 9 10 {3 * CLOCK_TICKS} {CLOCK_TICKS} 0 0"
        assert parse_cpu_seconds(stat) == 4.0

    def test_own_process_readings(self) -> None:
        """RSS and CPU of a live process come out positive from /proc."""
        assert rss_mib(os.getpid()) > 1
        assert cpu_seconds(os.getpid()) > 0


class TestConfig:
    def test_generated_config_is_valid(self, tmp_path: Path) -> None:
        """The benchmark's configuration loads with Dreamer's own loader."""
        path = tmp_path / "c.toml"
        path.write_text(
            config_text(tmp_path / "s", ["research", "coder"], {"interval_minutes": 0.005, "jitter_s": 0})
        )
        config = load_config(path)
        assert sorted(config.enabled_profiles()) == ["coder", "research"]
        assert config.schedule.interval_minutes == 0.005

    def test_embeddings_are_pinned_lexical_unless_asked(self, tmp_path: Path) -> None:
        """The daemon measured runs the lexical dedup (provider "none") wherever the local model is
        installed; --embeddings auto gives the default, auto."""
        path = tmp_path / "c.toml"
        path.write_text(config_text(tmp_path / "s", ["research"], {"jitter_s": 0}))
        assert load_config(path).embeddings.provider == "none"
        path.write_text(config_text(tmp_path / "s", ["research"], {"jitter_s": 0}, "auto"))
        assert load_config(path).embeddings.provider == "auto"
        assert parse_args([]).embeddings == "none"
        assert parse_args(["--embeddings", "auto"]).embeddings == "auto"


class TestTargets:
    def test_all_met(self) -> None:
        """A daemon inside every target gets four 'met' lines."""
        assert all(line.startswith("met") for line in targets(result()))

    def test_each_miss_is_reported(self) -> None:
        """Slow start, big RSS, RSS growth and busy idle are each reported as missed."""
        lines = targets(result(ready=2.0, rss=70.0, growth=3.0, cpu_pct=1.0))
        assert [line.startswith("MISSED") for line in lines] == [True, True, True, True]


class TestInstalledBytecode:
    def test_the_daemon_imports_bytecode_compiled_before_it_starts(self) -> None:
        """As from a pip install: the package's modules are compiled before the child starts, so
        it compiles none of them, even where the parent's environment says not to write bytecode."""
        package = Path(__file__).resolve().parents[3] / "dreamer"
        pipeline = Path(importlib.util.cache_from_source(str(package / "rollup" / "pipeline.py")))
        pipeline.unlink(missing_ok=True)
        bench.daemon.compile_package.cache_clear()
        env = installed_environment({**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
        assert "PYTHONDONTWRITEBYTECODE" not in env
        assert pipeline.exists()
        compiled = {p: p.stat().st_mtime_ns for p in package.rglob("__pycache__/*.pyc")}
        sources = list(package.rglob("*.py"))
        assert len(compiled) >= len(sources)
        code = (
            "import importlib.util, sys, dreamer.rollup.pipeline as m\n"
            "print(sys.dont_write_bytecode, importlib.util.cache_from_source(m.__file__))"
        )
        done = subprocess.run(
            [sys.executable, "-c", code],
            env=env,
            cwd=package.parent,
            capture_output=True,
            text=True,
            check=True,
        )
        dont_write, cached = done.stdout.split()
        assert dont_write == "False"
        assert Path(cached) in compiled
        assert {p: p.stat().st_mtime_ns for p in package.rglob("__pycache__/*.pyc")} == compiled
