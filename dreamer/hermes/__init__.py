"""Hermes agent memory: the MEMORY.md / USER.md store and the per-agent memory audit.

Two rooms: :mod:`.memory` (the two files with Hermes' own MemoryStore semantics) and :mod:`.audit`
(the memory-file audit of one agent, which writes through that store). Neither knows Dreamer's
configuration: :mod:`dreamer.jobs.audit` maps the configured agents onto them, for the daemon's
audit job and for ``dreamer audit`` / ``dreamer memory``.

Library entry points:

- `MemoryStore(memories_dir)`: add / replace / remove / batch / list / stats / render with Hermes'
  semantics (limits 2200 / 1375 chars, "\\n§\\n" delimiter, sidecar `.lock`, atomic replace,
  `.bak.<ts>` on external edits, byte-identical snapshot rendering).
- `needs_audit(agent, settings, now) -> (bool, reason)`: the cheap per-cycle trigger check.
- `audit_agent(agent, settings, now) -> AuditReport`: one audit of one agent's files.
"""

from __future__ import annotations

from dreamer.hermes.audit.classify import Category, Classification, EntryClassifier, RuleBasedClassifier
from dreamer.hermes.audit.files import read_utilisation
from dreamer.hermes.audit.probe import HttpUrlProbe, UrlProbe
from dreamer.hermes.audit.report import ActionRecord, AuditReport, AuditStatus, Utilisation
from dreamer.hermes.audit.run import audit_agent
from dreamer.hermes.audit.settings import AgentFiles, AuditSettings, InvalidAuditSettingsError
from dreamer.hermes.audit.trigger import NaiveTimestampError, needs_audit
from dreamer.hermes.memory.entries import ENTRY_DELIMITER, Target
from dreamer.hermes.memory.render import render_block
from dreamer.hermes.memory.store import (
    AmbiguousMatchError,
    BatchError,
    EmptyContentError,
    EntryDelimiterError,
    ExternalEditError,
    MemoryStore,
    MemoryStoreError,
    NoMatchError,
    Operation,
    OverBudgetError,
    StoreReadError,
    StoreWriteError,
    Usage,
    WriteResult,
)

__all__ = [
    "ENTRY_DELIMITER",
    "ActionRecord",
    "AgentFiles",
    "AmbiguousMatchError",
    "AuditReport",
    "AuditSettings",
    "AuditStatus",
    "BatchError",
    "Category",
    "Classification",
    "EmptyContentError",
    "EntryClassifier",
    "EntryDelimiterError",
    "ExternalEditError",
    "HttpUrlProbe",
    "InvalidAuditSettingsError",
    "MemoryStore",
    "MemoryStoreError",
    "NaiveTimestampError",
    "NoMatchError",
    "Operation",
    "OverBudgetError",
    "RuleBasedClassifier",
    "StoreReadError",
    "StoreWriteError",
    "Target",
    "UrlProbe",
    "Usage",
    "Utilisation",
    "WriteResult",
    "audit_agent",
    "needs_audit",
    "read_utilisation",
    "render_block",
]
