"""LoCoMo sessions replayed in time order through the real roll-up and, on its very drafts, the baselines.

Each conversation is one profile and each session one roll-up cycle at the session's own time; the
evaluation then scores every policy's global bank (see ``docs/benchmarks.md``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from bench._common import BenchError, Embedder, progress
from bench.locomo.baselines import Policy, baseline_policies
from bench.locomo.data import (
    Conversation,
    Question,
    Session,
    dia_ids,
    evidence_sessions,
)
from bench.locomo.metrics import (
    Card,
    Evidence,
    answer_bearing,
    bears_answer,
    coverage,
    differs_in_detail,
    evidence_of,
    is_hit,
    near_duplicate_texts,
    per_100,
    provenance,
)
from dreamer.backends.base import MemoryBackend, MemoryUnit, RecallItem, RetainItem
from dreamer.config import Config, parse_config
from dreamer.rollup import batches, extractive, salience
from dreamer.rollup.grounding import units_not_held
from dreamer.rollup.pipeline import Rollup, new_units
from dreamer.rollup.promote import INPUT_FACT_TYPES, ROLLUP_TAG
from dreamer.rollup.report import RollupReport
from dreamer.rollup.semantic import SemanticJudge
from dreamer.state import StateStore


@dataclass
class PolicyResult:
    """What one policy produced over the whole replay."""

    name: str
    description: str
    bank_id: str
    cards: list[Card] = field(default_factory=list)
    promoted: int = 0
    dropped: int = 0
    reinforced: int = 0
    reflect_calls: int = 0
    summarise_calls: int = 0
    slot_held_s: float | None = 0.0
    wall_s: float = 0.0
    #: The cards' source ids are document ids of profile units (keep-all), not unit ids.
    sources_are_documents: bool = False


@dataclass
class ReplayOptions:
    top_n: int
    #: The judge: near-duplicates and Honcho's rule (never the model Dreamer decides with).
    embedder: Embedder
    threshold: float = 0.90
    k: int = 5
    sessions_per_conversation: int | None = None
    #: What Dreamer decides with: the pipeline's own semantic judge (None: the lexical rules only).
    semantic: SemanticJudge | None = None


def build_config(
    conversations: Sequence[Conversation],
    state_dir: Path,
    backend: Mapping[str, Any],
    top_n: int,
    prefix: str,
    llm: Mapping[str, Any] | None = None,
) -> Config:
    """One profile per conversation, all rolling up into one global bank."""
    banks: dict[str, Any] = {
        "global": {"bank_id": f"{prefix}global"},
        "shared": {"bank_id": f"{prefix}shared"},
    }
    profiles: dict[str, Any] = {}
    for conv in conversations:
        banks[conv.profile] = {"bank_id": f"{prefix}conv_{conv.id}", "access": "read_write"}
        profiles[conv.profile] = {"bank": conv.profile, "top_n": top_n, "min_new_units": 1}
    data = {
        "state_dir": str(state_dir),
        "backend": dict(backend),
        "banks": banks,
        "profiles": profiles,
        "slot": {"acquire_timeout_s": 30},
    }
    if llm is not None:
        data["llm"] = dict(llm)
    return parse_config(data, source="<bench.locomo>", base_dir=state_dir)


def retain_items(conv: Conversation, session: Session) -> list[RetainItem]:
    return [
        RetainItem(
            content=unit.text,
            context=f"LoCoMo conversation {conv.id}, session {session.number}",
            timestamp=session.time,
            metadata={
                "dia_ids": json.dumps(list(unit.dia_ids)),
                "kind": unit.kind,
                "conversation": conv.id,
                "session": str(session.number),
            },
            document_id=unit_document_id(conv.id, session.number, index),
        )
        for index, unit in enumerate(session.units)
    ]


def unit_document_id(conversation: str, session: int, index: int) -> str:
    return f"locomo-{conversation}-s{session}-u{index}"


def independent_drafts(
    units: Sequence[MemoryUnit], size: int, directive: str, max_batches: int
) -> tuple[list[tuple[str, tuple[str, ...]]], set[str]]:
    """The cards the extractive path drafts from ``units``, computed here from the pipeline's parts
    (the stream cut into batches of ``size`` units, `rollup.extractive_batch`, each batch's cards
    in turn), and the ids of the units the run leaves pending."""
    cut = batches.cut_stream(
        [salience.SalienceInput(u.id, u.text, u.created_at, u.proof_count) for u in units if u.text.strip()],
        size,
        limit=max_batches,
        directive=directive,
    )
    drafts: list[tuple[str, tuple[str, ...]]] = []
    for batch in cut.batches:
        substantive = batch.substantive
        cards = extractive.extract_cards(substantive, len(substantive)) if substantive else []
        drafts += [(d.text, tuple(d.source_ids)) for d in cards]
    return drafts, {u.id for u in cut.pending}


#: Run counts of Dreamer's runs the benchmark adds up: its model's tokens and grounding's counts.
_SUMMED = (
    "llm_calls",
    "llm_calls_estimated",
    "llm_prompt_tokens",
    "llm_completion_tokens",
    "llm_truncated",
    "llm_unreadable",
    "cards_accepted",
    "cards_rejected",
    "cards_uncited",
    "units_recarded",
    "claims_dropped",
)


class Replay:
    """Replays conversations session by session through the pipeline and the baselines."""

    def __init__(
        self,
        conversations: Sequence[Conversation],
        config: Config,
        backend: MemoryBackend,
        state: StateStore,
        options: ReplayOptions,
        prefix: str,
    ) -> None:
        self.conversations = conversations
        self.config = config
        self.backend = backend
        self.state = state
        self.options = options
        self.global_bank = config.bank_id("global")
        self.dreamer = PolicyResult(
            "dreamer", "Dreamer: the real roll-up pipeline, end to end", self.global_bank
        )
        self.policies = baseline_policies(options.embedder)
        self.baselines = {
            p.name: PolicyResult(p.name, p.description, f"{prefix}global_{p.name}") for p in self.policies
        }
        self.keep_all = PolicyResult(
            "keep-all",
            "every unit of the stream (observations, summary sentences, events): no salience, no dedup",
            f"{prefix}global_keep_all",
            sources_are_documents=True,
        )
        self.units_in = 0
        self.units_selected = 0
        self.cycles = 0
        self.drafts_checked = 0
        self.drafts_differ = 0
        self.outcomes: dict[str, int] = {}
        #: Dreamer's token and grounding counts over every run (`_SUMMED`), its rejections by reason.
        self.summed: dict[str, int] = {}
        self.rejected: dict[str, int] = {}
        self._seen: dict[str, set[str]] = {}
        #: Every unit of each profile's bank, as the evaluation listed them (by profile).
        self._listed: dict[str, list[MemoryUnit]] = {}

    def schedule(self) -> list[tuple[datetime, Conversation, Session]]:
        """Every session of every conversation, in time order."""
        events = []
        for conv in self.conversations:
            sessions = conv.sessions[: self.options.sessions_per_conversation]
            events += [(s.time, conv, s) for s in sessions]
        events.sort(key=lambda e: (e[0], e[1].id, e[2].number))
        return events

    async def run(self) -> None:
        schedule = self.schedule()
        for index, (when, conv, session) in enumerate(schedule, start=1):
            if index % 20 == 0 or index == len(schedule):
                progress(f"locomo: cycle {index}/{len(schedule)}")
            await self.cycle(when, conv, session)

    async def cycle(self, when: datetime, conv: Conversation, session: Session) -> None:
        bank_id = self.config.bank_id(conv.profile)
        items = retain_items(conv, session)
        if not items:
            return
        await self.backend.retain(bank_id, items)
        self.units_in += len(items)
        self.cycles += 1
        await self._keep_all(conv, session, items)

        new_units: list[MemoryUnit] | None = None
        if not self.backend.reflect_uses_llm and self.config.llm.provider == "none":
            # The same collection as the pipeline's, to check that the baselines see its very drafts.
            seen = self._seen.setdefault(bank_id, set())
            listed = await self.backend.list_units_since(
                bank_id, None, exclude_tags=(ROLLUP_TAG,), fact_types=("world", "experience")
            )
            new_units = [u for u in listed if u.id not in seen]
            seen.update(u.id for u in new_units)

        steps: dict[str, float] = {}
        started = time.monotonic()

        def on_step(step: str, profile: str) -> None:
            del profile
            steps.setdefault(step, time.monotonic())

        rollup = Rollup(
            self.config,
            self.backend,
            self.state,
            on_step=on_step,
            clock=lambda: when,
            semantic=self.options.semantic,
        )
        report = await rollup.run(conv.profile)
        self._record_dreamer(report)
        drafts = [(p.text, p.source_ids) for p in report.plan]
        if new_units is not None:
            directive = self.config.profiles[conv.profile].directive
            self.drafts_checked += 1
            size, limit = self.config.rollup.extractive_batch, self.config.rollup.max_batches_per_run
            expected, pending = independent_drafts(new_units, size, directive, limit)
            self._seen[bank_id] -= pending
            if expected != drafts:
                self.drafts_differ += 1
        shared_s = steps.get("summarised", started) - started
        for policy in self.policies:
            await self._apply_policy(policy, conv, session, drafts, shared_s, report)

    async def _keep_all(self, conv: Conversation, session: Session, items: Sequence[RetainItem]) -> None:
        """Every unit of the session straight into the keep-all bank."""
        started = time.monotonic()
        kept: list[RetainItem] = []
        for index, item in enumerate(items):
            source = unit_document_id(conv.id, session.number, index)
            document_id = f"keep-all-{source}"
            self.keep_all.cards.append(Card(document_id, item.content, conv.profile, (source,)))
            kept.append(
                RetainItem(
                    content=item.content,
                    context=f"keep-all baseline of profile {conv.profile}",
                    timestamp=session.time,
                    metadata={"source_ids": json.dumps([source]), "source_profile": conv.profile},
                    tags=(ROLLUP_TAG, f"src:{conv.profile}"),
                    document_id=document_id,
                )
            )
        await self.backend.retain(self.keep_all.bank_id, kept)
        self.keep_all.promoted += len(kept)
        self.keep_all.wall_s += time.monotonic() - started

    def _record_dreamer(self, report: RollupReport) -> None:
        result = self.dreamer
        counts = report.counts()
        for name in _SUMMED:
            self.summed[name] = self.summed.get(name, 0) + counts.get(name, 0)
        for reason, n in report.cards_rejected.items():
            self.rejected[reason] = self.rejected.get(reason, 0) + n
        self.units_selected += report.units_selected
        self.outcomes[report.outcome] = self.outcomes.get(report.outcome, 0) + 1
        result.promoted += report.promoted
        result.reinforced += report.reinforced
        result.reflect_calls += report.reflect_attempts
        result.summarise_calls += 1 if report.summariser else 0
        result.slot_held_s = (result.slot_held_s or 0.0) + report.slot_held_s
        result.wall_s += report.duration_s
        if report.outcome in ("deferred", "failed", "slot_busy"):
            raise BenchError(f"the roll-up of {report.profile} ended {report.outcome}: {report.reason}")

    async def _apply_policy(
        self,
        policy: Policy,
        conv: Conversation,
        session: Session,
        drafts: Sequence[tuple[str, tuple[str, ...]]],
        shared_s: float,
        report: RollupReport,
    ) -> None:
        result = self.baselines[policy.name]
        started = time.monotonic()
        items: list[RetainItem] = []
        verdicts = policy.admit([text for text, _ in drafts])
        for index, ((text, sources), keep) in enumerate(zip(drafts, verdicts, strict=True)):
            if not keep:
                result.dropped += 1
                continue
            document_id = f"{policy.name}-{conv.profile}-s{session.number}-c{index}"
            result.cards.append(Card(document_id, text, conv.profile, sources))
            items.append(
                RetainItem(
                    content=text,
                    context=f"{policy.name} baseline roll-up of profile {conv.profile}",
                    timestamp=session.time,
                    metadata={"source_ids": json.dumps(list(sources)), "source_profile": conv.profile},
                    tags=(ROLLUP_TAG, f"src:{conv.profile}"),
                    document_id=document_id,
                )
            )
        if items:
            await self.backend.retain(result.bank_id, items)
        result.promoted += len(items)
        # The baselines share the pipeline's collection and summarisation (and its reflect calls).
        result.reflect_calls += report.reflect_attempts
        result.summarise_calls += 1 if report.summariser else 0
        result.slot_held_s = None if self.backend.reflect_uses_llm else 0.0
        result.wall_s += shared_s + (time.monotonic() - started)

    # --- evaluation -------------------------------------------------------------------------------

    async def unit_evidence(self) -> tuple[dict[str, frozenset[Evidence]], dict[str, frozenset[Evidence]]]:
        """Dialogue ids of every unit of every profile bank, by unit id and by document id."""
        by_unit: dict[str, frozenset[Evidence]] = {}
        by_document: dict[str, frozenset[Evidence]] = {}
        for conv in self.conversations:
            for session in conv.sessions:
                for index, unit in enumerate(session.units):
                    by_document[unit_document_id(conv.id, session.number, index)] = frozenset(
                        (conv.id, d) for d in unit.dia_ids
                    )
            units = await self.backend.list_units_since(self.config.bank_id(conv.profile), None)
            self._listed[conv.profile] = units
            for u in units:
                from_metadata = u.metadata.get("dia_ids")
                if from_metadata is not None:
                    by_unit[u.id] = frozenset((conv.id, d) for d in dia_ids(json.loads(from_metadata)))
                else:
                    by_unit[u.id] = by_document.get(u.document_id or "", frozenset())
        return by_unit, by_document

    def summarised_units(self) -> dict[str, str]:
        """The units Dreamer's runs summarised (id to text), from the banks as `unit_evidence` listed
        them: each unit a run reads (its input fact types, never a card, never empty) that salience
        did not drop as chatter and that is not in the backlog the next run would read."""
        overlap = timedelta(seconds=self.config.rollup.watermark_overlap_s)
        summarised: dict[str, str] = {}
        for profile, listed in self._listed.items():
            read = [
                u
                for u in listed
                if u.fact_type in INPUT_FACT_TYPES and ROLLUP_TAG not in u.tags and u.text.strip()
            ]
            pending = {u.id for u in new_units(read, self.state.watermark(profile), overlap)}
            for u in read:
                if u.id not in pending and salience.chatter_reason(u.text) is None:
                    summarised[u.id] = u.text
        return summarised

    def units_held(self, cards: Sequence[Card]) -> dict[str, Any]:
        """The invariant "units held" over Dreamer's final cards (`grounding.units_not_held`): how
        many of the units summarised have their protected details in the cards citing them, and each
        one that does not, with why."""
        units = self.summarised_units()
        missing = units_not_held(units, [(c.text, c.source_ids) for c in cards])
        return {
            "held": len(units) - len(missing),
            "of": len(units),
            "not_held": [{"id": i, "text": units[i], "why": why} for i, why in missing.items()],
        }

    def questions(self) -> list[tuple[str, Question]]:
        """The non-adversarial questions whose evidence lies in the sessions replayed."""
        found = []
        for conv in self.conversations:
            replayed = {s.number for s in conv.sessions[: self.options.sessions_per_conversation]}
            found += [
                (conv.id, q)
                for q in conv.questions
                if not q.adversarial and q.evidence and evidence_sessions(q.evidence) <= replayed
            ]
        return found

    def dreamer_cards(self) -> list[Card]:
        """Dreamer's promoted cards, with the ledger's provenance (merged by reinforcement)."""
        return [
            Card(c.document_id, c.text, c.profile, c.source_ids) for c in self.state.ledger(self.global_bank)
        ]

    async def ranked_provenance(
        self, bank_id: str, query: str, by_document: Mapping[str, frozenset[Evidence]]
    ) -> list[frozenset[Evidence]]:
        hits = await self.ranked(bank_id, query)
        return [by_document.get(h.document_id or h.id, frozenset()) for h in hits]

    async def ranked(self, bank_id: str, query: str) -> list[RecallItem]:
        """The top ``k`` cards a recall returns for ``query``."""
        hits: list[RecallItem] = await self.backend.recall(bank_id, query, limit=self.options.k)
        return hits[: self.options.k]

    async def evaluate(self) -> dict[str, Any]:
        by_unit, by_unit_document = await self.unit_evidence()
        self.dreamer.cards = self.dreamer_cards()
        questions = self.questions()
        results = [self.dreamer, self.keep_all, *self.baselines.values()]
        answerable = [(c, q) for c, q in questions if answer_bearing(q)]
        rows: list[dict[str, Any]] = []
        for index, result in enumerate(results):
            progress(f"locomo: evaluating {result.name} ({len(questions)} questions)")
            sources = by_unit_document if result.sources_are_documents else by_unit
            card_provenance = {c.document_id: provenance(c.source_ids, sources) for c in result.cards}
            covered: set[Evidence] = set()
            for found in card_provenance.values():
                covered |= found
            any_cov, all_cov = coverage(questions, covered)
            hits = 0
            for conv_id, question in questions:
                ranked = await self.ranked_provenance(result.bank_id, question.question, card_provenance)
                hits += is_hit(ranked, evidence_of(conv_id, question), self.options.k)
            bearing = 0
            for _, question in answerable:
                top = await self.ranked(result.bank_id, question.question)
                bearing += bears_answer([h.text for h in top], question.answer)
            pair_texts = near_duplicate_texts(result.cards, self.options.embedder, self.options.threshold)
            pairs = len(pair_texts)
            detailed = [(older, newer, differs_in_detail(older, newer)) for older, newer in pair_texts]
            vetoed = sum(1 for *_, differs in detailed if differs)
            rows.append(
                {
                    "policy": result.name,
                    "description": result.description,
                    "units_in": self.units_in,
                    "cards": len(result.cards),
                    "compression": self.units_in / len(result.cards) if result.cards else None,
                    "near_dup_pairs": pairs,
                    "near_dup_per_100": per_100(pairs, len(result.cards)),
                    "near_dup_differing_detail": vetoed,
                    # Every pair, for reading them: [older, newer, differs in a protected detail].
                    "near_dup_texts": [list(p) for p in detailed],
                    "coverage_any": any_cov,
                    "coverage_all": all_cov,
                    "hit_at_k": hits / len(questions) if questions else 0.0,
                    "answer_hit_at_k": bearing / len(answerable) if answerable else 0.0,
                    "reinforced": result.reinforced,
                    "dropped": result.dropped,
                    "reflect_calls": result.reflect_calls,
                    "summarise_calls": result.summarise_calls,
                    "slot_held_s": result.slot_held_s,
                    "wall_s": result.wall_s,
                    "order": index,
                }
            )
        raw_hits = 0
        for conv_id, question in questions:
            profile = next(c.profile for c in self.conversations if c.id == conv_id)
            ranked = await self.ranked_provenance(
                self.config.bank_id(profile), question.question, by_unit_document
            )
            raw_hits += is_hit(ranked, evidence_of(conv_id, question), self.options.k)
        return {
            "policies": rows,
            "raw_hit_at_k": raw_hits / len(questions) if questions else 0.0,
            "questions": len(questions),
            "answer_questions": len(answerable),
            "cycles": self.cycles,
            "units_in": self.units_in,
            "units_selected": self.units_selected,
            "units_held": self.units_held(self.dreamer.cards),
            "outcomes": self.outcomes,
            "drafts_checked": self.drafts_checked,
            "drafts_differ": self.drafts_differ,
            "summarised": {**{name: self.summed.get(name, 0) for name in _SUMMED}, "rejected": self.rejected},
        }


# --- the command ---------------------------------------------------------------------------------
