"""A stand-in for systemd's notification socket: every datagram a ``Type=notify`` service sends.

:class:`NotifySocket` binds the ``AF_UNIX``/``SOCK_DGRAM`` socket systemd would own (in a short
directory under ``/tmp``: socket paths must stay under 108 bytes) and keeps each datagram with the
``time.monotonic()`` of its arrival, so a caller can wait for a state (``READY=1``, ``STOPPING=1``)
and measure when it came. :func:`without_systemd` is the environment for the service's process
with whatever a parent systemd unit set left out, so the child hears only from this socket. The
daemon benchmark and the tests that drive a real ``dreamer run`` both use them.
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

__all__ = [
    "DEADLINE_S",
    "SYSTEMD_VARIABLES",
    "Notification",
    "NotificationTimeout",
    "NotifySocket",
    "has",
    "parse_fields",
    "without_systemd",
]

#: Generous: the machine may be busy with other work.
DEADLINE_S = 60.0

Predicate = Callable[[Mapping[str, str]], bool]

#: What systemd sets for a service (and Dreamer reads): a parent unit's values must not leak in.
SYSTEMD_VARIABLES = frozenset(
    {
        "NOTIFY_SOCKET",
        "WATCHDOG_USEC",
        "WATCHDOG_PID",
        "JOURNAL_STREAM",
        "INVOCATION_ID",
        "STATE_DIRECTORY",
        "CONFIGURATION_DIRECTORY",
        "CREDENTIALS_DIRECTORY",
        "DREAMER_CONFIG",
    }
)


class NotificationTimeout(Exception):
    """The awaited notification did not arrive in time; the message lists every one that did."""


def parse_fields(message: str) -> dict[str, str]:
    """The ``KEY=value`` lines of one sd_notify datagram."""
    fields: dict[str, str] = {}
    for line in message.split("\n"):
        key, sep, value = line.partition("=")
        if sep:
            fields[key] = value
    return fields


def without_systemd(environ: Mapping[str, str]) -> dict[str, str]:
    """``environ`` without :data:`SYSTEMD_VARIABLES`, for a child that gets only the ones it is given."""
    return {key: value for key, value in environ.items() if key not in SYSTEMD_VARIABLES}


def has(key: str, value: str | None = None) -> Predicate:
    """Predicate: the message sets ``key`` (to ``value``, if given)."""
    return lambda fields: key in fields and (value is None or fields[key] == value)


@dataclass(frozen=True, slots=True)
class Notification:
    """One datagram: its decoded text, its fields, and when it arrived (``time.monotonic()``)."""

    text: str
    fields: Mapping[str, str]
    arrived_at: float


class NotifySocket:
    """The socket systemd would own; the datagrams received so far are numbered from 0."""

    def __init__(self) -> None:
        self._dir = tempfile.mkdtemp(prefix="dn-", dir="/tmp")
        self.path = os.path.join(self._dir, "notify")
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._sock.bind(self.path)
        # A short timeout so the receiving thread notices close() soon.
        self._sock.settimeout(0.2)
        self._received: list[Notification] = []
        self._cond = threading.Condition()
        self._closed = False
        self._thread = threading.Thread(target=self._receive, name="notify-socket", daemon=True)
        self._thread.start()

    def _receive(self) -> None:
        while not self._closed:
            try:
                data = self._sock.recv(65536)
            except TimeoutError:
                continue
            except OSError:
                return
            arrived_at = time.monotonic()
            text = data.decode("utf-8", errors="replace")
            with self._cond:
                self._received.append(Notification(text, parse_fields(text), arrived_at))
                self._cond.notify_all()

    def __len__(self) -> int:
        with self._cond:
            return len(self._received)

    @property
    def notifications(self) -> list[Notification]:
        """Every datagram received so far, in arrival order."""
        with self._cond:
            return list(self._received)

    @property
    def messages(self) -> list[str]:
        """The decoded text of every datagram received so far."""
        return [n.text for n in self.notifications]

    def fields(self, index: int) -> dict[str, str]:
        """The ``KEY=value`` assignments of message ``index``."""
        return dict(self.notifications[index].fields)

    def arrived_at(self, index: int) -> float:
        """The ``time.monotonic()`` at which message ``index`` arrived."""
        return self.notifications[index].arrived_at

    def wait_for(
        self,
        predicate: Predicate,
        *,
        after: int = 0,
        timeout: float = DEADLINE_S,
        what: str = "a notification",
    ) -> int:
        """Index of the first message at or after ``after`` whose fields satisfy ``predicate``."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for index in range(after, len(self._received)):
                    if predicate(self._received[index].fields):
                        return index
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    received = [n.text for n in self._received]
                    raise NotificationTimeout(f"no {what} within {timeout:g}s; received: {received!r}")
                self._cond.wait(min(remaining, 0.5))

    def count(self, predicate: Predicate, *, after: int = 0) -> int:
        """How many messages at or after ``after`` satisfy ``predicate``."""
        return sum(1 for n in self.notifications[after:] if predicate(n.fields))

    def close(self) -> None:
        self._closed = True
        self._sock.close()
        self._thread.join(timeout=5)
        shutil.rmtree(self._dir, ignore_errors=True)

    def __enter__(self) -> NotifySocket:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
