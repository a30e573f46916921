"""The command: ``python -m bench.hosts [--backend sqlite|postgres] [--dsn URL] [--profiles 10000]
[--hosts 4] [--ttl 3] [--cycles 3] [--profiles-per-bank 100] [--global-profiles 400]
[--work-ms 50] [--quick] [--json]``.

``--backend sqlite`` (the default) shares one SQLite file in a temporary directory; ``postgres``
a new schema (``bench_hosts_<random>``) of the database at ``--dsn`` (default: the environment
variable ``DREAMER_TEST_POSTGRES_URL``), dropped at the end. ``--quick`` is the CI size: 200
profiles, 3 hosts, a lease time of 1.5 s, 2 steady cycles, 60 profiles of 20 ms runs on the
upstream banks' cycles.

The exit status is 1 when the log shows two hosts running one profile (or promoting into one
bank) at once, or a lease's token not raised by a takeover; 2 when it cannot run. A profile run by
two hosts one after the other in one steady cycle is reported (it means a heartbeat came later
than the lease time), not failed.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import secrets
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from bench._common import BenchError, machine_info, machine_line, print_json, progress, quiet_logs
from bench.hosts.run import simulate
from bench.hosts.tables import tables
from bench.postgres import DSN_ENV, drop_schema, loopback
from dreamer.config.state import StateConfig
from dreamer.errors import StateFileError
from dreamer.state import StateStore

FULL: dict[str, Any] = {
    "profiles": 10_000, "hosts": 4, "ttl": 3.0, "cycles": 3, "global_profiles": 400, "work_ms": 50.0
}
QUICK: dict[str, Any] = {
    "profiles": 200, "hosts": 3, "ttl": 1.5, "cycles": 2, "global_profiles": 60, "work_ms": 20.0
}

Opener = Callable[[], StateStore]


@contextlib.contextmanager
def database(backend: str, dsn: str | None) -> Iterator[tuple[Opener, bool, str]]:
    """What opens one more store on the shared database, whether a host's heartbeat needs a store
    of its own (SQLite), and how the tables name the database. Removed at the end."""
    if backend == "sqlite":
        with tempfile.TemporaryDirectory(prefix="bench-hosts-") as tmp:
            path = Path(tmp) / "state.sqlite3"
            StateStore.open(path).close()
            yield (lambda: StateStore.open(path)), True, "SQLite (one file, WAL, synchronous=FULL)"
        return
    if not dsn:
        raise BenchError(f"--backend postgres needs --dsn URL or the environment variable {DSN_ENV}")
    from dreamer.state.pgstore import open_postgres

    dsn = loopback(dsn)
    schema = f"bench_hosts_{secrets.token_hex(4)}"
    try:
        config = StateConfig.model_validate({"backend": "postgres", "dsn": dsn, "schema": schema})
    except ValidationError as exc:
        raise BenchError(f"--dsn: {exc.errors()[0]['msg']}") from None
    try:
        yield (lambda: open_postgres(config)), False, f"PostgreSQL (schema {schema}, one pool per host)"
    finally:
        drop_schema(dsn, schema)


def run_benchmark(args: argparse.Namespace) -> dict[str, Any]:
    sizes = QUICK if args.quick else FULL
    knobs = {k: getattr(args, k) if getattr(args, k) is not None else v for k, v in sizes.items()}
    if knobs["hosts"] < 2:
        raise BenchError("--hosts must be at least 2 (one dies, one joins, one leaves)")
    if knobs["profiles"] < knobs["hosts"]:
        raise BenchError("--profiles must be at least --hosts")
    quiet_logs()
    with database(args.backend, args.dsn or os.environ.get(DSN_ENV)) as (open_store, own_beat_store, what):
        measured = simulate(
            open_store,
            own_beat_store=own_beat_store,
            profiles=knobs["profiles"],
            hosts=knobs["hosts"],
            ttl_s=knobs["ttl"],
            cycles=knobs["cycles"],
            per_bank=args.profiles_per_bank,
            global_profiles=knobs["global_profiles"],
            work_s=knobs["work_ms"] / 1000,
            max_cycles_after=args.max_cycles_after,
            seed=args.seed,
        )
    return {
        "backend": args.backend,
        "database": what,
        "quick": args.quick,
        **knobs,
        "profiles_per_bank": args.profiles_per_bank,
        "commit": "tiny: watermark read, run start, commit_rollup with no cards (fenced by both leases)",
        **measured,
        "machine": machine_info(),
    }


def render(result: Mapping[str, Any]) -> str:
    """The tables."""
    per_bank = result["profiles_per_bank"]
    banks = "one global upstream bank" if per_bank <= 0 else f"one upstream bank per {per_bank} profiles"
    head = (
        f"Many hosts, one state: {result['database']}, {result['profiles']} profiles, "
        f"{result['hosts']} hosts, lease time {result['ttl']:g} s, {banks}"
    )
    return "\n\n".join([head, *tables(result), machine_line()])


def violations(result: Mapping[str, Any]) -> list[str]:
    """What the log shows that the leases promise never happens."""
    safety = result["safety"]
    out = []
    if safety["duplicates"]:
        out.append(f"{safety['duplicates']} duplicate runs")
    if not safety["tokens_ok"]:
        out.append("lease tokens not raised by a takeover")
    return out


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.hosts", description="Many hosts sharing one state: leases, spread, takeover."
    )
    parser.add_argument("--backend", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--dsn", help=f"PostgreSQL connection string (default: ${DSN_ENV})")
    parser.add_argument("--profiles", type=int, help="profiles (default 10000; quick 200)")
    parser.add_argument("--hosts", type=int, help="simulated hosts (default 4; quick 3)")
    parser.add_argument("--ttl", type=float, help="lease time in seconds (default 3; quick 1.5)")
    parser.add_argument("--cycles", type=int, help="steady cycles (default 3; quick 2)")
    parser.add_argument(
        "--profiles-per-bank", type=int, default=100,
        help="profiles per upstream bank, in order (default 100; 0: one global bank for all)",
    )
    parser.add_argument(
        "--global-profiles", type=int,
        help="profiles of the two cycles that compare upstream banks per --profiles-per-bank with one "
        "global bank (default 400; quick 60; 0 skips them)",
    )
    parser.add_argument(
        "--work-ms", type=float,
        help="how long each run of those two cycles holds its leases (default 50; quick 20)",
    )
    parser.add_argument(
        "--max-cycles-after", type=int, default=6,
        help="cycles after a host stops or joins to wait for its profiles to be run (default 6)",
    )
    parser.add_argument("--seed", type=int, default=0, help="the hosts' profile orders (default 0)")
    parser.add_argument("--quick", action="store_true", help="the CI size")
    parser.add_argument("--json", action="store_true", help="print the result as JSON instead of tables")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        result = run_benchmark(args)
    except (BenchError, StateFileError) as exc:
        progress(f"bench.hosts: {exc}")
        return 2
    if args.json:
        print_json(result)
    else:
        print(render(result))
    wrong = violations(result)
    for line in wrong:
        progress(f"bench.hosts: MISSED: {line}")
    return 1 if wrong else 0


if __name__ == "__main__":
    raise SystemExit(main())
