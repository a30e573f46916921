"""``dreamer check-config`` and ``dreamer run`` on real files, as real processes.

A wrong configuration must give exit status 78 (EX_CONFIG) from both commands, with a message that
names the key, and ``run`` must say so before it ever tells systemd it is ready.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support.configs import write_toml
from tests.support.daemon_harness import REPO_ROOT, NotifySocket, daemon_config, parse_log_line, write_config

EX_CONFIG = 78
SECRET = "sk-test-0123456789abcdef"


@dataclass(frozen=True)
class BadConfig:
    name: str
    key: str  # the key path set to ``value``, which the message must name
    value: Any
    also: tuple[tuple[str, Any], ...] = ()  # other keys the case needs, set first


BAD_CONFIGS = [
    BadConfig("unknown key", "schedule.intervall_minutes", 5),
    BadConfig("wrong type", "schedule.job_timeout_s", "half an hour"),
    BadConfig("unknown bank alias", "profiles.research.bank", "reserch"),
    BadConfig("duplicate bank id", "banks.copy.bank_id", "private__hermes__research"),
    BadConfig(
        "missing secret file", "backend.hindsight.api_key_file", "/nonexistent/dreamer/hindsight-api-key"
    ),
    # Caught before any run: the model directory is checked without loading the model.
    BadConfig(
        "missing model directory",
        "embeddings.model_path",
        "/nonexistent/dreamer/model",
        also=(("embeddings.provider", "local"),),
    ),
]


def write_bad(path: Path, case: BadConfig) -> Path:
    data = daemon_config(path.parent / "state")
    for dotted, value in (*case.also, (case.key, case.value)):
        *tables, key = dotted.split(".")
        table = data
        for name in tables:
            table = table.setdefault(name, {})
        table[key] = value
    return write_toml(path, data)


def dreamer(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environment = {
        k: v
        for k, v in os.environ.items()
        if k not in {"NOTIFY_SOCKET", "JOURNAL_STREAM", "DREAMER_CONFIG", "HINDSIGHT_API_KEY"}
    }
    environment.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "dreamer", *args],
        cwd=REPO_ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def damaged_model(root: Path, damage: str) -> Path:
    """A copy of the installed model with one of its files damaged."""
    from dreamer.embeddings.local import default_model_dir

    try:
        source = default_model_dir()
    except ImportError as exc:
        pytest.skip(str(exc))
    root.mkdir()
    for name in ("config.json", "tokenizer.json", "model.safetensors"):
        (root / name).write_bytes((source / name).read_bytes())
    weights = root / "model.safetensors"
    if damage == "truncated":
        weights.write_bytes(weights.read_bytes()[:1_000_000])
    elif damage == "random bytes":
        weights.write_bytes(os.urandom(weights.stat().st_size))
    elif damage == "does not load":  # whole files, but not a model the encoder can run
        (root / "config.json").write_text('{"model_type": "gpt2"}', encoding="utf-8")
    return root


class TestDamagedModelFiles:
    @pytest.mark.parametrize("damage", ["truncated", "random bytes", "does not load"])
    def test_check_config_refuses_them_naming_the_file(self, tmp_path: Path, damage: str) -> None:
        """18. A truncated or random-bytes model file, or one that does not load, fails check-config
        (exit 78, naming embeddings.model_path and the file) instead of every roll-up later."""
        model = damaged_model(tmp_path / "model", damage)
        data = daemon_config(tmp_path / "state")
        data["embeddings"] = {"provider": "local", "model_path": str(model)}
        path = write_toml(tmp_path / "config.toml", data)
        result = dreamer("check-config", "--config", str(path))
        assert result.returncode == EX_CONFIG, (result.stdout, result.stderr)
        assert f"{path}: embeddings.model_path: " in result.stderr, result.stderr
        assert str(model) in result.stderr and "Traceback" not in result.stderr


class TestInvalidConfig:
    @pytest.mark.parametrize("case", BAD_CONFIGS, ids=lambda c: c.name)
    def test_check_config_exits_78_naming_the_key(self, tmp_path: Path, case: BadConfig) -> None:
        """check-config on a bad file exits 78 and prints a `file: key: ...` line naming the key."""
        path = write_bad(tmp_path / "config.toml", case)
        result = dreamer("check-config", "--config", str(path))
        assert result.returncode == EX_CONFIG, result.stderr
        lines = result.stderr.strip().splitlines()
        assert any(line.startswith(f"{path}: {case.key}: ") for line in lines), lines
        assert result.stdout == ""

    @pytest.mark.slow
    @pytest.mark.parametrize("case", BAD_CONFIGS, ids=lambda c: c.name)
    def test_run_exits_78_before_ready(self, tmp_path: Path, case: BadConfig) -> None:
        """run on a bad file exits 78 without READY=1, naming the key on stderr and in an error log record."""
        path = write_bad(tmp_path / "config.toml", case)
        with NotifySocket() as notify:
            result = dreamer(
                "run", "--config", str(path), "--log-format", "json", env={"NOTIFY_SOCKET": notify.path}
            )
            messages = notify.messages
        assert result.returncode == EX_CONFIG, result.stderr
        assert not any("READY=1" in m for m in messages), messages
        assert f"{path}: {case.key}: " in result.stderr
        records = [parse_log_line(line)[1] for line in result.stdout.splitlines()]
        errors = [r for r in records if r["level"] == "error"]
        assert len(errors) == 1
        assert any(case.key in problem for problem in errors[0]["problems"])

    def test_every_problem_is_reported_at_once(self, tmp_path: Path) -> None:
        """Several mistakes in one file are all listed, one line each."""
        path = write_config(
            tmp_path / "config.toml", tmp_path / "state", schedule={"intervall_minutes": 5, "jitter_s": -1}
        )
        result = dreamer("check-config", "--config", str(path))
        assert result.returncode == EX_CONFIG
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 2
        assert any("schedule.intervall_minutes" in line for line in lines)
        assert any("schedule.jitter_s" in line for line in lines)


class TestValidConfig:
    def test_the_file_may_be_given_without_the_flag(self, tmp_path: Path) -> None:
        """``dreamer check-config FILE`` checks FILE (it was "unrecognized arguments"); a bad one
        exits 78 naming it, as with --config."""
        good = write_config(tmp_path / "good.toml", tmp_path / "state")
        result = dreamer("check-config", str(good))
        assert result.returncode == 0, result.stderr
        assert f'state_dir = "{tmp_path / "state"}"' in result.stdout
        bad = write_bad(tmp_path / "bad.toml", BAD_CONFIGS[0])
        result = dreamer("check-config", str(bad))
        assert result.returncode == EX_CONFIG and result.stderr.startswith(f"{bad}: "), result.stderr

    def test_prints_normalised_config_with_secret_redacted(self, tmp_path: Path) -> None:
        """check-config prints one `key = value` line per setting, and the API key only as a marker."""
        path = write_config(tmp_path / "config.toml", tmp_path / "state")
        result = dreamer("check-config", "--config", str(path), env={"HINDSIGHT_API_KEY": SECRET})
        assert result.returncode == 0, result.stderr
        assert SECRET not in result.stdout + result.stderr
        lines = result.stdout.splitlines()
        assert 'backend.hindsight.api_key = "**********"' in lines
        assert f"state_dir = {json.dumps(str(tmp_path / 'state'))}" in lines
        assert "schedule.misfire_grace_s = 900" in lines  # a default, filled in

    def test_json_output_round_trips(self, tmp_path: Path) -> None:
        """check-config --json prints one JSON document with the secret redacted, also with --config first."""
        key_file = tmp_path / "hindsight-api-key"
        key_file.write_text(SECRET + "\n", encoding="utf-8")
        path = write_config(
            tmp_path / "config.toml", tmp_path / "state", backend={"hindsight": {"api_key_file": key_file}}
        )
        result = dreamer("--config", str(path), "check-config", "--json")
        assert result.returncode == 0, result.stderr
        data = json.loads(result.stdout)
        assert data["backend"]["hindsight"]["api_key"] == "**********"
        assert data["profiles"]["research"]["bank"] == "research"
        assert SECRET not in result.stdout


class TestHelp:
    def test_help_lists_commands_and_examples(self) -> None:
        """`dreamer --help` names every command and shows examples; a missing command exits 2."""
        result = dreamer("--help")
        assert result.returncode == 0
        for text in ("check-config", "run", "examples:", "--config", "--log-format", "--log-level"):
            assert text in result.stdout
        assert dreamer().returncode == 2

    def test_subcommand_help_has_examples(self) -> None:
        """Each command's --help explains it and shows an example invocation."""
        result = dreamer("check-config", "--help")
        assert result.returncode == 0
        assert "examples:" in result.stdout
        assert "dreamer check-config --json" in result.stdout
