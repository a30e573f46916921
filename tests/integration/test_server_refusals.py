"""What a command says and how it exits when the memory server refuses: a wrong key is a setting to
fix (exit 1, naming the key's variable) on every command, and a busy server reached by a one-shot
command is not promised a retry it will not get. A real server on 127.0.0.1 answers every request
the same way (tests/support/hostile_server.py): Hindsight cannot be made to answer 401 to one bank
or 503 on demand."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.cli import run_dreamer
from tests.support.configs import config_data, loaded
from tests.support.hostile_server import Answer, HostileServer


def dreamer(cfg_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_dreamer(cfg_dir / "config.toml", *args, env={"REFUSED_KEY": "hs-wrong-key-0123456789"})


@pytest.fixture
def server(tmp_path: Path) -> Iterator[HostileServer]:
    running = HostileServer()
    data = config_data(
        ("global", "shared", "research"),
        ("research",),
        state_dir="state",
        backend={
            "kind": "hindsight",
            "hindsight": {
                "url": running.url,
                "api_key_env": "REFUSED_KEY",
                "read_timeout_s": 1,
                "connect_timeout_s": 1,
            },
        },
        retry={"max_attempts": 1},
    )
    data["banks"]["research"]["access"] = "read_write"
    loaded(tmp_path, data)
    yield running
    running.close()


UNAUTHORIZED = Answer(status=401, body=json.dumps({"detail": "Invalid API key"}))
BUSY = Answer(status=503, body=json.dumps({"detail": "busy"}), headers=(("Retry-After", "7"),))


class TestWrongKey:
    @pytest.mark.parametrize(
        "command",
        [
            ("recall", "anything", "--bank", "research"),
            ("recall", "anything", "--profile", "research"),
            ("reflect", "anything", "--bank", "research"),
            ("retain", "a fact", "--bank", "research"),
        ],
    )
    def test_exit_1_naming_the_key_setting(
        self, server: HostileServer, tmp_path: Path, command: tuple[str, ...]
    ) -> None:
        """401 is not "try again later" (75): exit 1, one line naming backend.hindsight.api_key_env."""
        server.answer = UNAUTHORIZED
        proc = dreamer(tmp_path, *command)
        assert proc.returncode == 1, (proc.stdout, proc.stderr)
        assert "api_key_env" in proc.stderr and "401" in proc.stderr, proc.stderr
        assert "Traceback" not in proc.stdout + proc.stderr


class TestBusyServer:
    def test_a_one_shot_retain_does_not_promise_a_retry(self, server: HostileServer, tmp_path: Path) -> None:
        """503 with Retry-After on ``dreamer retain``: exit 75, and the line says this command does
        not retry (it used to say "it will be retried"); one request was sent."""
        server.answer = BUSY
        proc = dreamer(tmp_path, "retain", "a fact", "--bank", "research")
        assert proc.returncode == 75, (proc.stdout, proc.stderr)
        assert "will be retried" not in proc.stderr
        assert "this command does not retry: run it again later" in proc.stderr, proc.stderr
        assert len([r for r in server.requests if r.method == "POST"]) == 1


#: 600 bytes, one every 50 ms: no single read waits long, the whole answer takes 30 s.
TRICKLE = Answer(status=200, body=json.dumps({"pad": "x" * 580}), trickle_s=0.05)


class TestTricklingServer:
    """11. A server that sends its answer a byte at a time: every outbound request is bounded by a
    total deadline, so the command ends (transient, exit 75) instead of hanging for as long as the
    server likes. The subprocess timeout of 120 s is a safety net, not a performance bound."""

    def test_a_hindsight_retain_is_bounded_in_all(self, server: HostileServer, tmp_path: Path) -> None:
        server.answer = TRICKLE
        proc = dreamer(tmp_path, "retain", "a fact", "--bank", "research")
        assert proc.returncode == 75, (proc.stdout, proc.stderr)
        assert "sent no whole answer within 2s" in proc.stderr, proc.stderr
