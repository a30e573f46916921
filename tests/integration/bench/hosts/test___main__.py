"""``python -m bench.hosts --quick`` on a real SQLite file (and on PostgreSQL when a test database is
configured): the result has every field the docs read, and no profile is ever run twice at once.
Also: a simulated run sends exactly the statements of the daemon's own :meth:`HostSeat.holding`."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from bench.hosts.__main__ import main, render
from bench.hosts.host import CycleStats, SimHost
from dreamer.state import StateStore

pytestmark = pytest.mark.slow


def quick(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    status = main(["--quick", "--json", *args])
    result: dict[str, Any] = json.loads(capsys.readouterr().out)
    assert status == 0, (result["safety"], result["longest_beat_gap_s"])
    return result


def check(result: dict[str, Any]) -> None:
    """The fields of the four measures, and the leases' promises kept."""
    spread = result["spread"]
    assert sum(spread["per_host"].values()) == result["profiles"] == 200
    assert len(spread["per_host"]) == result["hosts"] == 3
    assert spread["min"] <= spread["ideal"] <= spread["max"] and spread["max_over_ideal"] >= 1
    assert [s["unrun"] for s in result["steady"]] == [0, 0]
    events = {t["how"]: t for t in result["transitions"]}
    assert set(events) == {"kill", "join", "leave"}
    for t in events.values():
        assert t["covered"] == t["profiles"] > 0, t
        assert t["all_s"] is not None and t["all_ttl"] == pytest.approx(t["all_s"] / result["ttl"])
        assert t["cycles"] >= 0
    # A dead host's profiles wait at least for its heartbeat row to expire.
    assert events["kill"]["first_s"] >= result["ttl"] / 3 and events["kill"]["held"]
    rt = result["round_trips"]
    assert rt["per_run"] > 0 and rt["per_host_per_cycle"] > rt["per_run"]
    assert rt["per_run_by_kind"]["BEGIN"] >= 5  # take, take, commit, release, release
    banks = result["upstream_banks"]
    assert banks["global"]["runs"] + banks["global"]["busy_upstream"] >= 1
    safety = result["safety"]
    assert safety["duplicates"] == 0, safety
    assert safety["overlapping"] == safety["bank_overlapping"] == 0
    assert safety["tokens_ok"] and safety["runs"] > 0
    # Run by two hosts one after the other in a steady cycle only when a heartbeat came late (a
    # loaded machine: the three simulated hosts keep the one SQLite write lock busy, whose waiters
    # back off up to 100 ms, so a heartbeat can lose to them for longer than the lease time).
    assert safety["steady_same_cycle_duplicates"] == 0 or result["late_beats"], safety
    text = render(result)
    assert "(1) Spread" in text and "(4) Duplicate runs" in text


def test_quick_on_sqlite(capsys: pytest.CaptureFixture[str]) -> None:
    result = quick(capsys)
    assert result["backend"] == "sqlite"
    check(result)


@pytest.mark.postgres
def test_quick_on_postgres(postgres_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    """The same on the test PostgreSQL server (a schema of the benchmark's own, dropped after)."""
    result = quick(capsys, "--backend", "postgres", "--dsn", postgres_url)
    assert result["backend"] == "postgres"
    check(result)
    assert result["round_trips"]["per_run_by_kind"]["SELECT pg_advisory_xact_lock"] >= 5


async def test_a_simulated_run_sends_what_holding_sends(tmp_path: Path) -> None:
    """The simulation's synchronous run and the daemon's ``HostSeat.holding`` around the same
    commit send the same statements, kind for kind."""
    path = tmp_path / "state.sqlite3"
    StateStore.open(path).close()
    host = SimHost("h", 30.0, lambda: StateStore.open(path), own_beat_store=True)
    try:
        host.start()
        before = host.counter.snapshot()[0]
        stats = CycleStats("h", host.owner, 0)
        host._run("p1", "up", stats)
        assert stats.ran == 1
        middle = host.counter.snapshot()[0]
        async with host.seat.holding(host.store, "p2", "up"):
            host._commit("p2", "up", 0)
        after = host.counter.snapshot()[0]
    finally:
        host.close()
    simulated, real = Counter(middle), Counter(after)
    simulated.subtract(before)
    real.subtract(middle)
    assert +simulated == +real
    assert sum(simulated.values()) == 21
