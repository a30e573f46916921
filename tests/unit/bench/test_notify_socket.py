"""The benchmarks' notify socket: datagrams received, parsed and waited for, and a child's
environment without what systemd set for the parent."""

from __future__ import annotations

import socket
import time

import pytest

from bench.notify_socket import NotificationTimeout, NotifySocket, has, parse_fields, without_systemd


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
