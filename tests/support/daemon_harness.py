"""Drive a real ``dreamer run`` process from a test: a notify socket, its logs, its signals.

- :class:`NotifySocket` (from :mod:`bench.notify_socket`, shared with the daemon benchmark) binds
  the ``AF_UNIX``/``SOCK_DGRAM`` socket systemd would own and collects every datagram the daemon
  sends; :func:`has` builds the predicates its ``wait_for`` takes.
- :class:`DaemonProcess` starts the daemon with its stdout in a file and reads that file back as
  log records (one JSON object per line, optionally behind a journal ``<N>`` priority prefix).
- :func:`write_config` writes a small, fast-cycling configuration.

Every wait has a deadline and fails with what was seen so far; nothing here asserts on timing.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from bench.notify_socket import NotifySocket as NotifySocket
from bench.notify_socket import has as has
from bench.notify_socket import without_systemd
from tests.support.configs import BANK_IDS, config_data, toml_text, write_toml

REPO_ROOT = Path(__file__).resolve().parents[2]
# Generous: the machine running the tests may be busy with other work.
DEADLINE_S = 60.0

_PREFIX = re.compile(r"^<([0-7])>")


def wait_until(condition: Callable[[], bool], *, what: str, timeout: float = DEADLINE_S) -> None:
    """Poll ``condition`` until it holds; fail with ``what`` at the deadline."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"no {what} within {timeout:g}s")
        time.sleep(0.05)


def parse_log_line(line: str) -> tuple[int | None, dict[str, Any]]:
    """``(priority or None, record)`` for one line of daemon output; raises if it is not JSON."""
    match = _PREFIX.match(line)
    priority = int(match.group(1)) if match else None
    body = line[match.end() :] if match else line
    record = json.loads(body)
    if not isinstance(record, dict):
        raise ValueError(f"log line is not a JSON object: {line!r}")
    return priority, record


class DaemonProcess:
    """A daemon subprocess whose stdout goes to ``log_path``; always stopped at exit."""

    def __init__(
        self,
        args: Sequence[str],
        *,
        log_path: Path,
        env: Mapping[str, str] | None = None,
        journal: bool = False,
    ) -> None:
        self.log_path = log_path
        self.stderr_path = log_path.with_suffix(".stderr")
        environment = without_systemd(os.environ)
        environment.update(env or {})
        environment["PYTHONUNBUFFERED"] = "1"
        self._out = open(log_path, "wb")  # noqa: SIM115 - closed in close()
        self._err = open(self.stderr_path, "wb")  # noqa: SIM115 - closed in close()
        if journal:
            st = os.fstat(self._out.fileno())
            environment["JOURNAL_STREAM"] = f"{st.st_dev}:{st.st_ino}"
        self.proc = subprocess.Popen(
            [sys.executable, *args],
            cwd=REPO_ROOT,
            env=environment,
            stdin=subprocess.DEVNULL,
            stdout=self._out,
            stderr=self._err,
        )

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def send(self, sig: signal.Signals) -> None:
        self.proc.send_signal(sig)

    def lines(self) -> list[str]:
        text = self.log_path.read_text(encoding="utf-8", errors="replace")
        # The last line may still be being written.
        return [line for line in text.split("\n")[:-1] if line.strip()]

    def records(self) -> list[dict[str, Any]]:
        return [parse_log_line(line)[1] for line in self.lines()]

    def stderr(self) -> str:
        return self.stderr_path.read_text(encoding="utf-8", errors="replace")

    def wait_for_records(
        self,
        predicate: Callable[[dict[str, Any]], bool],
        *,
        count: int = 1,
        after: int = 0,
        timeout: float = DEADLINE_S,
        what: str = "a log record",
    ) -> list[tuple[int, dict[str, Any]]]:
        """The first ``count`` records at or after index ``after`` matching ``predicate``."""
        deadline = time.monotonic() + timeout
        while True:
            found = [(i, r) for i, r in enumerate(self.records()) if i >= after and predicate(r)]
            if len(found) >= count:
                return found[:count]
            if not self.alive():
                # One more read: the process may have written its last lines as it exited.
                found = [(i, r) for i, r in enumerate(self.records()) if i >= after and predicate(r)]
                if len(found) >= count:
                    return found[:count]
                raise AssertionError(
                    f"daemon exited ({self.proc.returncode}) before {count} x {what}; "
                    f"log tail: {self.lines()[-15:]!r}; stderr: {self.stderr()[-2000:]!r}"
                )
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"fewer than {count} x {what} within {timeout:g}s; log tail: {self.lines()[-15:]!r}"
                )
            time.sleep(0.05)

    def wait_for_record(
        self, predicate: Callable[[dict[str, Any]], bool], **kwargs: Any
    ) -> tuple[int, dict[str, Any]]:
        return self.wait_for_records(predicate, count=1, **kwargs)[0]

    def wait(self, timeout: float = DEADLINE_S) -> int:
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(
                f"daemon still running after {timeout:g}s; log tail: {self.lines()[-15:]!r}"
            ) from None

    def close(self) -> None:
        if self.alive():
            self.proc.kill()
            self.proc.wait(timeout=DEADLINE_S)
        self._out.close()
        self._err.close()

    def __enter__(self) -> DaemonProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def job_finished(profile: str | None = None, outcome: str | None = None) -> Callable[[dict[str, Any]], bool]:
    """Predicate: a ``job finished`` record (of ``profile``, with ``outcome``, if given)."""

    def match(record: dict[str, Any]) -> bool:
        return (
            record.get("event") == "job finished"
            and (profile is None or record.get("profile") == profile)
            and (outcome is None or record.get("outcome") == outcome)
        )

    return match


def event_is(event: str) -> Callable[[dict[str, Any]], bool]:
    return lambda record: record.get("event") == event


def daemon_config(
    state_dir: Path,
    *,
    profiles: Iterable[str] = ("research",),
    schedule: Mapping[str, float | int] | None = None,
    **sections: Any,
) -> dict[str, Any]:
    """A valid configuration whose jobs run every ~1 s, starting at once; ``schedule`` changes
    single settings, ``sections`` add or replace top-level keys."""
    settings: dict[str, float | int] = {
        "interval_minutes": 0.02,
        "jitter_s": 0,
        "first_run_delay_s": 0,
        "drain_timeout_s": 120,
        "job_timeout_s": 300,
    }
    settings.update(schedule or {})
    return config_data(tuple(BANK_IDS), profiles, state_dir=state_dir, schedule=settings, **sections)


def config_text(state_dir: Path, **kwargs: Any) -> str:
    """:func:`daemon_config` as TOML."""
    return toml_text(daemon_config(state_dir, **kwargs))


def write_config(path: Path, state_dir: Path, **kwargs: Any) -> Path:
    """Write :func:`daemon_config` to ``path``."""
    return write_toml(path, daemon_config(state_dir, **kwargs))
