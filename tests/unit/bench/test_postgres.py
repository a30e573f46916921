"""The benchmarks' PostgreSQL: only a server on this machine is accepted."""

from __future__ import annotations

import pytest

from bench._common import BenchError
from bench.postgres import loopback


@pytest.mark.parametrize(
    "dsn", ["postgresql://u@127.0.0.1:5432/db", "postgresql://u@[::1]:5432/db", "postgres://localhost/db"]
)
def test_a_server_on_this_machine_is_taken(dsn: str) -> None:
    assert loopback(dsn) == dsn


@pytest.mark.parametrize("dsn", ["postgresql://u@db.example/db", "host=127.0.0.1 dbname=x", ""])
def test_any_other_is_refused_by_name(dsn: str) -> None:
    with pytest.raises(BenchError, match=r"127\.0\.0\.1"):
        loopback(dsn)
