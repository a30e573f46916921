"""Opening a state store on PostgreSQL (``[state] backend = "postgres"``): the pool, the schema's
tables, and the store over them, which answers every call the SQLite one does.

The password comes from ``[state] password_env`` / ``password_file`` (or libpq's passfile) and is
handed to the driver apart from the connection string, so no message ever holds it. Needs the
``postgres`` extra (psycopg 3 and its pool); without it the error says which pip command adds it.
"""

from __future__ import annotations

import re
from typing import Any

from dreamer.config.state import StateConfig
from dreamer.errors import StateFileError
from dreamer.state.dialect import POSTGRES
from dreamer.state.store import StateStore

__all__ = ["describe", "open_postgres"]

#: How long opening waits for the first connection before it says the database is unreachable.
CONNECT_TIMEOUT_S = 10.0


def describe(config: StateConfig) -> str:
    """How messages name the state: ``postgresql <dsn> (schema <s>)``, the dsn as configured (it
    holds no password: the configuration refuses one)."""
    return f"PostgreSQL state {config.dsn} (schema {config.schema_name})"


def open_postgres(config: StateConfig) -> StateStore:
    """The state store in ``config``'s PostgreSQL schema, its tables made when there are none.
    Refuses (:class:`StateFileError`, naming the database) a schema that is another program's or a
    newer Dreamer's, a database it cannot reach, and a missing driver."""
    where = describe(config)
    try:
        import psycopg
        import psycopg_pool
    except ImportError:
        raise StateFileError(
            f"{where}: the PostgreSQL driver is not installed; install it with "
            "`pip install 'dreamer[postgres]'` (psycopg 3 and psycopg-pool)"
        ) from None
    from dreamer.state.pgconn import PgConnection
    from dreamer.state.pgschema import check_or_create, lock_key

    schema = config.schema_name
    kwargs: dict[str, Any] = {"autocommit": True, "application_name": "dreamer"}
    if config.password is not None:
        kwargs["password"] = config.password.get_secret_value()

    def configure(conn: psycopg.Connection[Any]) -> None:
        conn.execute(f'SET search_path TO "{schema}", public')

    try:
        # One connection first, for the schema and for the driver's own words when it fails (the
        # pool would retry until its timeout and say only that).
        with psycopg.connect(config.dsn or "", connect_timeout=int(CONNECT_TIMEOUT_S), **kwargs) as conn:
            configure(conn)
            check_or_create(conn, schema, where)
    except psycopg.OperationalError as exc:
        raise StateFileError(
            f"{where}: cannot connect: {_one_line(exc)}; check that PostgreSQL runs, that [state] dsn "
            "names it, and the password (password_env, password_file or ~/.pgpass)"
        ) from None
    except psycopg.Error as exc:
        raise StateFileError(f"{where}: the state database failed: {_one_line(exc)}") from None
    pool: psycopg_pool.ConnectionPool[Any] = psycopg_pool.ConnectionPool(
        config.dsn or "",
        kwargs=kwargs,
        min_size=1,
        max_size=config.pool_size,
        configure=configure,
        open=False,
        name="dreamer-state",
    )
    try:
        pool.open(wait=True, timeout=CONNECT_TIMEOUT_S)
    except psycopg_pool.PoolTimeout:
        pool.close()
        raise StateFileError(
            f"{where}: cannot connect within {CONNECT_TIMEOUT_S:g} s; check that PostgreSQL runs, "
            "that [state] dsn names it, and its password (password_env, password_file or ~/.pgpass)"
        ) from None
    return StateStore(PgConnection(pool), None, dialect=POSTGRES, where=where, lock_key=lock_key(schema))


def _one_line(exc: BaseException) -> str:
    return re.sub(r"\s+", " ", str(exc)).strip() or type(exc).__name__
