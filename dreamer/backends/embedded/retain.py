"""The embedded store's write path: how a retained batch is checked and written.

:func:`validate_retain` refuses, before anything is written, what Hindsight would refuse with a 422
(naming the offending field). :func:`retain_batch` writes a batch inside the caller's write
transaction: the first retain creates the bank and gives it its key range; each item becomes one
unit of fact type ``world`` with the bank's next key; a document re-retained with the same content
only refreshes its tags and metadata, with new content it replaces its units (Hindsight's upsert,
the only delete the store issues); ``created_at`` is the write time, strictly increasing within a
bank, so the ``(created_at, id)`` order is the write order.

Why, and what was measured: ``docs/design/embedded-store.md``.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import uuid
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta

from dreamer.backends.base import RetainItem
from dreamer.backends.embedded.schema import (
    KEY_MASK,
    MAX_BANK_NO,
    as_utc,
    bank_key_range,
    format_time,
    parse_time,
)
from dreamer.errors import PermanentBackendError

__all__ = ["retain_batch", "validate_retain"]


def validate_retain(bank_id: str, items: Sequence[RetainItem]) -> None:
    """Refuse what Hindsight would refuse with a 422, naming the offending field."""

    def refuse(where: str, problem: str) -> PermanentBackendError:
        return PermanentBackendError(
            f"retain refused: {where}: {problem}",
            status=422,
            operation="retain",
            detail=f"{where}: {problem}",
        )

    if not isinstance(bank_id, str) or not bank_id:
        raise refuse("bank_id", "must be a non-empty string")
    for index, item in enumerate(items):
        where = f"items[{index}]"
        for field_name, value in (
            ("content", item.content),
            ("context", item.context),
            ("document_id", item.document_id),
        ):
            if value is None and field_name != "content":
                continue
            if not isinstance(value, str):
                raise refuse(f"{where}.{field_name}", f"must be a string, got {type(value).__name__}")
            if not _is_encodable(value):
                raise refuse(f"{where}.{field_name}", "is not valid Unicode text (lone surrogate)")
        if not isinstance(item.metadata, Mapping):
            raise refuse(f"{where}.metadata", "must be a mapping of strings to strings")
        for key, value in item.metadata.items():
            if not isinstance(key, str) or not isinstance(value, str):
                raise refuse(
                    f"{where}.metadata[{key!r}]",
                    f"metadata values must be strings (got {type(value).__name__}); convert them with str()",
                )
            if not (_is_encodable(key) and _is_encodable(value)):
                raise refuse(f"{where}.metadata[{key!r}]", "is not valid Unicode text (lone surrogate)")
        for tag in item.tags:
            if not isinstance(tag, str) or not _is_encodable(tag):
                raise refuse(f"{where}.tags", f"every tag must be a valid string, got {tag!r}")
        if item.timestamp is not None:
            if not isinstance(item.timestamp, datetime):
                raise refuse(f"{where}.timestamp", "must be a datetime or None")
            try:
                format_time(item.timestamp)
            except (OverflowError, ValueError) as exc:
                raise refuse(f"{where}.timestamp", f"cannot be expressed in UTC ({exc})") from exc


def retain_batch(conn: sqlite3.Connection, bank_id: str, items: Sequence[RetainItem]) -> list[int | None]:
    """Write the batch; the caller holds the write transaction.

    Returns each item's new unit key, in order; None for an item that wrote no unit (a document
    re-retained with the same content).
    """
    writer = _BankWriter(conn, bank_id, datetime.now(UTC))
    keys = [writer.write(item) for item in items]
    writer.finish()
    return keys


def _bank_of(conn: sqlite3.Connection, bank_id: str, now: datetime) -> tuple[int, datetime | None]:
    """The bank's number and last write time; the first retain creates the bank (with no write yet)
    under the next free number, refused past `MAX_BANK_NO` (the number prefixes every unit key)."""
    row = conn.execute("SELECT last_write_at, bank_no FROM banks WHERE bank_id = ?", (bank_id,)).fetchone()
    if row is not None:
        return int(row["bank_no"]), parse_time(row["last_write_at"])
    bank_no = int(conn.execute("SELECT COALESCE(MAX(bank_no), 0) + 1 FROM banks").fetchone()[0])
    if bank_no > MAX_BANK_NO:
        raise PermanentBackendError(
            f"the embedded store holds the most banks it supports ({MAX_BANK_NO}); "
            "keep further profiles in another store file",
            operation="retain",
        )
    conn.execute(
        "INSERT INTO banks (bank_id, created_at, last_write_at, bank_no) VALUES (?, ?, NULL, ?)",
        (bank_id, format_time(now), bank_no),
    )
    return bank_no, None


class _BankWriter:
    """One batch's writes to one bank: the bank's next unit key in its key range, and the write
    time, strictly increasing within the bank so the ``(created_at, id)`` order is the write order."""

    def __init__(self, conn: sqlite3.Connection, bank_id: str, now: datetime) -> None:
        self.conn = conn
        self.bank_id = bank_id
        self.now = now
        bank_no, self.previous = _bank_of(conn, bank_id, now)
        first_key, self.last_key = bank_key_range(bank_no)
        highest = conn.execute(
            "SELECT MAX(seq) FROM units WHERE seq BETWEEN ? AND ?", (first_key, self.last_key)
        ).fetchone()[0]
        self.next_key = (first_key if highest is None else int(highest)) + 1
        self.last_created: datetime | None = None

    def write(self, item: RetainItem) -> int | None:
        """Write one item: its new unit key, or None for a document re-retained with the same content."""
        tags_json = json.dumps(list(item.tags), ensure_ascii=False)
        metadata_json = json.dumps(dict(item.metadata), ensure_ascii=False, sort_keys=True)
        if item.document_id is not None and self._same_document(
            item, item.document_id, tags_json, metadata_json
        ):
            return None
        return self._insert_unit(item, tags_json, metadata_json)

    def _same_document(self, item: RetainItem, document_id: str, tags_json: str, metadata_json: str) -> bool:
        """Hindsight's upsert of a document: True, with its units' tags and metadata refreshed, when
        it was retained with the same content; else its old units are replaced and it is recorded."""
        conn, bank_id = self.conn, self.bank_id
        content_hash = hashlib.sha256(item.content.encode("utf-8")).hexdigest()
        document = conn.execute(
            "SELECT content_hash FROM documents WHERE bank_id = ? AND document_id = ?",
            (bank_id, document_id),
        ).fetchone()
        if document is not None and document["content_hash"] == content_hash:
            # Hindsight's idempotent re-retain: same units, tags and metadata refreshed.
            conn.execute(
                "UPDATE units SET tags = ?, metadata = ? WHERE bank_id = ? AND document_id = ?",
                (tags_json, metadata_json, bank_id, document_id),
            )
            return True
        if document is not None:
            # Hindsight's upsert of a changed document replaces its units. Dreamer derives
            # document ids from content, so its own writes never reach this branch.
            conn.execute("DELETE FROM units WHERE bank_id = ? AND document_id = ?", (bank_id, document_id))
        stamp = format_time(self.now)
        conn.execute(
            """
            INSERT INTO documents (bank_id, document_id, content_hash, created_at, updated_at)
            VALUES (?, ?, ?, ?, ?)
            ON CONFLICT (bank_id, document_id)
            DO UPDATE SET content_hash = excluded.content_hash, updated_at = excluded.updated_at
            """,
            (bank_id, document_id, content_hash, stamp, stamp),
        )
        return False

    def _insert_unit(self, item: RetainItem, tags_json: str, metadata_json: str) -> int:
        """Insert the item's unit under the bank's next key, written a microsecond after the last."""
        if self.next_key > self.last_key:
            raise PermanentBackendError(
                f"bank {self.bank_id!r} holds the most units an embedded bank supports ({KEY_MASK})",
                operation="retain",
            )
        now, previous = self.now, self.previous
        created = now if previous is None else max(now, previous + timedelta(microseconds=1))
        self.previous = self.last_created = created
        mentioned = created if item.timestamp is None else as_utc(item.timestamp)
        self.conn.execute(
            """
            INSERT INTO units (seq, id, bank_id, text, fact_type, context, document_id, tags, metadata,
                               created_at, mentioned_at, proof_count)
            VALUES (?, ?, ?, ?, 'world', ?, ?, ?, ?, ?, ?, 1)
            """,
            (
                self.next_key,
                str(uuid.uuid4()),
                self.bank_id,
                item.content,
                item.context,
                item.document_id,
                tags_json,
                metadata_json,
                format_time(created),
                format_time(mentioned),
            ),
        )
        key = self.next_key
        self.next_key += 1
        return key

    def finish(self) -> None:
        """Record the bank's last write time, if the batch wrote a unit."""
        if self.last_created is not None:
            self.conn.execute(
                "UPDATE banks SET last_write_at = ? WHERE bank_id = ?",
                (format_time(self.last_created), self.bank_id),
            )


def _is_encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
