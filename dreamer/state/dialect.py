"""The few places where the state store's SQL differs between SQLite and PostgreSQL, named once.

Every part of :class:`~dreamer.state.StateStore` writes its statements with ``?`` placeholders and
standard SQL that both databases read the same way (``INSERT ... ON CONFLICT``, row values,
``RETURNING``); what one of them spells differently is asked of the store's :class:`Dialect`: a
JSON list read as rows, a JSON number, an index hint SQLite needs and PostgreSQL has no syntax for,
the insertion order of a table, and how a transaction begins. The PostgreSQL connection
(:mod:`.pgconn`) turns the placeholders into its own.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["POSTGRES", "SQLITE", "Dialect"]


@dataclass(frozen=True, slots=True)
class Dialect:
    """How one database spells what the state store's SQL needs beyond the standard."""

    name: str
    #: A JSON list parameter (``?``, a JSON text) as a table ``j`` of one column, ``j.value``: for a
    #: FROM clause.
    json_table: str
    #: The same over a column: format with ``column``.
    json_column_table: str
    #: The JSON list of a subquery's values: format with ``value``.
    json_group: str
    #: A whole number in a JSON object column: format with ``column`` and ``key``.
    json_number: str
    #: ``IS NOT`` for values that may be NULL.
    is_not: str
    #: The column that orders a table's rows as they were inserted (``runs``).
    insertion_order: str
    #: The statements that open a write transaction, and a read snapshot.
    begin_write: tuple[str, ...]
    begin_read: str
    #: Now, in seconds since the epoch, as the database's clock tells it (leases use it, so that
    #: hosts whose clocks differ still agree on when a lease expires).
    now: str
    #: The highest ``seq`` ever given to a ledger vector.
    last_vector_seq: str
    #: Whether ``INDEXED BY`` hints and the unary ``+`` that keeps SQLite off an index apply.
    hints: bool

    def indexed_by(self, index: str) -> str:
        """SQLite's ``INDEXED BY`` hint, or nothing where the planner takes no hints."""
        return f" INDEXED BY {index}" if self.hints else ""

    @property
    def join_in_order(self) -> str:
        """A join whose left side stays the outer loop: SQLite's ``CROSS JOIN`` (its planner never
        reorders one), a plain ``JOIN`` where there are no hints."""
        return "CROSS JOIN" if self.hints else "JOIN"

    def unindexed(self, column: str) -> str:
        """``column`` kept off its index by SQLite's unary ``+``; the column itself elsewhere."""
        return f"+{column}" if self.hints else column


SQLITE = Dialect(
    name="sqlite",
    json_table="json_each(?) AS j",
    json_column_table="json_each({column}) AS j",
    json_group="json_group_array({value})",
    json_number="json_extract({column}, '$.{key}')",
    is_not="IS NOT",
    insertion_order="rowid",
    begin_write=("BEGIN IMMEDIATE",),
    begin_read="BEGIN",
    now="((julianday('now') - 2440587.5) * 86400.0)",
    last_vector_seq="SELECT seq FROM sqlite_sequence WHERE name = 'ledger_vectors'",
    hints=True,
)

#: Every write of a PostgreSQL state takes this schema's one transaction lock first, so writes are
#: one at a time as SQLite's are: a watermark's compare-and-set, a vector's ``seq`` and a word's
#: count then read what the previous commit left, whichever host wrote it. ``{key}`` is the
#: schema's lock key (:func:`dreamer.state.pgschema.lock_key`).
POSTGRES = Dialect(
    name="postgres",
    json_table="jsonb_array_elements_text(CAST(? AS jsonb)) AS j(value)",
    json_column_table="jsonb_array_elements_text(CAST({column} AS jsonb)) AS j(value)",
    json_group="COALESCE(json_agg({value}), '[]'::json)::text",
    json_number="COALESCE(CAST(CAST({column} AS jsonb) ->> '{key}' AS bigint), 0)",
    is_not="IS DISTINCT FROM",
    insertion_order="seq",
    begin_write=("BEGIN", "SELECT pg_advisory_xact_lock({key})"),
    begin_read="BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY",
    now="extract(epoch FROM clock_timestamp())::double precision",
    last_vector_seq="SELECT COALESCE(MAX(seq), 0) FROM ledger_vectors",
    hints=False,
)
