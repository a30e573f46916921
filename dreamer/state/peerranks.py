"""The peer-card rank part of :class:`~dreamer.state.StateStore`: the reads a peer card makes of the
``ledger_rank`` rows, and the commit step that keeps a card's rows in step with its ledger row.

The rows themselves, their order and the upgrade that fills them are :mod:`.ranks`; this part only
gives them the store's connection and its error reporting. Why: ``docs/design/peer-card.md``.
"""

from __future__ import annotations

from dreamer.state.base import StoreBase
from dreamer.state.ranks import ranked_chunk, ranked_count, rerank
from dreamer.state.records import LedgerCard, RankPosition
from dreamer.state.schema import state_errors

__all__ = ["PeerRanks"]


class PeerRanks(StoreBase):
    """A peer card's reads in rank order, and the re-ranking of a card a commit changed."""

    @state_errors
    def ranked_chunk(
        self, upstream_bank: str, scope: str, after: RankPosition | None, limit: int
    ) -> tuple[list[LedgerCard], RankPosition | None]:
        """The next ``limit`` cards of a peer card's ``scope`` in rank order (:mod:`.ranks`)."""
        return ranked_chunk(self._conn, upstream_bank, scope, after, limit)

    @state_errors
    def ranked_count(self, upstream_bank: str, scope: str, *, superseded: bool) -> int:
        """How many cards a peer card's ``scope`` holds (:mod:`.ranks`)."""
        return ranked_count(self._conn, upstream_bank, scope, superseded=superseded, dialect=self.dialect)

    def _rerank(self, document_id: str) -> None:
        """Rewrite a card's rank rows after the commit promoted, reinforced or re-profiled it, in
        the same transaction: a peer card read afterwards must rank it by what the ledger says."""
        rerank(self._conn, document_id, self.dialect)
