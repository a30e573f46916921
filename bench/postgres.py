"""The PostgreSQL the benchmarks use (``scripts/postgres-dev``): where its address comes from, the
check that it is on this machine, and dropping a benchmark's schema at the end."""

from __future__ import annotations

import urllib.parse

from bench._common import BenchError, progress

__all__ = ["DSN_ENV", "drop_schema", "loopback"]

#: Where a benchmark's --dsn comes from when it is not given: what scripts/postgres-dev prints.
DSN_ENV = "DREAMER_TEST_POSTGRES_URL"


def loopback(dsn: str) -> str:
    """``dsn`` when it is a URI naming a server on 127.0.0.1 or ::1; else BenchError."""
    host = urllib.parse.urlsplit(dsn).hostname if "://" in dsn else None
    if host not in ("127.0.0.1", "::1", "localhost"):
        raise BenchError(f"--dsn must name a PostgreSQL on 127.0.0.1 or ::1 (a URI), got host {host!r}")
    return dsn


def drop_schema(dsn: str, schema: str) -> None:
    """Drop ``schema`` and all in it; a failure is said on stderr, not raised (the result stands)."""
    import psycopg

    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    except psycopg.Error as exc:
        progress(f"could not drop the schema {schema}: {exc}")
