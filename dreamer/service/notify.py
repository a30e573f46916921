"""sd_notify: tell systemd when the service is ready, reloading, stopping, alive, and what it is doing.

The ``sdnotify`` package is the transport (a no-op when ``$NOTIFY_SOCKET`` is unset); every value
first goes through :func:`sanitize_value` (one line of printable ASCII, capped), so that a STATUS
line always arrives. Why: ``docs/design/service.md``. Usage::

    notifier = Notifier.from_environ()
    notifier.ready(status="3 profiles; next: homelab 13:02Z")
    notifier.watchdog()
    notifier.reloading()            # RELOADING=1 + MONOTONIC_USEC=...
    notifier.stopping()
"""

from __future__ import annotations

import os
import time
import unicodedata
from collections.abc import Mapping
from typing import Protocol

import sdnotify

# systemd refuses STATUS= texts longer than 4096 bytes; stay well under so a line is never dropped.
MAX_VALUE_CHARS = 1024

_TRANSLITERATIONS: Mapping[str, str] = {
    "\u2010": "-",  # hyphen
    "\u2011": "-",  # non-breaking hyphen
    "\u2012": "-",  # figure dash
    "\u2013": "-",  # en dash
    "\u2014": "-",  # em dash
    "\u2015": "-",  # horizontal bar
    "\u2212": "-",  # minus sign
    "\u2018": "'",
    "\u2019": "'",
    "\u201a": "'",
    "\u201c": '"',
    "\u201d": '"',
    "\u201e": '"',
    "\u00ab": '"',
    "\u00bb": '"',
    "\u2026": "...",
    "\u2022": "*",
    "\u00b7": "-",
    "\u00d7": "x",
    "\u00b0": "deg",
    "\u00a0": " ",
    "\u2192": "->",
    "\u2190": "<-",
    "\u21d2": "=>",
    "\u2194": "<->",
    "\u2264": "<=",
    "\u2265": ">=",
    "\u2260": "!=",
    "\u2248": "~",
    "\u2713": "ok",  # check mark
    "\u2714": "ok",  # heavy check mark
    "\u2705": "ok",  # white heavy check mark
    "\u2717": "x",  # ballot x
    "\u2718": "x",  # heavy ballot x
    "\u274c": "x",  # cross mark
    "\u26a0": "!",  # warning sign
    "\u00df": "ss",
    "\u00e6": "ae",
    "\u00c6": "AE",
    "\u0153": "oe",
    "\u0152": "OE",
    "\u00f8": "o",
    "\u00d8": "O",
    "\u0142": "l",
    "\u0141": "L",
    "\u00f0": "d",
    "\u00de": "Th",
    "\u00fe": "th",
}


def sanitize_value(text: str, *, max_chars: int = MAX_VALUE_CHARS) -> str:
    """Reduce ``text`` to one line of printable ASCII that systemd will accept as a field value.

    >>> sanitize_value("research — promoted ✓ café")
    'research - promoted ok cafe'
    """
    out: list[str] = []
    for char in text:
        if " " <= char <= "~":
            out.append(char)
        elif char in _TRANSLITERATIONS:
            out.append(_TRANSLITERATIONS[char])
        elif char in "\r\n\t\v\f":
            # A newline would start a new KEY=VALUE assignment in the datagram.
            out.append(" ")
        elif unicodedata.category(char) == "Mn":
            # A combining mark left over from a decomposed letter; the base letter was kept.
            continue
        else:
            decomposed = unicodedata.normalize("NFKD", char)
            base = "".join(c for c in decomposed if " " <= c <= "~")
            out.append(base if base else "?")
    result = "".join(out)
    if len(result) > max_chars:
        result = result[: max_chars - 3] + "..."
    return result


def format_message(fields: Mapping[str, str | int]) -> str:
    """Build one notification datagram: ``KEY=value`` assignments separated by newlines."""
    lines = []
    for key, value in fields.items():
        if not key or not key.replace("_", "").isalnum() or not key.isascii() or not key.isupper():
            raise ValueError(f"not an sd_notify field name: {key!r}")
        lines.append(f"{key}={sanitize_value(str(value))}")
    return "\n".join(lines)


def watchdog_interval_s(environ: Mapping[str, str] | None = None, *, pid: int | None = None) -> float | None:
    """Seconds between ``WATCHDOG=1`` pings (half of ``$WATCHDOG_USEC``), or None when not asked for.

    ``$WATCHDOG_PID``, when set, names the process the watchdog is meant for; any other process
    (for instance a child that inherited the environment) must not ping.
    """
    env = os.environ if environ is None else environ
    raw = env.get("WATCHDOG_USEC", "").strip()
    if not raw:
        return None
    target_pid = env.get("WATCHDOG_PID", "").strip()
    if target_pid and target_pid != str(os.getpid() if pid is None else pid):
        return None
    try:
        usec = int(raw)
    except ValueError:
        return None
    if usec <= 0:
        return None
    return usec / 1_000_000 / 2


class _Transport(Protocol):
    def notify(self, state: str) -> None: ...


class Notifier:
    """Sends sd_notify messages; every method is a silent no-op when ``$NOTIFY_SOCKET`` is unset.

    ``sent`` counts the datagrams handed to the socket, ``enabled`` says whether there is one.
    """

    def __init__(self, transport: _Transport | None) -> None:
        self._transport = transport
        self.sent = 0

    @classmethod
    def from_environ(cls) -> Notifier:
        """Connect to ``$NOTIFY_SOCKET`` (read now, once); an unreachable socket disables notifying."""
        if not os.environ.get("NOTIFY_SOCKET"):
            return cls(None)
        try:
            # debug=True makes sdnotify raise instead of swallowing, so a bad socket is noticed here.
            transport: _Transport = sdnotify.SystemdNotifier(debug=True)
        except OSError:
            return cls(None)
        return cls(transport)

    @property
    def enabled(self) -> bool:
        return self._transport is not None

    def send(self, fields: Mapping[str, str | int]) -> bool:
        """Send one datagram; True when it was handed to the socket."""
        if self._transport is None:
            return False
        message = format_message(fields)
        try:
            self._transport.notify(message)
        except OSError:
            # systemd went away or the socket buffer is full: nothing useful to do but carry on.
            return False
        self.sent += 1
        return True

    def ready(self, *, status: str | None = None) -> bool:
        fields: dict[str, str | int] = {"READY": 1}
        if status is not None:
            fields["STATUS"] = status
        return self.send(fields)

    def status(self, text: str) -> bool:
        return self.send({"STATUS": text})

    def watchdog(self) -> bool:
        return self.send({"WATCHDOG": 1})

    def reloading(self, *, status: str | None = None) -> bool:
        """``RELOADING=1`` with the ``MONOTONIC_USEC`` timestamp systemd uses to order reloads."""
        fields: dict[str, str | int] = {
            "RELOADING": 1,
            "MONOTONIC_USEC": time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000,
        }
        if status is not None:
            fields["STATUS"] = status
        return self.send(fields)

    def stopping(self, *, status: str | None = None) -> bool:
        fields: dict[str, str | int] = {"STOPPING": 1}
        if status is not None:
            fields["STATUS"] = status
        return self.send(fields)
