"""Dreamer's own state in one SQLite file: watermarks, the promotion ledger and its word index, and
run records.

The watermark of a profile moves only in :meth:`StateStore.commit_rollup`, in the same transaction
as the ledger rows and the run record of the promotion it covers. The room's modules:
:mod:`.records` (the values), :mod:`.schema` (the file: tables, identity, upgrades) and
:mod:`.store` (:class:`StateStore`, every read and the one commit).
"""

from __future__ import annotations

from dreamer.state.ranks import GLOBAL_SCOPE
from dreamer.state.records import (
    CandidateCard,
    LedgerCard,
    RankPosition,
    Reinforcement,
    RunRecord,
    RunTotal,
    StoredVector,
    VectorRow,
    Watermark,
    WordScan,
)
from dreamer.state.schema import APPLICATION_ID, SCHEMA_VERSION
from dreamer.state.store import StateStore

__all__ = [
    "APPLICATION_ID",
    "GLOBAL_SCOPE",
    "SCHEMA_VERSION",
    "CandidateCard",
    "LedgerCard",
    "RankPosition",
    "Reinforcement",
    "RunRecord",
    "RunTotal",
    "StateStore",
    "StoredVector",
    "VectorRow",
    "Watermark",
    "WordScan",
]
