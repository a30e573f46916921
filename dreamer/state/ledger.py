"""The ledger part of :class:`~dreamer.state.StateStore`: the promoted cards, read back whole or by
id, and the two commit steps that add a card and reinforce one.

A card's text and provenance are written once, when it is promoted; later commits only add to its
sources, profiles and counts. The word index over the cards is :mod:`.wordindex`, their vectors
:mod:`.vectors`, their places in the peer cards :mod:`.peerranks`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import datetime

from dreamer.state.base import StoreBase
from dreamer.state.records import CandidateCard, LedgerCard, Reinforcement, iso
from dreamer.state.rows import CARD_COLUMNS, card_from_row, chunks, marks
from dreamer.state.schema import state_errors

__all__ = ["Ledger"]


class Ledger(StoreBase):
    """Reads of the promoted cards, and the ledger rows a roll-up's commit writes."""

    @state_errors
    def ledger(self, upstream_bank: str | None = None) -> list[LedgerCard]:
        """Every card (of one upstream bank), in promotion order. A whole-ledger read: the roll-up
        itself reads only :meth:`ledger_candidates`."""
        sql = f"SELECT {CARD_COLUMNS} FROM ledger"
        args: tuple[str, ...] = ()
        if upstream_bank is not None:
            sql += " WHERE upstream_bank = ?"
            args = (upstream_bank,)
        sql += " ORDER BY promoted_at, document_id"
        return [card_from_row(r) for r in self._conn.execute(sql, args).fetchall()]

    @state_errors
    def profile_cards(self, upstream_bank: str, profile: str) -> list[LedgerCard]:
        """The cards of ``upstream_bank`` that ``profile`` promoted or reinforced, and every card
        that supersedes one of them; in promotion order."""
        sql = (
            f"WITH mine AS (SELECT document_id FROM ledger_profiles WHERE profile = ?) "
            f"SELECT {CARD_COLUMNS} FROM ledger WHERE upstream_bank = ? AND (document_id IN "
            f"(SELECT document_id FROM mine) OR supersedes IN (SELECT document_id FROM mine)) "
            f"ORDER BY promoted_at, document_id"
        )
        return [card_from_row(r) for r in self._conn.execute(sql, (profile, upstream_bank))]

    @state_errors
    def superseding(self, document_ids: Iterable[str]) -> list[LedgerCard]:
        """The cards that supersede one of ``document_ids`` (a ``recency_wins`` conflict). Indexed by
        ``supersedes``: the read side asks this for the hits of one recall."""
        ids = sorted(set(document_ids))
        out: list[LedgerCard] = []
        for chunk in chunks(ids):
            sql = (
                f"SELECT {CARD_COLUMNS} FROM ledger WHERE supersedes IN ({marks(chunk)}) "
                "ORDER BY promoted_at, document_id"
            )
            out.extend(card_from_row(r) for r in self._conn.execute(sql, chunk))
        return out

    @state_errors
    def cards(self, document_ids: Iterable[str]) -> list[LedgerCard]:
        """The ledger cards of these document ids that exist, in promotion order."""
        ids = sorted(set(document_ids))
        out: list[LedgerCard] = []
        for chunk in chunks(ids):
            sql = f"SELECT {CARD_COLUMNS} FROM ledger WHERE document_id IN ({marks(chunk)})"
            out.extend(card_from_row(r) for r in self._conn.execute(sql, chunk))
        return sorted(out, key=lambda c: (c.promoted_at, c.document_id))

    @state_errors
    def cards_citing(self, unit_id: str) -> list[LedgerCard]:
        """The cards whose provenance lists ``unit_id``, in promotion order: one pass over the
        ledger inside the database (for a unit judged before decisions were recorded; never in a run)."""
        sources = self.dialect.json_column_table.format(column="ledger.source_ids")
        sql = (
            f"SELECT {CARD_COLUMNS} FROM ledger WHERE EXISTS "
            f"(SELECT 1 FROM {sources} WHERE j.value = ?) "
            "ORDER BY promoted_at, document_id"
        )
        return [card_from_row(r) for r in self._conn.execute(sql, (unit_id,))]

    @state_errors
    def existing_documents(self, document_ids: Iterable[str]) -> set[str]:
        """Which of these document ids the ledger holds."""
        found: set[str] = set()
        for chunk in chunks(sorted(set(document_ids))):
            sql = f"SELECT document_id FROM ledger WHERE document_id IN ({marks(chunk)})"
            found.update(r[0] for r in self._conn.execute(sql, chunk))
        return found

    @state_errors
    def candidate_cards(self, document_ids: Iterable[str]) -> list[CandidateCard]:
        """These ledger cards as the dedup reads them, in promotion order."""
        rows = self._conn.execute(
            "SELECT document_id, text, sketch FROM ledger "
            f"WHERE document_id IN (SELECT j.value FROM {self.dialect.json_table}) "
            "ORDER BY promoted_at, document_id",
            (json.dumps(sorted(set(document_ids))),),
        )
        return [CandidateCard(r[0], r[1], r[2]) for r in rows]

    @state_errors
    def ledger_size(self, upstream_bank: str | None = None) -> int:
        """How many cards the ledger holds (of ``upstream_bank``, when given: a count over the
        bank's index, with no row read)."""
        if upstream_bank is None:
            return int(self._conn.execute("SELECT count(*) FROM ledger").fetchone()[0])
        row = self._conn.execute("SELECT count(*) FROM ledger WHERE upstream_bank = ?", (upstream_bank,))
        return int(row.fetchone()[0])

    def _insert_card(self, card: LedgerCard) -> None:
        """Write a promoted card's row. A card already there (the same content promoted by a run
        that crashed after writing upstream, or by another profile) is left as it is: document ids
        derive from the content, so redoing a promotion must be harmless."""
        self._conn.execute(
            "INSERT INTO ledger (document_id, profile, upstream_bank, text, normalized, kind, "
            "source_ids, profiles, reinforcements, promoted_at, last_seen_at, supersedes, run_id, "
            "sketch) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(document_id) DO NOTHING",
            (
                card.document_id,
                card.profile,
                card.upstream_bank,
                card.text,
                card.normalized,
                card.kind,
                json.dumps(list(card.source_ids)),
                json.dumps(list(card.profiles or (card.profile,))),
                card.reinforcements,
                iso(card.promoted_at),
                iso(card.last_seen_at),
                card.supersedes,
                card.run_id,
                card.sketch,
            ),
        )

    def _add_card_profiles(self, card: LedgerCard) -> None:
        """Record which profiles a promoted card belongs to (its promoter and the profiles it names),
        so a profile's peer card finds it through ``ledger_profiles`` instead of reading the bank."""
        self._conn.executemany(
            "INSERT INTO ledger_profiles (profile, document_id) VALUES (?, ?) ON CONFLICT DO NOTHING",
            [(name, card.document_id) for name in dict.fromkeys((card.profile, *card.profiles))],
        )

    def _reinforce_card(self, reinforcement: Reinforcement, seen_at: datetime) -> bool:
        """Add a reinforcement to its card: the new source ids, the profile, when it was last seen.
        The count goes up only when the reinforcement brings a source id the card did not have, so
        re-reading the same units never inflates it. False when the ledger does not hold the card
        (nothing is written then)."""
        r = reinforcement
        row = self._conn.execute(
            "SELECT source_ids, profiles FROM ledger WHERE document_id = ?", (r.document_id,)
        ).fetchone()
        if row is None:
            return False
        known = json.loads(row[0])
        fresh = [s for s in dict.fromkeys(r.source_ids) if s not in set(known)]
        profiles = list(dict.fromkeys([*json.loads(row[1]), r.profile]))
        self._conn.execute(
            "INSERT INTO ledger_profiles (profile, document_id) VALUES (?, ?) ON CONFLICT DO NOTHING",
            (r.profile, r.document_id),
        )
        self._conn.execute(
            "UPDATE ledger SET reinforcements = reinforcements + ?, source_ids = ?, "
            "profiles = ?, last_seen_at = ? WHERE document_id = ?",
            (
                1 if fresh else 0,
                json.dumps([*known, *fresh]),
                json.dumps(profiles),
                iso(seen_at),
                r.document_id,
            ),
        )
        return True
