"""Two hosts, one state: two real ``dreamer run`` daemons (their own state directories and notify
sockets) share one PostgreSQL schema (scripts/postgres-dev) and one embedded store, and share ten
profiles out between them by their leases.

Each profile is rolled up, each unit into one card, however the profiles are spread. One daemon
killed with SIGKILL is replaced by the other within the lease time plus a cycle. One stopped with
SIGSTOP past its lease loses its profiles to the other and, woken, takes its share back without a
card promoted twice. That a run whose lease was taken over cannot commit is shown where it can be
timed exactly: tests/integration/jobs/test_leases.py."""

from __future__ import annotations

import collections
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dreamer.config import Config, load_config
from dreamer.config.state import StateConfig
from dreamer.state.pgstore import open_postgres
from tests.support.configs import config_data, write_toml
from tests.support.daemon_harness import DaemonProcess, NotifySocket, has, wait_until
from tests.support.embedded_banks import retain_each, upstream_texts

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

PROFILES = tuple(f"p{i}" for i in range(10))
TTL_S = 3.0
# Generous: the machine running the tests may be busy.
DEADLINE_S = 120.0


def host_config(tmp: Path, name: str, url: str, schema: str) -> Path:
    data = config_data(
        ("global", "shared", *PROFILES),
        PROFILES,
        state_dir=str(tmp / name),
        backend={"kind": "embedded", "embedded": {"path": str(tmp / "memory.sqlite3")}},
        state={"backend": "postgres", "dsn": url, "schema": schema, "lease_ttl_s": TTL_S, "host_id": name},
        schedule={"interval_minutes": 0.02, "jitter_s": 0, "first_run_delay_s": 0, "drain_timeout_s": 30},
        peer_card={"enabled": False},
    )
    data["banks"]["global"]["access"] = "read_write"
    return write_toml(tmp / f"{name}.toml", data)


class Host:
    """One daemon with its notify socket."""

    def __init__(self, tmp: Path, name: str, config: Path) -> None:
        self.name = name
        self.sock = NotifySocket()
        self.sock.__enter__()
        args = ["-m", "dreamer", "run", "--config", str(config), "--log-format", "json"]
        self.daemon = DaemonProcess(args, log_path=tmp / f"{name}.log", env={"NOTIFY_SOCKET": self.sock.path})
        self.sock.wait_for(has("READY", "1"), what=f"READY=1 from {name}")

    def promoted(self) -> set[str]:
        """The profiles this daemon's runs promoted something for."""
        return {
            r["profile"]
            for r in self.daemon.records()
            if r.get("event") == "job finished" and r.get("outcome") == "promoted"
        }

    def close(self) -> None:
        self.daemon.close()
        self.sock.__exit__(None, None, None)


@pytest.fixture
def hosts(tmp_path: Path, postgres_url: str, postgres_schema: str) -> Iterator[dict[str, Any]]:
    configs = {name: host_config(tmp_path, name, postgres_url, postgres_schema) for name in ("a", "b")}
    started: dict[str, Host] = {}
    try:
        for name, path in configs.items():
            started[name] = Host(tmp_path, name, path)
        state = load_config(configs["a"]).state
        wait_until(lambda: len(live_hosts(state)) == 2, what="both hosts' heartbeats")
        # One more beat of each, so the first host knows of the second too (it beats every ttl/3).
        time.sleep(TTL_S / 3 + 0.5)
        yield {"hosts": started, "config": load_config(configs["a"])}
    finally:
        for host in started.values():
            if host.daemon.alive():
                host.daemon.send(signal.SIGCONT)
            host.close()


def live_hosts(state: StateConfig) -> list[str]:
    with open_postgres(state) as st:
        return [h.owner for h in st.live_hosts()]


def ledger_texts(state: StateConfig) -> list[str]:
    with open_postgres(state) as st:
        return [c.text for c in st.ledger()]


def all_held(config: Config, texts: dict[str, str]) -> bool:
    held = ledger_texts(config.state)
    return all(any(text in card for card in held) for text in texts.values())


def test_two_hosts_share_the_profiles_and_one_replaces_the_other(hosts: dict[str, Any]) -> None:
    a, b = hosts["hosts"]["a"], hosts["hosts"]["b"]
    config: Config = hosts["config"]

    first = retain_each(config, PROFILES, "one")
    wait_until(lambda: all_held(config, first), what="every profile rolled up", timeout=DEADLINE_S)
    # A run logs its end just after its commit: the log may lag the ledger by a moment.
    wait_until(lambda: a.promoted() | b.promoted() == set(PROFILES), what="the runs' log lines")
    assert a.promoted() and b.promoted(), "both hosts run a share of the profiles"

    a.daemon.send(signal.SIGKILL)
    a.daemon.wait()
    killed_at = time.monotonic()
    second = retain_each(config, PROFILES, "two")
    wait_until(
        lambda: all_held(config, second), what="the killed host's profiles taken over", timeout=DEADLINE_S
    )
    taken_over_s = time.monotonic() - killed_at
    wait_until(lambda: b.promoted() == set(PROFILES), what="the other host's runs of every profile")
    print(f"the killed host's profiles were rolled up by the other {taken_over_s:.1f} s after the kill")

    with open_postgres(config.state) as st:
        assert [h.owner.split("#")[0] for h in st.live_hosts()] == ["b"]
    cards = upstream_texts(config)
    twice = [t for t, n in collections.Counter(cards).items() if n > 1]
    assert twice == [], f"cards promoted upstream twice: {twice}"
    assert len(ledger_texts(config.state)) == len(cards) == 20


def test_a_paused_host_loses_its_profiles_and_takes_its_share_back(hosts: dict[str, Any]) -> None:
    a, b = hosts["hosts"]["a"], hosts["hosts"]["b"]
    config: Config = hosts["config"]
    first = retain_each(config, PROFILES, "one")
    wait_until(lambda: all_held(config, first), what="every profile rolled up", timeout=DEADLINE_S)
    before_a = a.promoted()

    a.daemon.send(signal.SIGSTOP)
    second = retain_each(config, PROFILES, "two")
    wait_until(
        lambda: all_held(config, second), what="the paused host's profiles taken over", timeout=DEADLINE_S
    )
    wait_until(lambda: before_a <= b.promoted(), what="the other host's runs of the paused host's profiles")

    woken_at = len(a.daemon.records())
    a.daemon.send(signal.SIGCONT)
    third = retain_each(config, PROFILES, "three")
    wait_until(
        lambda: all_held(config, third), what="every profile rolled up after the wake", timeout=DEADLINE_S
    )
    wait_until(
        lambda: any(
            r.get("event") == "job finished" and r.get("outcome") == "promoted"
            for r in a.daemon.records()[woken_at:]
        ),
        what="a promotion by the woken host (its share back)",
        timeout=DEADLINE_S,
    )
    cards = upstream_texts(config)
    twice = [t for t, n in collections.Counter(cards).items() if n > 1]
    assert twice == [] and len(cards) == 30, f"cards promoted upstream twice: {twice}"
