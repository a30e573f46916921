"""What becomes of a judged batch: each card's plan (promote or reinforce), the fate of each unit,
and the outcome and reason a batch's commit records.

Pure apart from the verdict log lines: the pipeline (`dreamer.rollup.pipeline`) calls these
between its I/O steps, so the decisions they make can be read without the calls around them.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

import structlog

from dreamer.cardtags import scope_tags
from dreamer.outcomes import Outcome
from dreamer.rollup.context import RunContext
from dreamer.rollup.promote import retain_item
from dreamer.rollup.report import LEFT_OUT, CardPlan, RollupReport
from dreamer.state import Decision, Reinforcement
from dreamer.text import card_document_id

__all__ = ["account", "batch_decisions", "plan_cards", "settle_outcome"]

log = structlog.get_logger("dreamer.rollup")


def plan_cards(ctx: RunContext) -> None:
    """Each card's plan: promote (new, conflict, or our own uncommitted card) or reinforce."""
    report = ctx.report
    newest = max(u.created_at for u in ctx.selected)
    facts = ctx.facts()
    tags_of = {u.id: u.tags for u in ctx.selected}
    for draft, verdict in zip(ctx.drafts, ctx.verdicts, strict=True):
        doc_id = card_document_id(ctx.profile, draft.text)
        plan = CardPlan(
            text=draft.text,
            kind=draft.kind,
            source_ids=draft.source_ids,
            document_id=doc_id,
            verdict=verdict.kind,
            reason=verdict.reason,
            matched_id=verdict.matched_id,
            scores=dict(verdict.scores),
            changed=tuple(verdict.changed),
        )
        log.info(
            "verdict",
            verdict=verdict.kind,
            reason=verdict.reason,
            scores=dict(verdict.scores),
            matched_id=verdict.matched_id,
            card=draft.text[:120],
        )
        if verdict.kind == "duplicate" and verdict.matched_id == doc_id and doc_id not in ctx.ledger_ids:
            # Our own card from a run that crashed after promoting and before committing:
            # promote it again (a no-op upstream, same document id) so the ledger records it.
            plan = replace(plan, verdict="new", reason="re-promoting an uncommitted card of an earlier run")
        elif verdict.kind == "duplicate":
            report.plan.append(plan)
            ctx.plans.append(plan)
            if verdict.matched_id is not None:
                ctx.reinforced.append(Reinforcement(verdict.matched_id, draft.source_ids, ctx.profile))
            report.reinforced += 1
            continue
        report.plan.append(plan)
        ctx.plans.append(plan)
        if verdict.kind == "conflict":
            report.conflicts += 1
        scopes = scope_tags([t for i in draft.source_ids for t in tags_of.get(i, ())])
        ctx.to_promote.append((plan, retain_item(plan, verdict, facts, newest, scopes=scopes)))


def account(ctx: RunContext) -> None:
    """What became of each unit the batch summarised (counted, never silent)."""
    ctx.report.count_fates(
        {u.id for u in ctx.selected},
        promoted={i for plan, _ in ctx.to_promote for i in plan.source_ids},
        merged={i for r in ctx.reinforced for i in r.source_ids},
    )


def batch_decisions(ctx: RunContext, decided_at: datetime) -> list[Decision]:
    """What the batch decided about each of its units, for the trail ``dreamer explain`` reads:
    the card each went into (a duplicate's: the stored card it was folded into) with the rule and
    scores that decided, the chatter with why it was dropped, and the units no card cited."""
    run_id, profile = ctx.report.run_id, ctx.profile
    out: list[Decision] = []
    cited: set[str] = set()
    for plan in ctx.plans:
        lives_in = plan.matched_id if plan.verdict == "duplicate" else plan.document_id
        for unit_id in plan.source_ids:
            cited.add(unit_id)
            out.append(
                Decision(
                    run_id,
                    profile,
                    unit_id,
                    plan.verdict,
                    plan.reason,
                    document_id=lives_in,
                    matched_id=plan.matched_id,
                    scores=dict(plan.scores),
                    decided_at=decided_at,
                )
            )
    for unit_id, reason in ctx.batch.chatter.items():
        out.append(Decision(run_id, profile, unit_id, "chatter", reason, decided_at=decided_at))
    for unit in ctx.selected:
        if unit.id not in cited:
            out.append(Decision(run_id, profile, unit.id, "left_out", LEFT_OUT, decided_at=decided_at))
    return out


def settle_outcome(report: RollupReport) -> None:
    """The outcome and reason a batch's commit records: promoted, else reinforced, else nothing
    new, with the run's counts so far."""
    if report.promoted:
        report.outcome = Outcome.PROMOTED
    elif report.reinforced:
        report.outcome = Outcome.REINFORCED
    else:
        report.outcome = Outcome.NOTHING_NEW
    report.reason = (
        f"{report.promoted} promoted, {report.reinforced} reinforced, {report.conflicts} conflicts; "
        f"units: {report.units_promoted} promoted, {report.units_merged} merged, "
        f"{report.units_chatter} chatter, {report.units_left_out} left out, "
        f"{report.units_pending} pending"
    )
