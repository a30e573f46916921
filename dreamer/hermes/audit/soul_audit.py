"""The SOUL.md part of an audit: read it, judge it stale or fresh, and carry out its moves to MEMORY.md.

`inspect_soul` gathers everything the audit reports about SOUL.md (never raising: a missing,
unreadable or linked SOUL.md is a state with a reason); `apply_soul_moves` moves blocks of SOUL.md
into MEMORY.md, adding to MEMORY.md first and taking the add back when SOUL.md cannot be changed,
so a block is never lost. Why: docs/design/hermes-audit.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dreamer.hermes.audit.classify import Classification, EntryClassifier
from dreamer.hermes.audit.report import ActionRecord
from dreamer.hermes.audit.settings import AgentFiles, AuditSettings
from dreamer.hermes.audit.soul import SoulBlock, SoulFacts, SoulMove, soul_blocks, stale_reasons
from dreamer.hermes.audit.soul_file import SoulWriteError, modified_at, read_soul, remove_from_soul
from dreamer.hermes.memory.entries import Target
from dreamer.hermes.memory.store import MemoryStore, MemoryStoreError

__all__ = ["SoulFindings", "apply_soul_moves", "inspect_soul", "soul_move_record"]


@dataclass(frozen=True)
class SoulFindings:
    """What the audit found about SOUL.md: its state, why, its blocks, and why it cannot be changed."""

    path: Path | None
    state: str
    reasons: tuple[str, ...] = ()
    blocks: tuple[SoulBlock, ...] = ()
    classifications: dict[int, Classification] = field(default_factory=dict)
    unavailable: str = "the agent has no SOUL.md configured"

    def warnings(self) -> tuple[str, ...]:
        """One warning per reason SOUL.md is stale."""
        return tuple(
            f"SOUL.md {self.path} is stale: {reason}; rewrite it for this profile" for reason in self.reasons
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "path": None if self.path is None else str(self.path),
            "state": self.state,
            "reasons": list(self.reasons),
            "blocks": len(self.blocks),
            "writable": not self.unavailable,
            "not_writable_because": self.unavailable or None,
        }


def inspect_soul(
    agent: AgentFiles, settings: AuditSettings, classifier: EntryClassifier, notes: list[str]
) -> SoulFindings:
    """SOUL.md of `agent` as the audit reports it; problems become notes, never exceptions."""
    path = agent.soul_path
    if path is None:
        return SoulFindings(None, "not configured")
    soul = read_soul(path)
    if soul.text is None or soul.modified is None:
        notes.append(f"SOUL.md not audited: {soul.problem}; persona entries stay in the memory files")
        return SoulFindings(
            path, "missing" if "does not exist" in soul.problem else "unreadable", (), (), {}, soul.problem
        )
    default_text: str | None = None
    same_file = False
    if agent.default_soul_path is not None:
        default = read_soul(agent.default_soul_path)
        default_text = default.text
        same_file = default.text is not None and _same_file(path, agent.default_soul_path)
        if default.text is None and default.problem:
            notes.append(f"SOUL.md not compared with the default profile's: {default.problem}")
    memory_times = [
        t for t in (modified_at(agent.memory_path), modified_at(agent.user_path)) if t is not None
    ]
    facts = SoulFacts(
        text=soul.text,
        modified=soul.modified,
        default_text=default_text,
        default_is_same_file=same_file,
        config_modified=modified_at(agent.config_yaml),
        memory_modified=max(memory_times) if memory_times else None,
    )
    reasons = stale_reasons(facts, settings.stale_days)
    if soul.link_target is not None and same_file:
        reasons = (f"it is a link to the default profile's SOUL.md ({soul.link_target})", *reasons)
    blocks = tuple(soul_blocks(soul.text))
    classifications = {index: classifier.classify(block.text) for index, block in enumerate(blocks)}
    return SoulFindings(
        path, "stale" if reasons else "fresh", reasons, blocks, classifications, soul.writable
    )


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve()
    except OSError:
        return False


def soul_move_record(move: SoulMove, outcome: str, detail: str = "") -> ActionRecord:
    """The report's record of one move out of SOUL.md."""
    return ActionRecord("MOVE", "SOUL.md", move.block.text, move.reason, outcome, "MEMORY.md", detail=detail)


def apply_soul_moves(
    moves: Sequence[SoulMove], store: MemoryStore, soul_path: Path
) -> tuple[ActionRecord, ...]:
    """Move each block into MEMORY.md, then out of SOUL.md; an add is taken back if SOUL.md refuses."""
    records: list[ActionRecord] = []
    for move in moves:
        text = move.block.text
        try:
            added = store.add(Target.MEMORY, text).changed
        except MemoryStoreError as exc:
            records.append(soul_move_record(move, "skipped", f"not applied: {exc}"))
            continue
        try:
            remove_from_soul(soul_path, move.block.raw)
        except SoulWriteError as exc:
            detail = f"not applied: {exc}"
            if added:
                try:
                    store.remove(Target.MEMORY, text, exact=True)
                except MemoryStoreError as undo:
                    detail += f"; the copy added to MEMORY.md could not be taken back ({undo})"
            records.append(soul_move_record(move, "skipped", detail))
            continue
        records.append(soul_move_record(move, "applied"))
    return tuple(records)
