"""Opening a state store on PostgreSQL (``[state] backend = "postgres"``): the pool, the schema's
tables, and the store over them, which answers every call the SQLite one does.

The password comes from ``[state] password_env`` / ``password_file`` (or libpq's passfile) and is
handed to the driver apart from the connection string, so no message ever holds it. Needs the
``postgres`` extra (psycopg 3 and its pool); without it the error says which pip command adds it.
"""

from __future__ import annotations

import re
import threading
from typing import Any

from dreamer.config.state import StateConfig
from dreamer.errors import StateFileError
from dreamer.state.dialect import POSTGRES
from dreamer.state.store import LOCK_TIMEOUT_S, StateStore

__all__ = ["describe", "open_postgres"]

#: How long opening waits for the first connection before it says the database is unreachable.
CONNECT_TIMEOUT_S = 10.0
#: The longest a session may sit idle inside a transaction before the server ends it.
IDLE_IN_TRANSACTION_MAX_S = 15.0


def describe(config: StateConfig) -> str:
    """How messages name the state: ``postgresql <dsn> (schema <s>)``, the dsn as configured (it
    holds no password: the configuration refuses one)."""
    return f"PostgreSQL state {config.dsn} (schema {config.schema_name})"


#: The pools open in this process, by what makes them (dsn, schema, size, password), each with how
#: many stores use it: the daemon's store and each run's share one pool, and the schema is checked
#: once, when the first of them opens it.
_POOLS: dict[tuple[object, ...], list[Any]] = {}
_POOLS_LOCK = threading.Lock()


def open_postgres(config: StateConfig) -> StateStore:
    """The state store in ``config``'s PostgreSQL schema, its tables made when there are none.
    Refuses (:class:`StateFileError`, naming the database) a schema that is another program's or a
    newer Dreamer's, a database it cannot reach, and a missing driver. A store opened while another
    of the same configuration is open shares its pool; the pool closes with the last of them."""
    from dreamer.state.pgconn import PgConnection
    from dreamer.state.pgschema import lock_key

    password = config.password.get_secret_value() if config.password is not None else None
    key = (config.dsn, config.schema_name, config.pool_size, password)
    with _POOLS_LOCK:
        held = _POOLS.get(key)
        if held is None:
            held = _POOLS[key] = [_open_pool(config), 0]
        held[1] += 1

    def release() -> None:
        with _POOLS_LOCK:
            held[1] -= 1
            if held[1] > 0:
                return
            _POOLS.pop(key, None)
        held[0].close()

    return StateStore(
        PgConnection(held[0], on_close=release),
        None,
        dialect=POSTGRES,
        where=describe(config),
        lock_key=lock_key(config.schema_name),
    )


def _open_pool(config: StateConfig) -> Any:
    """A new pool on ``config``'s database, its schema checked (and made) first."""
    where = describe(config)
    try:
        import psycopg
        import psycopg_pool
    except ImportError:
        raise StateFileError(
            f"{where}: the PostgreSQL driver is not installed; install it with "
            "`pip install 'dreamer[postgres]'` (psycopg 3 and psycopg-pool)"
        ) from None
    from dreamer.state.pgschema import check_or_create

    schema = config.schema_name
    # A host stopped inside a transaction (SIGSTOP, a pause) would hold the schema's write lock for
    # ever: the server ends such a session after the lease time or IDLE_IN_TRANSACTION_MAX_S,
    # whichever is shorter, well before another's write gives up waiting (LOCK_TIMEOUT_S, as on
    # SQLite). A transaction of Dreamer's own is never idle that long.
    idle_ms = int(min(config.lease_ttl_s, IDLE_IN_TRANSACTION_MAX_S) * 1000)
    options = f"-c lock_timeout={int(LOCK_TIMEOUT_S * 1000)} -c idle_in_transaction_session_timeout={idle_ms}"
    kwargs: dict[str, Any] = {"autocommit": True, "application_name": "dreamer", "options": options}
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
        # A call waits this long for a connection, not the pool's default 30 s: while the database
        # is away, a run fails in seconds, and each of its calls would wait again.
        timeout=CONNECT_TIMEOUT_S,
    )
    try:
        pool.open(wait=True, timeout=CONNECT_TIMEOUT_S)
    except psycopg_pool.PoolTimeout:
        pool.close()
        raise StateFileError(
            f"{where}: cannot connect within {CONNECT_TIMEOUT_S:g} s; check that PostgreSQL runs, "
            "that [state] dsn names it, and its password (password_env, password_file or ~/.pgpass)"
        ) from None
    return pool


def _one_line(exc: BaseException) -> str:
    return re.sub(r"\s+", " ", str(exc)).strip() or type(exc).__name__
