"""Dreamer's own state in one SQLite file: watermarks, the promotion ledger and run records.

The watermark of a profile moves only in :meth:`StateStore.commit_rollup`, in the same transaction
as the ledger rows and the run record of the promotion it covers: a crash before that commit makes
the next run redo the same promotion, which content-derived document ids make harmless.

A watermark is the newest ``created_at`` rolled up plus the ids of the units rolled up shortly
before it (see :class:`Watermark`), so units sharing a timestamp, or committed late with an older
one, are neither skipped nor repeated. Why: ``docs/design/rollup.md``.

:class:`StateStore` is composed of one part per concern, each in its own module on the connection
of :mod:`.base`: :mod:`.runs`, :mod:`.watermarks`, :mod:`.ledger`, :mod:`.wordindex`,
:mod:`.vectors`, :mod:`.peerranks` and :mod:`.decisions`. This module opens the file and holds the
one commit that writes across all of them.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from urllib.parse import quote

from dreamer.diskfaults import space_fault
from dreamer.errors import StateFileError
from dreamer.state.decisions import Decisions
from dreamer.state.leases import Lease, Leases
from dreamer.state.ledger import Ledger
from dreamer.state.peerranks import PeerRanks
from dreamer.state.records import Decision, LedgerCard, Reinforcement, Watermark, iso
from dreamer.state.runs import END_RUN, RunRecords
from dreamer.state.schema import check_identity, create, state_errors
from dreamer.state.vectors import Vectors
from dreamer.state.watermarks import Watermarks
from dreamer.state.wordindex import WordIndex

__all__ = ["LOCK_TIMEOUT_S", "StateStore"]

#: How long an access waits for a lock another process holds.
LOCK_TIMEOUT_S = 30.0


class StateStore(RunRecords, Watermarks, Ledger, WordIndex, Vectors, PeerRanks, Decisions, Leases):
    """A small synchronous store; every method is one short transaction. Safe across processes (WAL on
    SQLite; on PostgreSQL, :mod:`.pgstore`, across hosts)."""

    @classmethod
    def open(
        cls, path: Path, *, on_upgrade: Callable[[int], None] | None = None, existing: bool = False
    ) -> StateStore:
        """Open the state file, creating it when there is none (unless ``existing``: then a missing
        file is a :class:`StateFileError`, as for the daemon's upkeep, which must never start a new
        state beside a removed one). A file that is not a Dreamer state
        file of a schema this code reads (garbage, empty, another program's, a newer Dreamer's) is
        refused with :class:`StateFileError`, never replaced: that would forget every watermark.
        A file of an older schema is upgraded first, ``on_upgrade`` told its schema before."""
        if not existing:
            path.parent.mkdir(parents=True, exist_ok=True)
        if path.is_symlink():
            raise StateFileError(
                f"{path}: the state file is a symbolic link, which Dreamer does not follow; "
                "set state_dir to the directory that holds the real file"
            )
        if not path.exists():
            if existing:
                raise StateFileError(f"{path}: the state file is not there; nothing was created in its place")
            create(path)
        try:
            # With ``existing``, SQLite is told not to create it either (it may go in between).
            where = f"file:{quote(str(path))}?mode=rw" if existing else str(path)
            conn = sqlite3.connect(
                where, timeout=LOCK_TIMEOUT_S, isolation_level=None, check_same_thread=False, uri=existing
            )
        except sqlite3.Error as exc:
            raise StateFileError(f"{path}: cannot open the state file: {exc}") from None
        try:
            conn.execute(f"PRAGMA busy_timeout={int(LOCK_TIMEOUT_S * 1000)}")
            check_identity(conn, path, on_upgrade)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=FULL")
        except sqlite3.DatabaseError as exc:
            conn.close()
            if isinstance(exc, sqlite3.OperationalError) and ("locked" in str(exc) or "busy" in str(exc)):
                # A healthy file another process holds (an upgrade takes about a minute per million
                # cards): never advise moving it aside.
                raise StateFileError(
                    f"{path}: the state file stayed locked by another process for {LOCK_TIMEOUT_S:g} s "
                    f"({exc}); "
                    "another Dreamer may be upgrading it: wait for it, then run again"
                ) from None
            fault = space_fault(path, exc)
            if fault:  # a healthy file on a full or read-only file system: never advise moving it
                raise StateFileError(f"{path}: {fault}") from None
            raise StateFileError(
                f"{path}: not a readable state file ({exc}); move it aside and restore it from a "
                "backup, or point state_dir at a new directory to start over"
            ) from None
        except BaseException:
            conn.close()
            raise
        return cls(conn, path)

    # --- the one commit of a roll-up ---------------------------------------------------------

    @contextlib.contextmanager
    def fenced(self, leases: Sequence[Lease]) -> Iterator[None]:
        """Within the block, every :meth:`commit_rollup` of this store also checks ``leases`` (the
        leases of the run that holds it: :class:`dreamer.jobs.leases.HostSeat`)."""
        before = self._fences
        self._fences = (*before, *leases)
        try:
            yield
        finally:
            self._fences = before

    @state_errors
    def commit_rollup(
        self,
        *,
        profile: str,
        bank_id: str,
        watermark: Watermark,
        promoted: Sequence[LedgerCard],
        reinforced: Sequence[Reinforcement],
        run_id: str,
        outcome: str,
        detail: str,
        counts: Mapping[str, int],
        finished_at: datetime,
        expected: Watermark | None = None,
        decisions: Sequence[Decision] = (),
        leases: Sequence[Lease] = (),
    ) -> None:
        """Move the watermark, add the ledger rows, the run's decisions about the units it judged
        (:mod:`.decisions`) and finish the run record, atomically.

        ``expected`` is the watermark the run read: when the stored one is no longer it (another
        run of the profile committed meanwhile), nothing is written and :class:`RunBusyError` is
        raised, so a watermark never moves backwards. A reinforcement counts only when it brings
        source ids the card did not have, so re-reading the same units never inflates a count, and
        a run counts once per card however many of its drafts repeat it: a card's count is how many
        roll-ups found its fact again (:attr:`LedgerCard.told`).

        ``leases`` are the leases the run holds (several hosts sharing the state): unless each is
        still this host's, with its token, nothing is written and :class:`LeaseLostError` is raised.
        """
        with self._write():
            self._check_leases((*self._fences, *leases))
            if expected is not None:
                self._check_watermark(profile, expected)
            self._put_watermark(profile, bank_id, watermark, finished_at)
            for card in promoted:
                self._promote(card)
            for reinforcement in _one_per_card(reinforced):
                self._reinforce(reinforcement, finished_at)
            self._record_decisions(decisions)
            self._finish_run(run_id, outcome, detail, counts, finished_at)

    def _promote(self, card: LedgerCard) -> None:
        """Write a promoted card and everything derived from it (its words, its vector, its
        profiles, its rank rows) in the commit's transaction, so no reader ever sees a card the
        dedup, the semantic search or a peer card cannot find."""
        self._insert_card(card)
        if card.words:
            self._index_card(card.document_id, card.words, card.word_sizes)
        if card.vector is not None:
            self._put_vector(card.document_id, card.vector)
        self._add_card_profiles(card)
        self._rerank(card.document_id)

    def _reinforce(self, reinforcement: Reinforcement, seen_at: datetime) -> None:
        """Reinforce a card the ledger holds and re-rank it, as its count and profiles changed; a
        card it does not hold (never promoted here) is skipped."""
        if self._reinforce_card(reinforcement, seen_at):
            self._rerank(reinforcement.document_id)

    def _finish_run(
        self, run_id: str, outcome: str, detail: str, counts: Mapping[str, int], finished_at: datetime
    ) -> None:
        """End the run's record in the commit's transaction: a run recorded as finished has its
        cards and watermark written, and one whose commit failed is not recorded as finished."""
        self._conn.execute(END_RUN, (iso(finished_at), outcome, detail, json.dumps(dict(counts)), run_id))


def _one_per_card(reinforced: Sequence[Reinforcement]) -> list[Reinforcement]:
    """One reinforcement per card, the source ids of each that names it merged in order."""
    merged: dict[str, Reinforcement] = {}
    for r in reinforced:
        known = merged.get(r.document_id)
        sources = r.source_ids if known is None else (*known.source_ids, *r.source_ids)
        merged[r.document_id] = Reinforcement(r.document_id, tuple(dict.fromkeys(sources)), r.profile)
    return list(merged.values())
