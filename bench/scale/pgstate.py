"""bench.scale on a PostgreSQL state (``--state postgres``): the same files, their state file copied
into a fresh schema by ``dreamer state copy``, the daemon's run then reading and committing there.

The schema is dropped when the measurement ends. Only 127.0.0.1 / ::1 servers are accepted, as for
every benchmark.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from bench._common import BenchError, progress
from bench.postgres import drop_schema


@dataclass
class OnPostgres:
    """The schema a measurement runs on, and how long the copy into it took."""

    dsn: str
    schema: str
    copy_s: float = 0.0


@contextlib.contextmanager
def on_postgres(config_path: Path, state_file: Path, dsn: str, size: int) -> Iterator[OnPostgres]:
    """Point the configuration at a new schema, copy the state file into it, and drop it at the end."""
    where = OnPostgres(dsn, f"bench_scale_{size}_{uuid.uuid4().hex[:8]}")
    with config_path.open("a", encoding="utf-8") as out:
        out.write(f'\n[state]\nbackend = "postgres"\ndsn = "{dsn}"\nschema = "{where.schema}"\n')
    progress(f"scale {size}: copying the state file into PostgreSQL (schema {where.schema})")
    started = time.monotonic()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "dreamer",
            "--config",
            str(config_path),
            "state",
            "copy",
            "--from",
            str(state_file),
        ],
        capture_output=True,
        text=True,
    )
    where.copy_s = time.monotonic() - started
    try:
        if done.returncode != 0:
            raise BenchError(f"dreamer state copy failed ({done.returncode}): {done.stderr.strip()[-500:]}")
        yield where
    finally:
        drop(where)


def schema_mib(where: OnPostgres) -> float:
    """The schema's tables and indexes on disk, in MiB."""
    import psycopg

    with psycopg.connect(where.dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT COALESCE(SUM(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relkind = 'r'",
            (where.schema,),
        ).fetchone()
    return float(row[0] if row else 0) / 1024 / 1024


def drop(where: OnPostgres) -> None:
    drop_schema(where.dsn, where.schema)
