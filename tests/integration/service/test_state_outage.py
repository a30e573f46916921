"""The PostgreSQL state going away under a running daemon, and coming back.

A real ``dreamer run`` daemon keeps its state in a real PostgreSQL (scripts/postgres-dev), reached
through a TCP forwarder on 127.0.0.1 (tests/support/tcp_cut.py) that the test cuts: every open
connection closed and every new one refused, as a database restart or a partition looks to a
client. A real server cannot be told to vanish for a few seconds and return with its data, hence
the forwarder. While it is cut the daemon stays up, says what failed in one line per run (no
traceback), and commits nothing; once it is mended the next cycles roll up what came meanwhile,
each unit into one card, none promoted twice."""

from __future__ import annotations

import collections
import signal
import urllib.parse
from pathlib import Path

import pytest

from dreamer.config import Config, load_config
from dreamer.state.pgstore import open_postgres
from tests.support.configs import config_data, write_toml
from tests.support.daemon_harness import DaemonProcess, NotifySocket, has, wait_until
from tests.support.embedded_banks import retain_each, upstream_texts
from tests.support.tcp_cut import tcp_cut

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

PROFILES = ("p0", "p1")
DEADLINE_S = 120.0


def through(url: str, port: int) -> str:
    """``url`` with its port replaced by the forwarder's."""
    parts = urllib.parse.urlsplit(url)
    netloc = f"{parts.username}@127.0.0.1:{port}" if parts.username else f"127.0.0.1:{port}"
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc))


def write_config(tmp: Path, url: str, schema: str) -> Path:
    data = config_data(
        ("global", "shared", *PROFILES),
        PROFILES,
        state_dir=str(tmp / "state"),
        backend={"kind": "embedded", "embedded": {"path": str(tmp / "memory.sqlite3")}},
        state={"backend": "postgres", "dsn": url, "schema": schema, "lease_ttl_s": 3.0, "host_id": "solo"},
        schedule={"interval_minutes": 0.02, "jitter_s": 0, "first_run_delay_s": 0, "drain_timeout_s": 30},
        peer_card={"enabled": False},
    )
    data["banks"]["global"]["access"] = "read_write"
    return write_toml(tmp / "config.toml", data)


def held(config: Config, real_url: str, texts: list[str]) -> bool:
    """Every text in some ledger card, read past the forwarder."""
    state = config.state.model_copy(update={"dsn": real_url})
    with open_postgres(state) as st:
        cards = [c.text for c in st.ledger()]
    return all(any(t in card for card in cards) for t in texts)


def failures(records: list[dict[str, object]]) -> list[dict[str, object]]:
    return [r for r in records if r.get("event") == "job finished" and r.get("outcome") == "failed"]


def test_a_database_that_goes_away_stops_the_runs_not_the_daemon(
    tmp_path: Path, postgres_url: str, postgres_schema: str
) -> None:
    real = urllib.parse.urlsplit(postgres_url)
    assert real.hostname and real.port
    with tcp_cut(real.hostname, real.port) as cut, NotifySocket() as sock:
        config_path = write_config(tmp_path, through(postgres_url, cut.port), postgres_schema)
        config = load_config(config_path)
        first = list(retain_each(config, PROFILES, "one").values())
        args = ["-m", "dreamer", "run", "--config", str(config_path), "--log-format", "json"]
        env = {"NOTIFY_SOCKET": sock.path}
        with DaemonProcess(args, log_path=tmp_path / "daemon.log", env=env) as daemon:
            sock.wait_for(has("READY", "1"), what="READY=1")
            wait_until(lambda: held(config, postgres_url, first), what="the first units rolled up")

            cut.cut()
            seen = len(daemon.records())
            second = list(retain_each(config, PROFILES, "two").values())
            wait_until(
                lambda: {r.get("profile") for r in failures(daemon.records()[seen:])} == set(PROFILES),
                what="a failed run of each profile while the database was away",
                timeout=DEADLINE_S,
            )
            assert daemon.alive()
            assert not held(config, postgres_url, second), "nothing is committed while the state is away"
            reasons = {str(r.get("detail")) for r in failures(daemon.records()[seen:])}
            assert all(why.startswith("PostgreSQL state ") and "\n" not in why for why in reasons), reasons
            assert any(
                r.get("event", "").startswith("heartbeat failed") for r in daemon.records()[seen:]
            ), "the heartbeat's failure is logged"

            cut.mend()
            wait_until(lambda: held(config, postgres_url, second), what="the units of the outage rolled up")
            daemon.send(signal.SIGTERM)
            assert daemon.wait() == 0
        assert "Traceback" not in daemon.stderr(), daemon.stderr()[-3000:]
        assert not [r for r in daemon.records() if "exception" in r], "a record carries a traceback"
    cards = upstream_texts(config)
    twice = [t for t, n in collections.Counter(cards).items() if n > 1]
    assert twice == [] and len(cards) == 4, cards
