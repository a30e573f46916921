"""The body of ``dreamer explain``: the decision trail of a unit, of a card, or of a text.

A unit: each decision a run made about it (promoted into which card, folded into which card by
which rule and with which scores, dropped as chatter and why, left out by the summariser), the
card it lives in now and what became of that card; or, with no decision recorded, whether it waits
after a profile's watermark (pending). A card: its ledger row, the units it was made of, the units
folded into it since, what it supersedes and what supersedes it. A text: the verdict the dedup would
give a card saying it now, against the ledger, and the trail of the card it matches.

Read only: the trail is what the runs recorded with their commits (:mod:`dreamer.state.decisions`).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TextIO

from dreamer.backends import MemoryBackend
from dreamer.commands.output import emit, iso
from dreamer.config import Config
from dreamer.embeddings import Embedder
from dreamer.errors import DreamerError, ExitCode, UsageError
from dreamer.jobs.open import missing_state, open_for
from dreamer.state import Decision, LedgerCard, StateStore
from dreamer.text import card_document_id, printable

if TYPE_CHECKING:
    from dreamer.rollup.dedup import UpstreamCandidate
    from dreamer.rollup.semantic import BatchVectors

#: Decisions that put a unit into a card of its own (the others fold it into one, or drop it).
_INTO_NEW = frozenset({"new", "conflict"})


async def explain_command(
    config: Config,
    *,
    unit_id: str | None = None,
    card_id: str | None = None,
    text: str | None = None,
    profile: str | None = None,
    as_json: bool = False,
    out: TextIO = sys.stdout,
) -> int:
    """Print the trail of one unit, card or text; exit 1 when there is nothing to explain."""
    if sum(x is not None for x in (unit_id, card_id, text)) != 1:
        raise UsageError("name one thing to explain: a UNIT_ID, --card DOC_ID or --text TEXT")
    async with open_for(
        config,
        backend=unit_id is not None or text is not None,
        state="present",
        reading=True,
        judging=text is not None,
    ) as opened:
        state = opened.ledger
        if state is None:
            doc: dict[str, Any] = {"found": False, "state_missing": missing_state(config)}
        elif card_id is not None:
            doc = card_trail(state, card_id)
        elif unit_id is not None:
            doc = await unit_trail(config, state, opened.backend, unit_id, profile)
        else:
            assert text is not None
            doc = await text_trail(config, state, opened.backend, text, profile, opened.embedder)
    emit(doc if as_json else render(doc), as_json, out)
    return ExitCode.OK if doc.get("found") else ExitCode.FAILED


# --- the trails, as data ----------------------------------------------------------------------


def decision_doc(d: Decision) -> dict[str, Any]:
    return {
        "run_id": d.run_id,
        "profile": d.profile,
        "unit_id": d.unit_id,
        "verdict": d.verdict,
        "reason": d.reason,
        "card": d.document_id,
        "matched": d.matched_id,
        "scores": dict(d.scores),
        "decided_at": iso(d.decided_at),
    }


def card_doc(state: StateStore, card: LedgerCard) -> dict[str, Any]:
    """A ledger card with what supersedes it."""
    return {
        "document_id": card.document_id,
        "text": card.text,
        "kind": card.kind,
        "profile": card.profile,
        "profiles": list(card.profiles),
        "upstream_bank": card.upstream_bank,
        "promoted_at": iso(card.promoted_at),
        "promoted_by_run": card.run_id,
        "last_seen_at": iso(card.last_seen_at),
        "reinforcements": card.reinforcements,
        "told": card.told.to_json() if card.told is not None else None,
        "units": len(card.source_ids),
        "supersedes": card.supersedes,
        "superseded_by": [c.document_id for c in state.superseding([card.document_id])],
    }


def card_trail(state: StateStore, document_id: str) -> dict[str, Any]:
    """A card: its row, the units it was made of, the units folded into it, its supersessions."""
    cards = state.cards([document_id])
    decisions = state.card_decisions(document_id)
    made_of = [decision_doc(d) for d in decisions if d.verdict in _INTO_NEW and d.document_id == document_id]
    folded = [decision_doc(d) for d in decisions if d.verdict == "duplicate"]
    return {
        "found": bool(cards or decisions),
        "kind": "card",
        "document_id": document_id,
        "card": card_doc(state, cards[0]) if cards else None,
        "made_of": made_of,
        "folded_in": folded,
        "recorded": bool(decisions),
    }


async def unit_trail(
    config: Config, state: StateStore, backend: MemoryBackend, unit_id: str, profile: str | None
) -> dict[str, Any]:
    """A unit: its decisions and the cards it lives in; with none, pending or unknown."""
    decisions = state.unit_decisions(unit_id)
    homes = [d.document_id for d in decisions if d.document_id is not None]
    # A card promoted before decisions were recorded still lists its units.
    older = [] if decisions else state.cards_citing(unit_id)
    cards = state.cards(homes) if homes else older
    doc: dict[str, Any] = {
        "found": bool(decisions or cards),
        "kind": "unit",
        "unit_id": unit_id,
        "decisions": [decision_doc(d) for d in decisions],
        "cards": [card_doc(state, c) for c in cards],
        "pending": None,
    }
    if not doc["found"]:
        doc["pending"] = await _pending(config, state, backend, unit_id, profile)
        doc["found"] = doc["pending"] is not None
        doc["searched"] = _profiles(config, profile)
    return doc


async def text_trail(
    config: Config,
    state: StateStore,
    backend: MemoryBackend,
    text: str,
    profile: str | None,
    embedder: Embedder | None = None,
) -> dict[str, Any]:
    """The dedup's verdict on a card saying ``text`` now, in ``profile``'s upstream bank, judged as
    a run judges it (with the embedder's cosine and nearest cards when one is configured; lexically,
    saying why, when it cannot be asked), and the trail of the card it matches."""
    from dreamer.rollup import dedup
    from dreamer.rollup.judging import judge_against_ledger, upstream_candidates

    name = _one_profile(config, profile)
    upstream_id = config.upstream_bank_id(name)
    candidates = await upstream_candidates(backend, upstream_id, text, config.rollup.semantic_top_k)
    card = dedup.CardText(card_document_id(name, text), text)
    vectors, judge = None, "lexical"
    if embedder is not None:
        vectors, judge = await _vectors(config, state, upstream_id, text, candidates, embedder)
    (verdict,) = judge_against_ledger(state, upstream_id, [card], [candidates], vectors, dry_run=True)
    matched = card_trail(state, verdict.matched_id) if verdict.matched_id else None
    return {
        "found": True,
        "kind": "text",
        "text": text,
        "profile": name,
        "upstream_bank": upstream_id,
        "verdict": str(verdict.kind),
        "reason": verdict.reason,
        "matched": verdict.matched_id,
        "scores": dict(verdict.scores),
        "judge": judge,
        "matched_card": matched,
    }


async def _vectors(
    config: Config,
    state: StateStore,
    upstream_id: str,
    text: str,
    candidates: Sequence[UpstreamCandidate],
    embedder: Embedder,
) -> tuple[BatchVectors | None, str]:
    """The batch's vectors as a run's judge makes them (nothing written), and how it judged; an
    embedder that cannot be asked leaves the verdict lexical, saying why (a one-shot command does
    not retry)."""
    import anyio

    from dreamer.rollup.semantic import SemanticJudge

    judge = SemanticJudge(
        embedder,
        reembed_batch=config.embeddings.reembed_batch,
        top_k=config.rollup.semantic_top_k,
        index_dir=config.vector_index_dir,
        build_index=False,  # a reading command searches the daemon's segments, builds none
    )
    try:
        vectors = await judge.prepare(
            state,
            upstream_id,
            [text],
            [c.text for c in candidates],
            embedder.embed,
            write=False,
            in_thread=anyio.to_thread.run_sync,
            candidate_ids=[c.card_id for c in candidates],
        )
    except (DreamerError, OSError, ValueError, ImportError) as exc:
        return None, f"lexical (the embedder {embedder.model_id} failed: {exc})"
    return vectors, f"lexical and the embedder {embedder.model_id}"


def _profiles(config: Config, profile: str | None) -> list[str]:
    if profile is not None:
        _one_profile(config, profile)
        return [profile]
    return sorted(config.profiles)


def _one_profile(config: Config, profile: str | None) -> str:
    if profile is not None:
        if profile not in config.profiles:
            known = ", ".join(sorted(config.profiles)) or "none"
            raise UsageError(f"--profile: unknown profile {profile!r} (known: {known})")
        return profile
    enabled = sorted(config.enabled_profiles())
    if len(enabled) == 1:
        return enabled[0]
    raise UsageError(
        f"--text needs --profile P: the profile whose upstream bank to judge against "
        f"(enabled: {', '.join(enabled) or 'none'})"
    )


async def _pending(
    config: Config, state: StateStore, backend: MemoryBackend, unit_id: str, profile: str | None
) -> dict[str, Any] | None:
    """Where the unit waits: the profile whose bank holds it after its watermark; None if none."""
    from dreamer.rollup.pipeline import Rollup

    rollup = Rollup(config, backend, state)
    for name in _profiles(config, profile):
        if any(u.id == unit_id for u in await rollup.backlog(name)):
            return {"profile": name, "bank": config.profile_bank_id(name)}
    return None


# --- the trails, as text ------------------------------------------------------------------------


def render(doc: dict[str, Any]) -> str:
    """The trail for a person to read."""
    if doc.get("state_missing"):
        return str(doc["state_missing"])
    kind = doc.get("kind")
    if kind == "card":
        return _render_card(doc)
    if kind == "unit":
        return _render_unit(doc)
    return _render_text(doc)


def _line(text: str) -> str:
    return printable(text, keep_newlines=False)


def _scores(scores: dict[str, float]) -> str:
    return ", ".join(f"{k} {v:.2f}" for k, v in sorted(scores.items()))


def _render_decision(d: dict[str, Any]) -> list[str]:
    when = f"run {d['run_id']} ({d['profile']}, {d['decided_at']})"
    verdict = d["verdict"]
    if verdict in _INTO_NEW:
        head = f"{when}: promoted into card {d['card']}" + (
            f" (a conflict: it supersedes {d['matched']})" if verdict == "conflict" else ""
        )
    elif verdict == "duplicate":
        head = f"{when}: merged into card {d['card']} (a duplicate of it)"
    elif verdict == "chatter":
        head = f"{when}: dropped as chatter"
    else:
        head = f"{when}: left out: no card cited it"
    lines = [head, f"    rule: {_line(d['reason'])}"]
    if d["scores"]:
        lines.append(f"    scores: {_scores(d['scores'])}")
    return lines


def _render_card_row(card: dict[str, Any]) -> list[str]:
    lines = [
        f"card {card['document_id']} in {card['upstream_bank']} ({card['kind']}, from {card['profile']})",
        f"    {_line(card['text'])}",
        f"    promoted {card['promoted_at']} by run {card['promoted_by_run']}; {card['units']} unit(s); "
        f"reinforced {card['reinforcements']} time(s), last seen {card['last_seen_at']}",
    ]
    if card["told"]:
        lines.append(f"    {card['told']['text']}")
    if card["supersedes"]:
        lines.append(f"    supersedes {card['supersedes']}")
    for newer in card["superseded_by"]:
        lines.append(f"    superseded by {newer}")
    return lines


def _render_unit(doc: dict[str, Any]) -> str:
    lines = [f"unit {_line(doc['unit_id'])}"]
    for d in doc["decisions"]:
        lines += ["  " + x for x in _render_decision(d)]
    if not doc["decisions"] and doc["cards"]:
        lines.append("  in these cards (promoted before decisions were recorded):")
    for card in doc["cards"]:
        lines += ["  " + x for x in _render_card_row(card)]
    if doc["pending"] is not None:
        p = doc["pending"]
        lines.append(
            f"  pending: after the watermark of profile {p['profile']} ({p['bank']}); the next run reads it"
        )
    elif not doc["found"]:
        lines.append(
            f"  not found: no run recorded a decision about it and no profile bank holds it after its "
            f"watermark (searched: {', '.join(doc['searched']) or 'no profile'})"
        )
    return "\n".join(lines)


def _render_card(doc: dict[str, Any]) -> str:
    lines: list[str] = []
    if doc["card"] is not None:
        lines += _render_card_row(doc["card"])
    else:
        lines.append(f"card {doc['document_id']}: not in the ledger")
    sections: Sequence[tuple[str, list[dict[str, Any]]]] = (
        ("made of", doc["made_of"]),
        ("merged into it since", doc["folded_in"]),
    )
    for title, decisions in sections:
        if decisions:
            lines.append(f"  {title}:")
            for d in decisions:
                lines.append(
                    f"    unit {d['unit_id']}: run {d['run_id']} ({d['profile']}, {d['decided_at']})"
                )
                lines.append(
                    f"        rule: {_line(d['reason'])}"
                    + (f"; {_scores(d['scores'])}" if d["scores"] else "")
                )
    if doc["card"] is not None and not doc["recorded"]:
        lines.append("  (no decisions recorded: promoted before this Dreamer kept them)")
    return "\n".join(lines)


def _render_text(doc: dict[str, Any]) -> str:
    lines = [
        f"a card saying this, from {doc['profile']}, would be {doc['verdict']} "
        f"against {doc['upstream_bank']}",
        f"    rule: {_line(doc['reason'])}",
    ]
    if doc["scores"]:
        lines.append(f"    scores: {_scores(doc['scores'])}")
    lines.append(f"    judged by: {doc['judge']}")
    if doc["matched_card"] is not None:
        lines.append("")
        lines.append(_render_card(doc["matched_card"]))
    return "\n".join(lines)
