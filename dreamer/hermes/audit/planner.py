"""The audit's decisions, computed without I/O: which entries to delete, move, correct or mark.

Inputs are the entries of both files, their classifications and ages, the answers of the URLs they
name, and the model configured in the agent's config.yaml; the output is an ordered plan plus the
entries left unresolved. The plan is simulated against the character limits in the order it will be
applied (deletions, then moves, then in-place edits), so a move into a file without room, or an
edit that would overflow one, is reported as unresolved up front and the entry stays where it is:
nothing is ever dropped to make a move fit.

Rules:
- Entries holding a canary line are never touched.
- Copies whose normalised text is equal are duplicates: the first (MEMORY.md before USER.md, file
  order within a file) is kept, the others deleted, unless the category is uncertain.
- Uncertain entries are only reported. Session notes are deleted; temporary state and historical
  snapshots are deleted once `stale_days` old; technical config in USER.md moves to MEMORY.md;
  identity and preferences in MEMORY.md move to USER.md; operating rules move to the rules skill;
  persona entries (the agent's own identity and voice) move to SOUL.md.
- A long entry with a shorter wording that kept every protected detail (`compressions`, see
  compress.py) is rewritten in place, last, in the file it ends up in (shorter: it always fits).
- A technical config naming a URL that did not answer gets " [UNVERIFIED]" appended (never deleted);
  a marked one whose URLs all answer again loses the mark; a URL that was not checked (its host is
  not on the allow-list, or a dry run) is absent from the answers and changes nothing; a `model:`
  value that disagrees with the agent's config.yaml is corrected.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from dreamer.hermes.audit.age import EntryAge
from dreamer.hermes.audit.canary import is_canary_entry
from dreamer.hermes.audit.classify import Category, Classification
from dreamer.hermes.audit.ledger import one_line
from dreamer.hermes.audit.probe import extract_urls
from dreamer.hermes.audit.settings import AuditSettings
from dreamer.hermes.audit.state import normalize_entry
from dreamer.hermes.memory.entries import Target, joined_length

__all__ = [
    "SKILL_DESTINATION",
    "SOUL_DESTINATION",
    "UNVERIFIED_MARK",
    "ActionKind",
    "Entry",
    "Plan",
    "PlanContext",
    "PlannedAction",
    "UnresolvedEntry",
    "clear_unverified",
    "collect_entries",
    "correct_model_text",
    "mark_unverified",
    "plan_audit",
    "urls_to_verify",
]

UNVERIFIED_MARK = "[UNVERIFIED]"
SKILL_DESTINATION = "skill"
SOUL_DESTINATION = "SOUL.md"

_MODEL_VALUE = re.compile(r"(\bmodel\s*:\s*)([`'\"]?)([^\s`'\",;]+)", re.IGNORECASE)
_UNVERIFIED_SUFFIX = re.compile(r"\s*\[UNVERIFIED\]")


class ActionKind(StrEnum):
    """What the audit does to one entry."""

    DELETE = "DELETE"
    MOVE = "MOVE"
    CORRECT = "CORRECT"
    MARK_UNVERIFIED = "MARK_UNVERIFIED"
    CLEAR_UNVERIFIED = "CLEAR_UNVERIFIED"
    COMPRESS = "COMPRESS"


@dataclass(frozen=True)
class Entry:
    """One entry as the audit read it; `id` is its position across both files."""

    id: int
    target: Target
    text: str

    @property
    def file(self) -> str:
        """The file the entry was read from."""
        return self.target.filename


@dataclass(frozen=True)
class PlannedAction:
    """One change: `entry` is the entry's text just before it, in file `source`."""

    kind: ActionKind
    entry_id: int
    source: Target
    entry: str
    reason: str
    destination: str | None = None
    new_text: str | None = None


@dataclass(frozen=True)
class UnresolvedEntry:
    """An entry the audit left as it is, and why."""

    file: str
    entry: str
    reason: str


@dataclass(frozen=True)
class PlanContext:
    """Everything besides the entries that the decisions depend on."""

    settings: AuditSettings
    ages: Mapping[int, EntryAge]
    url_answers: Mapping[str, bool]
    configured_model: str | None
    skill_available: bool
    #: Shorter wordings of entries (by their text as read) and what produced each (compress_entries).
    compressions: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    #: Why persona entries cannot move to SOUL.md ("" when they can).
    soul_unavailable: str = "the agent has no SOUL.md configured"


@dataclass(frozen=True)
class Plan:
    """The ordered actions, the unresolved entries, and both files as they will be afterwards."""

    actions: tuple[PlannedAction, ...]
    unresolved: tuple[UnresolvedEntry, ...]
    final_memory: tuple[str, ...]
    final_user: tuple[str, ...]

    def count(self, kind: ActionKind) -> int:
        """How many actions of `kind` the plan holds."""
        return sum(1 for action in self.actions if action.kind is kind)

    @property
    def unverified_total(self) -> int:
        """Entries carrying the [UNVERIFIED] mark once the plan is applied."""
        return sum(UNVERIFIED_MARK in text for text in (*self.final_memory, *self.final_user))


def collect_entries(memory: Sequence[str], user: Sequence[str]) -> tuple[Entry, ...]:
    """Number the entries of MEMORY.md, then USER.md."""
    tagged = [(Target.MEMORY, text) for text in memory] + [(Target.USER, text) for text in user]
    return tuple(Entry(index, target, text) for index, (target, text) in enumerate(tagged))


def urls_to_verify(
    entries: Sequence[Entry], classifications: Mapping[int, Classification]
) -> tuple[str, ...]:
    """The URLs named by confidently classified technical-config entries, each once."""
    urls: dict[str, None] = {}
    for entry in entries:
        classification = classifications.get(entry.id)
        if classification is None or is_canary_entry(entry.text):
            continue
        if classification.confident and classification.category is Category.TECHNICAL_CONFIG:
            urls.update(dict.fromkeys(extract_urls(entry.text)))
    return tuple(urls)


def correct_model_text(text: str, configured_model: str) -> str | None:
    """`text` with every `model:` value set to `configured_model`, None if none disagreed."""
    changed = False

    def fix(match: re.Match[str]) -> str:
        nonlocal changed
        prefix, quote, value = match.groups()
        core = value.rstrip(".)!?:")
        if core == configured_model:
            return match.group(0)
        changed = True
        return f"{prefix}{quote}{configured_model}{value[len(core) :]}"

    corrected = _MODEL_VALUE.sub(fix, text)
    return corrected if changed else None


def mark_unverified(text: str) -> str:
    """`text` with the [UNVERIFIED] mark appended."""
    return f"{text} {UNVERIFIED_MARK}"


def clear_unverified(text: str) -> str:
    """`text` without any [UNVERIFIED] mark."""
    return _UNVERIFIED_SUFFIX.sub("", text).strip()


def _config_edits(text: str, context: PlanContext) -> list[tuple[ActionKind, str, str]]:
    """(kind, new text, reason) for each edit of a config entry, each applying to the previous result."""
    edits: list[tuple[ActionKind, str, str]] = []
    if context.configured_model is not None:
        corrected = correct_model_text(text, context.configured_model)
        if corrected is not None:
            edits.append(
                (
                    ActionKind.CORRECT,
                    corrected,
                    f"model disagrees with config.yaml ({context.configured_model})",
                )
            )
            text = corrected
    urls = extract_urls(text)
    silent = [url for url in urls if context.url_answers.get(url) is False]
    if silent and UNVERIFIED_MARK not in text:
        edits.append(
            (ActionKind.MARK_UNVERIFIED, mark_unverified(text), f"no answer from {', '.join(silent)}")
        )
    elif urls and UNVERIFIED_MARK in text and all(context.url_answers.get(url) is True for url in urls):
        edits.append((ActionKind.CLEAR_UNVERIFIED, clear_unverified(text), f"{', '.join(urls)} answered"))
    return edits


def plan_audit(
    entries: Sequence[Entry], classifications: Mapping[int, Classification], context: PlanContext
) -> Plan:
    """The audit plan for `entries` (see the module docstring for the rules): first what each entry
    calls for, then those decisions simulated against the limits in the order they will be applied."""
    candidates = [entry for entry in entries if not is_canary_entry(entry.text)]
    decisions = _Decisions()
    handled = _decide_duplicates(candidates, classifications, decisions)
    for entry in candidates:
        if entry.id not in handled:
            _decide(entry, classifications[entry.id], context, decisions)
    simulation = _Simulation(entries, context, decisions.unresolved)
    simulation.delete(decisions.deletes)
    simulation.move(decisions.moves)
    simulation.edit_configs(decisions.configs)
    simulation.compress(candidates)
    return simulation.plan()


@dataclass
class _Decisions:
    """What the rules call for, entry by entry, before anything is checked against the limits."""

    deletes: list[PlannedAction] = field(default_factory=list)
    moves: list[PlannedAction] = field(default_factory=list)
    #: Technical-config entries, whose model and URLs are checked once the moves are known.
    configs: list[int] = field(default_factory=list)
    #: By entry id, to report in file order.
    unresolved: list[tuple[int, UnresolvedEntry]] = field(default_factory=list)

    def delete(self, entry: Entry, reason: str) -> None:
        """Plan the deletion of `entry`."""
        self.deletes.append(PlannedAction(ActionKind.DELETE, entry.id, entry.target, entry.text, reason))

    def move(self, entry: Entry, reason: str, destination: str) -> None:
        """Plan the move of `entry` to `destination` (a memory file, SOUL.md or the rules skill)."""
        self.moves.append(
            PlannedAction(ActionKind.MOVE, entry.id, entry.target, entry.text, reason, destination)
        )

    def leave(self, entry: Entry, reason: str) -> None:
        """Leave `entry` as it is, reporting why."""
        self.unresolved.append((entry.id, UnresolvedEntry(entry.file, entry.text, reason)))


def _decide_duplicates(
    candidates: Sequence[Entry], classifications: Mapping[int, Classification], decisions: _Decisions
) -> set[int]:
    """Keep the first copy of each normalised text and delete the others, only when the first's
    category is certain (else report them); the ids of the copies, which no other rule looks at."""
    groups: dict[str, list[Entry]] = {}
    for entry in candidates:
        groups.setdefault(normalize_entry(entry.text), []).append(entry)
    handled: set[int] = set()
    for group in groups.values():
        first, *copies = group
        if not copies:
            continue
        handled.update(copy.id for copy in copies)
        classification = classifications[first.id]
        for copy in copies:
            if classification.confident:
                decisions.delete(copy, f"Duplicate of {first.file} entry {one_line(first.text, 60)!r}")
            else:
                reason = f"duplicate of a {first.file} entry, kept because the category is uncertain"
                decisions.leave(copy, f"{reason} ({classification.reason})")
    return handled


def _decide(
    entry: Entry, classification: Classification, context: PlanContext, decisions: _Decisions
) -> None:
    """What the category of `entry` calls for: a deletion, a move, a config check, or nothing."""
    category = classification.category
    if not classification.confident:
        decisions.leave(entry, f"category uncertain: {classification.reason}")
    elif category is Category.SESSION_NOTE:
        decisions.delete(entry, str(category))
    elif category in (Category.TEMPORARY_STATE, Category.HISTORICAL_SNAPSHOT):
        age = context.ages[entry.id]
        if age.days >= context.settings.stale_days:
            decisions.delete(entry, f"{category}, {age.days} days old ({age.basis})")
    elif category is Category.TECHNICAL_CONFIG:
        if entry.target is Target.USER:
            decisions.move(entry, f"{category} belongs in MEMORY.md", "MEMORY.md")
        decisions.configs.append(entry.id)
    elif category in (Category.IDENTITY, Category.PREFERENCE) and entry.target is Target.MEMORY:
        decisions.move(entry, f"{category} belongs in USER.md", "USER.md")
    elif category is Category.PERSONA:
        if context.soul_unavailable:
            decisions.leave(entry, f"{category}, but it cannot move to SOUL.md: {context.soul_unavailable}")
        else:
            decisions.move(entry, f"{category} belongs in SOUL.md", SOUL_DESTINATION)
    elif category is Category.OPERATING_RULE:
        if context.skill_available:
            decisions.move(entry, f"{category} belongs in a skill", SKILL_DESTINATION)
        else:
            reason = f"{category}, but the agent has no skills directory configured to move it to"
            decisions.leave(entry, reason)


class _Simulation:
    """Both files as the plan changes them, step by step in the order the plan will be applied, so a
    step that would overflow a file is reported as unresolved up front instead of planned."""

    def __init__(
        self, entries: Sequence[Entry], context: PlanContext, unresolved: list[tuple[int, UnresolvedEntry]]
    ) -> None:
        self.context = context
        self.text_of = {entry.id: entry.text for entry in entries}
        #: Where each entry is now: a memory file, or None once it was deleted or moved out.
        self.location: dict[int, Target | None] = {entry.id: entry.target for entry in entries}
        self.working: dict[Target, list[int]] = {
            target: [entry.id for entry in entries if entry.target is target] for target in Target
        }
        self.actions: list[PlannedAction] = []
        self.unresolved = unresolved

    def size_with(self, ids: Sequence[int]) -> int:
        """The size of a file holding the entries `ids`, in their current wording."""
        return joined_length([self.text_of[i] for i in ids])

    def delete(self, deletes: Sequence[PlannedAction]) -> None:
        """The deletions, first: they only make room."""
        for action in deletes:
            self.working[action.source].remove(action.entry_id)
            self.location[action.entry_id] = None
            self.actions.append(action)

    def move(self, moves: Sequence[PlannedAction]) -> None:
        """The moves, in order; a move into a memory file without room stays where it is, reported."""
        for action in moves:
            source = action.source
            if action.destination in (SKILL_DESTINATION, SOUL_DESTINATION):
                self.working[source].remove(action.entry_id)
                self.location[action.entry_id] = None
                self.actions.append(action)
                continue
            destination = Target.from_filename(action.destination or "")
            limit = self.context.settings.limit_for(destination)
            size = self.size_with([*self.working[destination], action.entry_id])
            if size > limit:
                reason = (
                    f"move to {destination.filename} not possible: it would put {destination.filename} at "
                    f"{size:,}/{limit:,} chars; the entry stays in {source.filename}"
                )
                self.unresolved.append(
                    (action.entry_id, UnresolvedEntry(source.filename, action.entry, reason))
                )
                continue
            self.working[source].remove(action.entry_id)
            self.working[destination].append(action.entry_id)
            self.location[action.entry_id] = destination
            self.actions.append(action)

    def edit_configs(self, configs: Sequence[int]) -> None:
        """The config entries' edits, in the file each ends up in; the first edit that would
        overflow it is reported and the entry's later edits are dropped."""
        for entry_id in configs:
            where = self.location[entry_id]
            if where is None:
                continue
            for kind, new_text, reason in _config_edits(self.text_of[entry_id], self.context):
                old_text = self.text_of[entry_id]
                limit = self.context.settings.limit_for(where)
                size = self.size_with(self.working[where]) - len(old_text) + len(new_text)
                if size > limit:
                    reason = (
                        f"{kind} not applied ({reason}): it would put {where.filename} at "
                        f"{size:,}/{limit:,} chars"
                    )
                    self.unresolved.append((entry_id, UnresolvedEntry(where.filename, old_text, reason)))
                    break
                self.actions.append(PlannedAction(kind, entry_id, where, old_text, reason, new_text=new_text))
                self.text_of[entry_id] = new_text

    def compress(self, candidates: Sequence[Entry]) -> None:
        """The shorter wordings, last (shorter: they always fit), of entries still in a file and not
        edited above (a new text the rewrite was not checked against)."""
        for entry in candidates:
            where, text = self.location[entry.id], self.text_of[entry.id]
            if where is None or text not in self.context.compressions:
                continue
            shorter, method = self.context.compressions[text]
            reason = f"shorter by {len(text) - len(shorter)} chars ({method}), every detail kept"
            self.actions.append(
                PlannedAction(ActionKind.COMPRESS, entry.id, where, text, reason, new_text=shorter)
            )
            self.text_of[entry.id] = shorter

    def plan(self) -> Plan:
        """The plan: the actions in order, the unresolved entries in file order, both files after."""
        return Plan(
            actions=tuple(self.actions),
            unresolved=tuple(item for _, item in sorted(self.unresolved, key=lambda pair: pair[0])),
            final_memory=tuple(self.text_of[i] for i in self.working[Target.MEMORY]),
            final_user=tuple(self.text_of[i] for i in self.working[Target.USER]),
        )
