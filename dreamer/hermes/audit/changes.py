"""An audit's changes as they went: the plan and the SOUL.md moves carried out through the store,
the files read again, their canary lines compared with the ones read before, and the tally of what
was applied and what stayed unresolved. Recording and reporting it is :mod:`run`'s."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from dreamer.hermes.audit.apply import ActionOutcome, apply_plan
from dreamer.hermes.audit.canary import canary_lines
from dreamer.hermes.audit.files import MemoryFiles, read_memory_files, utilisation
from dreamer.hermes.audit.leftovers import remove_leftover_temp_files
from dreamer.hermes.audit.planner import Entry, Plan, UnresolvedEntry
from dreamer.hermes.audit.report import ActionRecord, Utilisation, action_record, count_actions
from dreamer.hermes.audit.settings import AgentFiles, AuditSettings
from dreamer.hermes.audit.soul import SoulMove
from dreamer.hermes.audit.soul_audit import apply_soul_moves
from dreamer.hermes.memory.store import MemoryStore

__all__ = ["Changes", "make_changes"]


@dataclass(frozen=True)
class Changes:
    """What applying a plan did: the records of every action, the entries left unresolved, the
    action counts (LLM tokens not included), the files afterwards and whether the canaries held."""

    records: tuple[ActionRecord, ...]
    unresolved: tuple[UnresolvedEntry, ...]
    counts: dict[str, int]
    files_after: MemoryFiles
    after: Utilisation
    canary_intact: bool
    temp_files_removed: tuple[str, ...]

    @property
    def remaining(self) -> list[str]:
        """The entries of both files after the changes, MEMORY.md's first."""
        return [*self.files_after.memory_entries, *self.files_after.user_entries]


def make_changes(
    agent: AgentFiles,
    settings: AuditSettings,
    plan: Plan,
    entries: Sequence[Entry],
    soul_moves: Sequence[SoulMove],
    files_before: MemoryFiles,
    notes: list[str],
) -> Changes:
    """Carry out `plan` and `soul_moves` (after removing the temporary files a crashed writer left),
    then read both files again: a change that did not go through is skipped and reported, never
    forced; `notes` collects what the report should mention."""
    store = MemoryStore(
        agent.memories_dir,
        memory_char_limit=settings.max_memory_chars,
        user_char_limit=settings.max_user_chars,
    )
    temp_files_removed = remove_leftover_temp_files(agent, notes)
    outcomes = apply_plan(plan, entries, store, agent.rules_skill_path, agent.soul_path)
    soul_records: tuple[ActionRecord, ...] = ()
    if soul_moves and agent.soul_path is not None:
        soul_records = apply_soul_moves(soul_moves, store, agent.soul_path)
    files_after = read_memory_files(agent)
    counts = count_actions([o.action for o in outcomes if o.applied])
    counts["moves"] += sum(r.outcome == "applied" for r in soul_records)
    return Changes(
        records=(
            *(action_record(o.action, "applied" if o.applied else "skipped", o.detail) for o in outcomes),
            *soul_records,
        ),
        unresolved=_unresolved(plan, outcomes, soul_records),
        counts=counts,
        files_after=files_after,
        after=utilisation(files_after.memory_entries, files_after.user_entries, settings),
        canary_intact=_same_canaries(files_before, files_after),
        temp_files_removed=temp_files_removed,
    )


def _unresolved(
    plan: Plan, outcomes: Sequence[ActionOutcome], soul_records: Sequence[ActionRecord]
) -> tuple[UnresolvedEntry, ...]:
    """The plan's unresolved entries, then every action and SOUL.md move that was skipped."""
    return (
        *plan.unresolved,
        *(
            UnresolvedEntry(o.action.source.filename, o.action.entry, f"{o.action.kind}: {o.detail}")
            for o in outcomes
            if not o.applied
        ),
        *(
            UnresolvedEntry(r.file, r.entry, f"{r.kind}: {r.detail}")
            for r in soul_records
            if r.outcome != "applied"
        ),
    )


def _same_canaries(before: MemoryFiles, after: MemoryFiles) -> bool:
    """Whether both files hold the canary lines they held before the changes."""
    return canary_lines(after.memory_raw) == canary_lines(before.memory_raw) and canary_lines(
        after.user_raw
    ) == canary_lines(before.user_raw)
