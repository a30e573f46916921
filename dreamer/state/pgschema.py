"""The state in a PostgreSQL schema: its tables (those of the SQLite file, :mod:`.schema`, in
PostgreSQL's types), its identity, how a new one is made and how one that is not Dreamer's, or is a
newer Dreamer's, is refused by name.

The identity is two rows of the schema's ``meta`` table: ``application`` = ``dreamer`` and
``schema_version``. A schema with tables and no such row is another program's and is never written
to. Creating the tables takes the schema's transaction lock, so two hosts starting at once make
them once; opening a schema that has them takes no lock.
"""

from __future__ import annotations

import hashlib
from typing import Any

from dreamer.errors import StateFileError

__all__ = ["PG_SCHEMA_VERSION", "check_or_create", "lock_key"]

#: The version of the PostgreSQL tables this code writes; a newer one is refused, never misread.
PG_SCHEMA_VERSION = 3
_CORE = frozenset({"meta", "runs", "watermarks", "ledger", "leases", "hosts"})

# Text compared and ordered byte by byte, as SQLite does, whatever the database's locale.
_T = 'TEXT COLLATE "C"'

_TABLES = f"""
CREATE TABLE IF NOT EXISTS meta (key {_T} PRIMARY KEY, value {_T} NOT NULL);
CREATE TABLE IF NOT EXISTS runs (
    seq         BIGINT GENERATED ALWAYS AS IDENTITY UNIQUE,
    run_id      {_T} PRIMARY KEY,
    job_id      {_T} NOT NULL,
    started_at  {_T} NOT NULL,
    finished_at {_T},
    outcome     {_T},
    detail      {_T} NOT NULL DEFAULT '',
    counts      {_T} NOT NULL DEFAULT '{{}}'
);
CREATE INDEX IF NOT EXISTS runs_by_job ON runs (job_id, started_at);
CREATE TABLE IF NOT EXISTS watermarks (
    profile       {_T} PRIMARY KEY,
    bank_id       {_T} NOT NULL,
    created_at    {_T},
    boundary_ids  {_T} NOT NULL DEFAULT '[]',
    unit_count    BIGINT NOT NULL DEFAULT 0,
    last_write_at {_T},
    rolled_at     {_T}
);
CREATE TABLE IF NOT EXISTS ledger (
    document_id    {_T} PRIMARY KEY,
    profile        {_T} NOT NULL,
    upstream_bank  {_T} NOT NULL,
    text           {_T} NOT NULL,
    normalized     {_T} NOT NULL,
    kind           {_T} NOT NULL DEFAULT 'fact',
    source_ids     {_T} NOT NULL DEFAULT '[]',
    profiles       {_T} NOT NULL DEFAULT '[]',
    reinforcements BIGINT NOT NULL DEFAULT 0,
    promoted_at    {_T} NOT NULL,
    last_seen_at   {_T} NOT NULL,
    supersedes     {_T},
    run_id         {_T} NOT NULL,
    sketch         {_T},
    indexed        INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS ledger_by_bank ON ledger (upstream_bank, promoted_at);
CREATE INDEX IF NOT EXISTS ledger_by_text ON ledger (upstream_bank, normalized);
CREATE INDEX IF NOT EXISTS ledger_unindexed ON ledger (upstream_bank) WHERE indexed = 0;
CREATE INDEX IF NOT EXISTS ledger_by_supersedes ON ledger (supersedes) WHERE supersedes IS NOT NULL;
CREATE TABLE IF NOT EXISTS ledger_words (
    word        {_T} NOT NULL,
    document_id {_T} NOT NULL,
    content_n   INTEGER NOT NULL,
    residual_n  INTEGER NOT NULL,
    signature   BIGINT,
    PRIMARY KEY (word, document_id)
);
{{word_gates}}CREATE TABLE IF NOT EXISTS ledger_word_counts (word {_T} PRIMARY KEY, cards BIGINT NOT NULL);
{{gate}}CREATE TABLE IF NOT EXISTS ledger_profiles (
    profile     {_T} NOT NULL,
    document_id {_T} NOT NULL,
    PRIMARY KEY (profile, document_id)
);
CREATE INDEX IF NOT EXISTS ledger_profiles_by_document ON ledger_profiles (document_id);
CREATE TABLE IF NOT EXISTS ledger_vectors (
    seq         BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    document_id {_T} NOT NULL UNIQUE,
    model_id    {_T} NOT NULL,
    dimension   INTEGER NOT NULL,
    vector      BYTEA NOT NULL
);
CREATE INDEX IF NOT EXISTS ledger_vectors_by_model ON ledger_vectors (model_id, dimension, seq);
CREATE TABLE IF NOT EXISTS ledger_rank (
    upstream_bank      {_T} NOT NULL,
    scope              {_T} NOT NULL,
    tier               INTEGER NOT NULL,
    neg_reinforcements BIGINT NOT NULL,
    neg_sources        BIGINT NOT NULL,
    neg_promoted       DOUBLE PRECISION NOT NULL,
    document_id        {_T} NOT NULL,
    PRIMARY KEY (upstream_bank, scope, tier, neg_reinforcements, neg_sources, neg_promoted, document_id)
);
CREATE INDEX IF NOT EXISTS ledger_rank_by_document ON ledger_rank (document_id, scope);
CREATE TABLE IF NOT EXISTS decisions (
    seq         BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    run_id      {_T} NOT NULL,
    profile     {_T} NOT NULL,
    unit_id     {_T},
    verdict     {_T} NOT NULL,
    reason      {_T} NOT NULL,
    document_id {_T},
    matched_id  {_T},
    scores      {_T} NOT NULL DEFAULT '{{}}',
    decided_at  {_T} NOT NULL
);
CREATE INDEX IF NOT EXISTS decisions_by_unit ON decisions (unit_id) WHERE unit_id IS NOT NULL;
CREATE INDEX IF NOT EXISTS decisions_by_card ON decisions (document_id) WHERE document_id IS NOT NULL;
CREATE INDEX IF NOT EXISTS decisions_by_match ON decisions (matched_id) WHERE matched_id IS NOT NULL;
CREATE TABLE IF NOT EXISTS leases (
    name       {_T} PRIMARY KEY,
    owner      {_T} NOT NULL,
    token      BIGINT NOT NULL,
    expires_at DOUBLE PRECISION NOT NULL,
    taken_at   DOUBLE PRECISION NOT NULL
);
CREATE INDEX IF NOT EXISTS leases_by_owner ON leases (owner);
CREATE TABLE IF NOT EXISTS hosts (
    owner      {_T} PRIMARY KEY,
    label      {_T} NOT NULL,
    expires_at DOUBLE PRECISION NOT NULL,
    started_at DOUBLE PRECISION NOT NULL
);
CREATE OR REPLACE FUNCTION ledger_words_counted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO ledger_word_counts (word, cards) VALUES (NEW.word, 1)
    ON CONFLICT (word) DO UPDATE SET cards = ledger_word_counts.cards + 1;
    RETURN NULL;
END $$;
CREATE OR REPLACE TRIGGER ledger_words_counted AFTER INSERT ON ledger_words
    FOR EACH ROW EXECUTE FUNCTION ledger_words_counted();
"""


# Version 2: each indexed card's word-set sizes and word signature (`dreamer.state.signature`).
_GATE = f"""
CREATE TABLE IF NOT EXISTS ledger_gate (
    document_id {_T} PRIMARY KEY,
    content_n   INTEGER NOT NULL,
    residual_n  INTEGER NOT NULL,
    signature   BIGINT NOT NULL
);
"""
# Version 3: the word index read by (word, set size) of each side with its cards' gate rows, each
# word row carrying its card's signature (`dreamer.state.schema`, schema 9).
_WORD_GATES = """
CREATE INDEX IF NOT EXISTS ledger_words_content_gate
    ON ledger_words (word, content_n, residual_n, signature);
CREATE INDEX IF NOT EXISTS ledger_words_residual_gate
    ON ledger_words (word, residual_n, content_n, signature);
"""
_TABLES = _TABLES.replace("{gate}", _GATE.strip() + "\n").replace("{word_gates}", _WORD_GATES.strip() + "\n")


def lock_key(schema: str) -> int:
    """The schema's transaction lock (``pg_advisory_xact_lock``): one number per schema, so two
    Dreamer schemas in one database never wait for each other."""
    digest = hashlib.sha256(f"dreamer-state:{schema}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def _tables(conn: Any, schema: str) -> set[str]:
    rows = conn.execute("SELECT table_name FROM information_schema.tables WHERE table_schema = %s", (schema,))
    return {r[0] for r in rows}


def check_or_create(conn: Any, schema: str, where: str) -> None:
    """Make the schema's tables when it has none; refuse one that is another program's, a newer
    Dreamer's or damaged. ``conn`` is a psycopg connection in autocommit mode whose search path is
    the schema."""
    tables = _tables(conn, schema)
    if not tables:
        with conn.transaction():
            # Made under the schema's lock, so two hosts that start at once make it once.
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (lock_key(schema),))
            if conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,)).fetchone() is None:
                conn.execute(f'CREATE SCHEMA "{schema}"')
            # The session's search path skipped the schema while it did not exist: name it again.
            conn.execute(f'SET LOCAL search_path TO "{schema}", public')
            tables = _tables(conn, schema)
            if not tables:
                conn.execute(_TABLES)
                conn.execute(
                    "INSERT INTO meta (key, value) VALUES ('application', 'dreamer'), ('schema_version', %s)",
                    (str(PG_SCHEMA_VERSION),),
                )
                return
    identity = dict(conn.execute("SELECT key, value FROM meta").fetchall()) if "meta" in tables else {}
    if identity.get("application") != "dreamer":
        raise StateFileError(
            f"{where}: not a Dreamer state schema (it holds other tables); set [state] schema to a "
            "schema of Dreamer's own"
        )
    version = int(identity.get("schema_version", "0") or 0)
    if version > PG_SCHEMA_VERSION:
        raise StateFileError(
            f"{where}: written by a newer Dreamer (PostgreSQL state schema {version}; this one reads "
            f"up to {PG_SCHEMA_VERSION}); upgrade Dreamer, or restore a backup from before the upgrade"
        )
    missing = _CORE - tables
    if missing or version < 1:
        raise StateFileError(
            f"{where}: the state schema is damaged (missing tables: {', '.join(sorted(missing)) or 'none'}"
            f", schema version {version}); restore it from a backup"
        )
    if version < PG_SCHEMA_VERSION:
        _upgrade(conn, schema)


def _upgrade(conn: Any, schema: str) -> None:
    """Bring an older Dreamer schema to this version under the schema's lock, keeping every row
    (version 1: no gate rows, roll-ups write them in bounded batches; version 2: the word rows
    without their cards' signatures, copied into them from the gate rows)."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (lock_key(schema),))
        row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        if int(row[0]) >= PG_SCHEMA_VERSION:  # another host upgraded it meanwhile
            return
        conn.execute(_GATE)
        conn.execute("ALTER TABLE ledger_words ADD COLUMN IF NOT EXISTS signature BIGINT")
        conn.execute(
            "UPDATE ledger_words AS w SET signature = g.signature FROM ledger_gate AS g "
            "WHERE g.document_id = w.document_id AND w.signature IS DISTINCT FROM g.signature"
        )
        conn.execute("DROP INDEX IF EXISTS ledger_words_by_content")
        conn.execute("DROP INDEX IF EXISTS ledger_words_by_residual")
        conn.execute(_WORD_GATES)
        conn.execute("UPDATE meta SET value = %s WHERE key = 'schema_version'", (str(PG_SCHEMA_VERSION),))
