"""Dreamer's own state: watermarks, the promotion ledger and its word index, run records and leases,
in one SQLite file or in a PostgreSQL schema that several hosts share.

The watermark of a profile moves only in :meth:`StateStore.commit_rollup`, in the same transaction
as the ledger rows and the run record of the promotion it covers. The room's modules:
:mod:`.store` (:class:`StateStore`: opening the file, and the one commit); the parts it is made
of, each one concern's reads and writes (:mod:`.watermarks`, :mod:`.ledger`, :mod:`.wordindex`,
:mod:`.vectors`, :mod:`.peerranks`, :mod:`.runs`, :mod:`.decisions`, :mod:`.leases`); :mod:`.base`
(the connection and the two transaction shapes); :mod:`.dialect` (what SQLite and PostgreSQL spell
differently); the PostgreSQL side (:mod:`.pgstore` opens it, :mod:`.pgconn` pools its connections,
:mod:`.pgschema` holds its tables); the rank rows the peer cards read (:mod:`.ranks`); the values
(:mod:`.records`); how a ledger row reads back (:mod:`.rows`); and the file itself (:mod:`.schema`:
tables, identity, upgrades).
"""

from __future__ import annotations

from dreamer.state.leases import Holder, Host, Lease
from dreamer.state.ranks import GLOBAL_SCOPE
from dreamer.state.records import (
    CandidateCard,
    Decision,
    LedgerCard,
    RankPosition,
    Reinforcement,
    RunRecord,
    RunTotal,
    StoredVector,
    Told,
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
    "Decision",
    "Holder",
    "Host",
    "Lease",
    "LedgerCard",
    "RankPosition",
    "Reinforcement",
    "RunRecord",
    "RunTotal",
    "StateStore",
    "StoredVector",
    "Told",
    "VectorRow",
    "Watermark",
    "WordScan",
]
