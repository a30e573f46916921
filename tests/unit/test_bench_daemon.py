"""The daemon benchmark's own parts: /proc parsing, the notify socket, the config, the verdicts."""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path
from typing import Any

import pytest

from bench.daemon import (
    CLOCK_TICKS,
    config_text,
    cpu_seconds,
    parse_cpu_seconds,
    rss_mib,
    targets,
)
from bench.notify_socket import NotificationTimeout, NotifySocket, has, parse_fields, without_systemd
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


class TestNotify:
    def test_fields_of_a_datagram(self) -> None:
        """A notification's KEY=value lines become a mapping."""
        assert parse_fields("READY=1\nSTATUS=3 profiles; next: a=b") == {
            "READY": "1",
            "STATUS": "3 profiles; next: a=b",
        }

    def test_socket_receives_and_finds(self) -> None:
        """A datagram sent to the socket's path is received and found by a predicate."""
        with NotifySocket() as notify:
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as client:
                client.sendto(b"STATUS=starting", notify.path)
                client.sendto(b"READY=1\nSTATUS=up", notify.path)
            index = notify.wait_for(has("READY", "1"), what="READY=1", timeout=10)
            assert index == 1
            assert notify.count(has("STATUS")) == 2
            assert notify.count(has("STATUS"), after=1) == 1

    def test_each_message_keeps_its_text_fields_and_arrival(self) -> None:
        """Messages keep their order, text, fields and a monotonic arrival time after sending."""
        with NotifySocket() as notify:
            sent_at = time.monotonic()
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as client:
                client.sendto(b"STATUS=starting", notify.path)
                client.sendto(b"READY=1\nSTATUS=up", notify.path)
            notify.wait_for(has("READY"), timeout=10)
            assert notify.messages == ["STATUS=starting", "READY=1\nSTATUS=up"]
            assert len(notify) == 2
            assert notify.fields(1) == {"READY": "1", "STATUS": "up"}
            assert sent_at <= notify.arrived_at(0) <= notify.arrived_at(1) <= time.monotonic()

    def test_wait_past_the_deadline_lists_what_arrived(self) -> None:
        """A wait that times out names what it waited for and every message received."""
        with NotifySocket() as notify:
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as client:
                client.sendto(b"STATUS=starting", notify.path)
            notify.wait_for(has("STATUS"), timeout=10)
            with pytest.raises(NotificationTimeout, match=r"no STOPPING=1 within .*'STATUS=starting'"):
                notify.wait_for(has("STOPPING", "1"), what="STOPPING=1", timeout=0.05)

    def test_child_environment_drops_what_a_parent_unit_set(self) -> None:
        """Variables systemd sets for a service are left out; everything else is kept."""
        parent = {"NOTIFY_SOCKET": "/run/x", "WATCHDOG_USEC": "1", "DREAMER_CONFIG": "/etc/d", "HOME": "/h"}
        assert without_systemd(parent) == {"HOME": "/h"}


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


class TestTargets:
    def test_all_met(self) -> None:
        """A daemon inside every target gets four 'met' lines."""
        assert all(line.startswith("met") for line in targets(result()))

    def test_each_miss_is_reported(self) -> None:
        """Slow start, big RSS, RSS growth and busy idle are each reported as missed."""
        lines = targets(result(ready=2.0, rss=70.0, growth=3.0, cpu_pct=1.0))
        assert [line.startswith("MISSED") for line in lines] == [True, True, True, True]
