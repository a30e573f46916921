"""Profiles shared out among hosts (:mod:`dreamer.jobs.leases`): the rendezvous choice of a host, and
real roll-ups on the embedded store with their state on a real PostgreSQL (scripts/postgres-dev),
holding their profile's and upstream bank's leases, refused while another host holds one, and
fenced: a run whose lease was taken over meanwhile commits nothing."""

from __future__ import annotations

import collections
import io
import json
from pathlib import Path
from typing import Any

import pytest

from dreamer.backends.base import RetainItem
from dreamer.backends.embedded.backend import EmbeddedBackend
from dreamer.commands.status import status_command
from dreamer.config import Config
from dreamer.errors import RunBusyError
from dreamer.jobs import leases
from dreamer.jobs.leases import PROFILE_LEASE, UPSTREAM_LEASE, HostSeat, preferred_host, seat_for
from dreamer.jobs.rollup import RollupJob
from dreamer.service.plan import plan_jobs
from dreamer.state.pgstore import open_postgres
from tests.support.configs import config_data, loaded


class TestPreferredHost:
    def test_profiles_spread_evenly_and_a_host_that_goes_moves_only_its_own(self) -> None:
        hosts = [f"host-{i}#ab" for i in range(4)]
        profiles = [f"profile-{i}" for i in range(10_000)]
        before = {p: preferred_host(p, hosts) for p in profiles}
        shares = collections.Counter(before.values())
        assert set(shares) == set(hosts)
        assert 0.9 * 2_500 < min(shares.values()) <= max(shares.values()) < 1.1 * 2_500
        after = {p: preferred_host(p, hosts[1:]) for p in profiles}
        moved = {p for p in profiles if before[p] != after[p]}
        assert moved == {p for p in profiles if before[p] == hosts[0]}
        assert preferred_host("p", []) is None

    def test_a_seat_runs_a_profile_only_when_it_comes_first(self) -> None:
        seat = HostSeat("a.example:1", 30)
        assert seat.runs_here("anything")  # before its first heartbeat the lease decides
        seat.hosts = (seat.owner, "other#00")
        mine = [p for p in (f"p{i}" for i in range(200)) if seat.runs_here(p)]
        assert 0 < len(mine) < 200
        assert all(preferred_host(p, seat.hosts) == seat.owner for p in mine)


@pytest.fixture
def pg_config(tmp_path: Path, postgres_url: str, postgres_schema: str) -> Any:
    state = {"backend": "postgres", "dsn": postgres_url, "schema": postgres_schema, "lease_ttl_s": 30}
    schedule = {"interval_minutes": 0.001, "jitter_s": 0}
    cfg = loaded(tmp_path, config_data(state_dir=str(tmp_path / "state"), state=state, schedule=schedule))
    leases._SEAT = None  # a seat of this test's own
    yield cfg
    leases._SEAT = None


async def retain(cfg: Config, text: str) -> None:
    backend = EmbeddedBackend(cfg.embedded_path)
    try:
        await backend.retain(cfg.bank_id("research"), [RetainItem(content=text)])
    finally:
        await backend.aclose()


@pytest.mark.postgres
class TestRollupsOnASharedState:
    async def test_a_run_holds_both_leases_and_gives_them_back(self, pg_config: Config) -> None:
        await retain(pg_config, "Atlas runs Nextcloud 28 behind nginx.")
        seen: dict[str, Any] = {}
        store = open_postgres(pg_config.state)

        def during(step: str, profile: str) -> None:
            seen.setdefault(step, {h.name: h.left_s for h in store.holders()})

        job = RollupJob(on_step=during)
        try:
            outcome = await job(pg_config, plan_jobs(pg_config)["rollup:research"], "run-1")
            assert outcome.outcome == "promoted", outcome.detail
            held = next(iter(seen.values()))
            bank = pg_config.upstream_bank_id("research")
            assert set(held) == {PROFILE_LEASE + "research", UPSTREAM_LEASE + bank}
            assert all(left > 0 for left in held.values())
            assert all(h.left_s <= 0 and h.token == 1 for h in store.holders())  # given back
            assert [c.text for c in store.ledger()] == ["Atlas runs Nextcloud 28 behind nginx."]
        finally:
            await job.aclose()
            store.close()

    async def test_a_profile_another_host_holds_is_skipped(self, pg_config: Config) -> None:
        await retain(pg_config, "Borg backs up atlas nightly at 02:00.")
        store = open_postgres(pg_config.state)
        job = RollupJob()
        try:
            assert store.take_lease(PROFILE_LEASE + "research", "elsewhere#1", 30) is not None
            with pytest.raises(RunBusyError, match="elsewhere#1"):
                await job(pg_config, plan_jobs(pg_config)["rollup:research"], "run-1")
            assert store.ledger() == []
        finally:
            await job.aclose()
            store.close()

    async def test_a_run_whose_lease_is_taken_over_commits_nothing(self, pg_config: Config) -> None:
        """The lease is made to expire and another host takes it while the run judges (a pause
        past the expiry, as SIGSTOP would make): the run's commit is refused by the token
        (:class:`~dreamer.errors.LeaseLostError`, reported as the run's ``busy`` outcome)."""
        await retain(pg_config, "Grafana listens on port 3000 on host hermes-mon.")
        store = open_postgres(pg_config.state)
        name = PROFILE_LEASE + "research"

        def take_over(step: str, profile: str) -> None:
            seat = seat_for(pg_config)
            assert seat is not None
            if store.holders(name) and store.holders(name)[0].owner == seat.owner:
                store.release_lease(name, seat.owner)
                assert store.take_lease(name, "thief#1", 30) is not None

        job = RollupJob(on_step=take_over)
        try:
            outcome = await job(pg_config, plan_jobs(pg_config)["rollup:research"], "run-1")
            assert outcome.outcome == "busy" and "thief#1 (token 2)" in outcome.detail
            assert "no longer holds the lease" in outcome.detail
            assert store.ledger() == [] and store.watermark("research").created_at is None
            [holder] = store.holders(name)
            assert (holder.owner, holder.token) == ("thief#1", 2)
        finally:
            await job.aclose()
            store.close()

    async def test_status_shows_the_hosts_and_each_profiles_holder(self, pg_config: Config) -> None:
        """Besides the hosts and holders, status says how the vectors are kept: bytes searched in
        memory, and whether the database has pgvector (which no search uses)."""
        store = open_postgres(pg_config.state)
        try:
            store.heartbeat("atlas#1", "atlas:42", 30)
            assert store.take_lease(PROFILE_LEASE + "research", "atlas#1", 30) is not None
            out = io.StringIO()
            await status_command(pg_config, as_json=True, out=out)
            doc = json.loads(out.getvalue())
            assert doc["state_backend"] == "postgres" and pg_config.state.schema_name in doc["state"]
            assert [h["host"] for h in doc["hosts"]] == ["atlas#1"]
            [row] = doc["profiles"]
            assert row["holder"]["host"] == "atlas#1" and 0 < row["holder"]["expires_in_s"] <= 30
            text = io.StringIO()
            await status_command(pg_config, as_json=False, out=text)
            assert "hosts alive: atlas#1 (atlas:42)" in text.getvalue()
            assert "held by atlas#1 for" in text.getvalue()
            [ext] = store._conn.execute(
                "SELECT COUNT(*) FROM pg_extension WHERE extname = 'vector'"
            ).fetchone()
            storage = doc["embeddings"]["vector_storage"]
            said = "installed, not used" if ext else "pgvector not installed"
            assert storage.startswith("float16 bytes (bytea), searched in memory; ") and said in storage
            assert f"vectors stored: none ({storage})" in text.getvalue()
        finally:
            store.close()
