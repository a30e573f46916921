"""The gating part: one cycle over N profiles, 5% of them with new units, as the daemon runs it.

Every profile's job gates on the shared ``ActivityCache`` snapshot and ``Rollup.decide``; beside it, on
the same banks, the baseline that asks each profile's activity on its own. Backend requests are
counted where they leave.
"""

from __future__ import annotations

import argparse
import math
import shutil
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import anyio
import httpx

from bench._common import BenchError, RequestCounter, backend_section, open_counted_backend, progress
from bench.gating.banks import gating_config, mark_rolled_up, synthetic_text
from dreamer.backends.base import MemoryBackend, RetainItem
from dreamer.rollup.activity import ActivityCache
from dreamer.rollup.pipeline import Rollup
from dreamer.state import StateStore

T = TypeVar("T")

#: Share of profiles that get new units before the measured cycle.
ACTIVE_SHARE = 0.05
NEW_UNITS_PER_ACTIVE = 3
#: The per-profile baseline is measured on at most this many profiles, then scaled to N.
BASELINE_SAMPLE = 100


def active_profiles(names: Sequence[str], share: float = ACTIVE_SHARE) -> list[str]:
    """Every ``1/share``-th profile, at least one: the ones that get new units."""
    count = max(1, round(len(names) * share))
    step = len(names) / count
    return [names[int(i * step)] for i in range(count)]


def profile_names(n: int) -> list[str]:
    width = max(4, len(str(n)))
    return [f"p{i:0{width}d}" for i in range(n)]


async def bounded_gather(jobs: Sequence[Callable[[], Awaitable[T]]], limit: int) -> list[T]:
    """Run ``jobs`` with at most ``limit`` at once; results in order."""
    results: list[T | None] = [None] * len(jobs)
    semaphore = anyio.Semaphore(limit)

    async def one(index: int) -> None:
        async with semaphore:
            results[index] = await jobs[index]()

    async with anyio.create_task_group() as group:
        for index in range(len(jobs)):
            group.start_soon(one, index)
    return [r for r in results if r is not None]


async def settle(backend: MemoryBackend, bank_ids: Sequence[str], *, timeout_s: float = 120.0) -> None:
    """Wait until the banks' activity stops changing (Hindsight consolidates after a retain, later)."""
    previous = await backend.activity(list(bank_ids))
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        await anyio.sleep(1.0)
        current = await backend.activity(list(bank_ids))
        if current == previous:
            return
        previous = current
    raise BenchError(
        f"the banks were still being written {timeout_s:g} s after the setup; is the server busy?"
    )


@dataclass
class GatingRow:
    backend: str
    profiles: int
    active: int
    server_banks: int | None
    page_size: int | None
    baseline_sampled: bool
    gate_requests: int
    gate_s: float
    baseline_requests: int
    baseline_s: float
    decided_run: int
    cycle_requests: int
    runs: int
    reflect_calls: int
    summarise_calls: int
    cycle_s: float
    requests_by_kind: dict[str, int]

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


async def server_bank_count(args: argparse.Namespace) -> int | None:
    """How many banks the Hindsight server holds (the bank-list walk covers all of them)."""
    if args.backend != "hindsight":
        return None
    import os

    headers = {"Authorization": f"Bearer {os.environ[args.api_key_env]}"}
    async with httpx.AsyncClient(base_url=args.url, headers=headers, trust_env=False, timeout=30) as client:
        response = await client.get("/v1/default/banks", params={"limit": 1, "offset": 0})
        response.raise_for_status()
        total = response.json().get("total")
        return int(total) if isinstance(total, int) else None


async def gating_once(args: argparse.Namespace, n: int) -> GatingRow:
    names = profile_names(n)
    workdir = Path(tempfile.mkdtemp(prefix="dreamer-bench-gating-"))
    prefix = f"bench_{uuid.uuid4().hex[:8]}__" if args.backend == "hindsight" else ""
    counter = RequestCounter()
    try:
        config = gating_config(names, workdir / "state", backend_section(args), prefix)
        backend = open_counted_backend(config, counter)
        try:
            with StateStore.open(config.state_path) as state:
                progress(f"gating: {n} profiles on {args.backend}: writing one unit into every bank")
                await bounded_gather(
                    [
                        (
                            lambda name=name: backend.retain(  # type: ignore[misc]
                                config.bank_id(name), [RetainItem(content=synthetic_text(int(name[1:])))]
                            )
                        )
                        for name in names
                    ],
                    limit=8,
                )
                all_banks = [config.bank_id(p.bank) for p in config.enabled_profiles().values()]
                await settle(backend, all_banks)
                await mark_rolled_up(config, backend, state, names)
                active = active_profiles(names)
                for name in active:
                    items = [
                        RetainItem(content=synthetic_text(int(name[1:]) * 100 + k + 1))
                        for k in range(NEW_UNITS_PER_ACTIVE)
                    ]
                    await backend.retain(config.bank_id(name), items)
                await settle(backend, all_banks)
                server_banks = await server_bank_count(args)
                rollup = Rollup(config, backend, state)

                # Baseline first (it only reads): one activity request per profile. Past
                # BASELINE_SAMPLE profiles it is measured on a sample and scaled to N.
                sample = names[:BASELINE_SAMPLE]
                before = counter.snapshot()
                started = time.monotonic()
                for name in sample:
                    activity = (await backend.activity([config.bank_id(name)])).get(config.bank_id(name))
                    rollup.decide(name, activity)
                scale_up = len(names) / len(sample)
                baseline_s = (time.monotonic() - started) * scale_up
                baseline_requests = round(sum(counter.since(before).values()) * scale_up)

                # The daemon's way: one shared snapshot per cycle, then the active profiles run.
                progress(f"gating: {n} profiles: one cycle")
                cache = ActivityCache(ttl_s=3600)
                cycle_before = counter.snapshot()
                gate_s = 0.0
                gate_requests = 0
                decided_run = runs = reflect_calls = summarise_calls = 0
                cycle_started = time.monotonic()
                for name in names:
                    gate_before = counter.snapshot()
                    t0 = time.monotonic()
                    activity = await cache.get(backend, all_banks, config.bank_id(name))
                    decision = rollup.decide(name, activity)
                    gate_s += time.monotonic() - t0
                    gate_requests += sum(counter.since(gate_before).values())
                    if decision.run:
                        decided_run += 1
                        report = await rollup.run(name, activity=activity)
                        runs += 1
                        reflect_calls += report.reflect_attempts
                        summarise_calls += 1 if report.summariser else 0
                        if report.outcome not in ("promoted", "reinforced", "nothing_new"):
                            raise BenchError(f"the roll-up of {name} ended {report.outcome}: {report.reason}")
                cycle_s = time.monotonic() - cycle_started
                by_kind = counter.since(cycle_before)
        finally:
            await backend.aclose()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return GatingRow(
        backend=args.backend,
        profiles=n,
        active=len(active),
        server_banks=server_banks,
        page_size=config.backend.hindsight.page_size if args.backend == "hindsight" else None,
        baseline_sampled=len(names) > BASELINE_SAMPLE,
        gate_requests=gate_requests,
        gate_s=gate_s,
        baseline_requests=baseline_requests,
        baseline_s=baseline_s,
        decided_run=decided_run,
        cycle_requests=sum(by_kind.values()),
        runs=runs,
        reflect_calls=reflect_calls,
        summarise_calls=summarise_calls,
        cycle_s=cycle_s,
        requests_by_kind=dict(sorted(by_kind.items())),
    )


def walks(row: Mapping[str, Any]) -> float:
    """Bank-list walks the gating made: its requests over the pages one walk of the server's list needs."""
    banks, page_size = row.get("server_banks"), row.get("page_size")
    pages = max(1, math.ceil(banks / page_size)) if banks and page_size else 1
    return float(row["gate_requests"]) / pages


def gating_targets(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    lines = []
    for backend in sorted({r["backend"] for r in rows}):
        mine = [r for r in rows if r["backend"] == backend]
        constant = all(walks(r) == 1 for r in mine)
        detail = ", ".join(
            f"N={r['profiles']}: {r['gate_requests']} request(s) = {walks(r):g} walk(s)" for r in mine
        )
        lines.append(
            f"{'met   ' if constant else 'MISSED'} {backend}: gating costs one bank-list walk "
            f"whatever N: {detail}"
        )
        llm = [r for r in mine if r["reflect_calls"] or backend == "hindsight"]
        if llm:
            ok = all(r["reflect_calls"] == r["active"] for r in llm)
            lines.append(
                f"{'met   ' if ok else 'MISSED'} {backend}: reflect calls equal the active profiles: "
                + ", ".join(f"{r['reflect_calls']}/{r['active']}" for r in llm)
            )
        else:
            lines.append(
                f"       {backend}: summarise calls (extractive) per active profile: "
                + ", ".join(f"{r['summarise_calls']}/{r['active']}" for r in mine)
            )
    return lines
