"""The labelled answers of the read side, and how several banks' hits become one answer.

A recall across banks is one :class:`RecallAnswer`: hits merged by :func:`merge_recalls`, each
labelled with the aliases of the banks that hold it, plus the banks that could not answer
(:class:`MissingBank`, with a short reason from :func:`failure_reason`). Reflect gives one
:class:`LabelledReflection` per bank; retain a :class:`RetainAnswer`. Every answer renders as the
plain text an agent reads (``[code,ops] text``) and as JSON. A hit a newer card superseded carries
:class:`Successor` (set by :func:`dreamer.readside.current.mark_superseded`) and renders with its mark.

Pure: plain values in, values out, no backend calls. When hits fold and why:
``docs/design/readside.md``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from dreamer.backends.base import BasedOn, RecallItem
from dreamer.cardtags import RELATED_TO, ROLLUP_TAG, SUPERSEDES
from dreamer.errors import BackendError, PermanentBackendError, ProtocolError, TransientBackendError
from dreamer.state.records import Told
from dreamer.text import normalize_text, printable
from dreamer.threats import flagged, mark_lines, prompt_threats, withheld

__all__ = [
    "LabelledRecall",
    "LabelledReflection",
    "MissingBank",
    "RecallAnswer",
    "ReflectAnswer",
    "RetainAnswer",
    "Successor",
    "failure_reason",
    "first_config_fault",
    "is_config_fault",
    "merge_recalls",
]


def _one_line(text: str) -> str:
    """One terminal-safe line: whitespace runs (newlines too) become one space, and characters a
    terminal would act on are shown escaped, so a memory's text cannot forge a line or a label."""
    return printable(" ".join(text.split()))


@dataclass(frozen=True, slots=True)
class MissingBank:
    """A bank that did not answer: ``reason`` is short (``timeout``, ``HTTP 503``), ``detail`` full."""

    alias: str
    bank_id: str
    reason: str
    detail: str = ""
    #: The server refused the credentials (401/403): a setting to fix, not a server to wait for.
    config_fault: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "alias": self.alias,
            "bank_id": self.bank_id,
            "reason": self.reason,
            "detail": self.detail,
            "config_fault": self.config_fault,
        }


def first_config_fault(missing: Sequence[MissingBank]) -> MissingBank | None:
    """The first bank that failed for a setting to fix (a refused key), None when none did."""
    return next((m for m in missing if m.config_fault), None)


def is_config_fault(exc: BaseException) -> bool:
    """Whether a bank's failure is the server refusing the credentials (HTTP 401/403)."""
    return isinstance(exc, PermanentBackendError) and exc.status in (401, 403)


def _render_missing(missing: Sequence[MissingBank]) -> str:
    return "(missing: " + "; ".join(f"{m.alias} — {m.reason}" for m in missing) + ")"


#: How much of a successor's text a superseded hit's line shows.
SUCCESSOR_CHARS = 200


@dataclass(frozen=True, slots=True)
class Successor:
    """The card that superseded a hit (a ``recency_wins`` conflict): its document id and, when known,
    its text."""

    document_id: str
    text: str | None = None

    def render(self) -> str:
        if not self.text:
            return f"card {_one_line(self.document_id)}"
        text = " ".join(self.text.split())
        clipped = text if len(text) <= SUCCESSOR_CHARS else text[: SUCCESSOR_CHARS - 1].rstrip() + "…"
        return _one_line(clipped)

    def to_json(self) -> dict[str, Any]:
        return {"document_id": self.document_id, "text": self.text}


@dataclass(frozen=True, slots=True)
class LabelledRecall:
    """A recall hit, possibly folded from several banks; ``labels`` are their aliases, in read order.

    ``document_ids`` are every member's document ids; ``supersedes`` the cards a member says it
    supersedes (roll-up cards only); ``superseded_by`` the newer card that replaced this one.
    """

    labels: tuple[str, ...]
    id: str
    bank_id: str
    text: str
    score: float
    fact_type: str
    document_id: str | None = None
    ids: tuple[str, ...] = ()
    bank_ids: tuple[str, ...] = ()
    mentioned_at: datetime | None = None
    document_ids: tuple[str, ...] = ()
    supersedes: tuple[str, ...] = ()
    superseded_by: Successor | None = None
    #: Stored cards a member names as related (a later instance of the same event, a near card
    #: that could not hold its words): roll-up cards only, from their ``related_to`` metadata.
    related: tuple[str, ...] = ()
    #: How often the roll-up found this card's fact, from the local ledger (None: once, or unknown).
    told: Told | None = None

    def render(self, *, withhold: bool = False) -> str:
        """``[code,ops] The text on one line``; a superseded hit says so before its text and names
        what replaced it: ``[global] (superseded) Old text — superseded by: New text``.

        A hit that reads like an instruction to the agent (:func:`dreamer.threats.prompt_threats`)
        is marked ``(flagged: …)`` before its text, or with ``withhold`` shown as a placeholder
        naming the patterns instead of its text."""
        labels = f"[{','.join(self.labels)}]"
        body = _one_line(self.text)
        if self.told is not None:
            body = f"{body} ({self.told.render()})"
        if self.related:
            body = f"{body} (related: {', '.join(_one_line(r) for r in self.related)})"
        if self.superseded_by is not None:
            body = f"(superseded) {body} — superseded by: {self.superseded_by.render()}"
        threats = self.threats
        if threats and withhold:
            return f"{labels} {withheld(threats)}"
        return f"{labels} {flagged(threats)} {body}" if threats else f"{labels} {body}"

    @property
    def threats(self) -> tuple[str, ...]:
        """The threat patterns the hit's text (and its successor's) matches; empty for most."""
        successor = self.superseded_by.text if self.superseded_by is not None else None
        return prompt_threats(self.text if not successor else f"{self.text}\n{successor}")

    def to_json(self) -> dict[str, Any]:
        return {
            "labels": list(self.labels),
            "id": self.id,
            "bank_id": self.bank_id,
            "text": self.text,
            "score": self.score,
            "fact_type": self.fact_type,
            "document_id": self.document_id,
            "ids": list(self.ids),
            "bank_ids": list(self.bank_ids),
            "mentioned_at": self.mentioned_at.isoformat() if self.mentioned_at else None,
            "document_ids": list(self.document_ids),
            "supersedes": list(self.supersedes),
            "superseded": self.superseded_by is not None,
            "superseded_by": self.superseded_by.to_json() if self.superseded_by else None,
            "related": list(self.related),
            "told": self.told.to_json() if self.told is not None else None,
            "flagged": list(self.threats),
        }


@dataclass(frozen=True, slots=True)
class RecallAnswer:
    """The merged answer of a read across banks, and the banks that could not answer."""

    query: str
    banks: tuple[str, ...]
    items: tuple[LabelledRecall, ...]
    missing: tuple[MissingBank, ...] = ()

    @property
    def complete(self) -> bool:
        """True when every bank answered."""
        return not self.missing

    def render(self, *, withhold: bool = False) -> str:
        """One ``[label] text`` line per hit, then ``(missing: bank — reason)`` when a bank failed;
        a flagged hit is marked, or with ``withhold`` replaced by a placeholder."""
        lines = [item.render(withhold=withhold) for item in self.items]
        if not self.items:
            answered = [b for b in self.banks if b not in {m.alias for m in self.missing}]
            if answered:
                lines.append(f"(nothing found in {', '.join(answered)})")
        if self.missing:
            lines.append(_render_missing(self.missing))
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        return {
            "query": self.query,
            "banks": list(self.banks),
            "items": [item.to_json() for item in self.items],
            "missing": [m.to_json() for m in self.missing],
        }


@dataclass(frozen=True, slots=True)
class LabelledReflection:
    """One bank's reflect answer."""

    label: str
    bank_id: str
    text: str
    based_on: tuple[BasedOn, ...] = ()
    used_llm: bool = True

    def render(self) -> str:
        """``[label] answer``; further lines of the answer are indented under it, and a line that
        reads like an instruction to the agent is marked ``(flagged: …)``."""
        lines = mark_lines(self.text.strip()).splitlines() or [""]
        indent = " " * (len(self.label) + 3)
        rest = [indent + line if line else "" for line in lines[1:]]
        return "\n".join([f"[{self.label}] {lines[0]}", *rest])

    def to_json(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "bank_id": self.bank_id,
            "text": self.text,
            "used_llm": self.used_llm,
            "based_on": [
                {"id": b.id, "text": b.text, "document_id": b.document_id, "fact_type": b.fact_type}
                for b in self.based_on
            ],
        }


@dataclass(frozen=True, slots=True)
class ReflectAnswer:
    """One reflect per bank, labelled, in the order asked, and the banks that could not answer."""

    query: str
    banks: tuple[str, ...]
    answers: tuple[LabelledReflection, ...]
    missing: tuple[MissingBank, ...] = ()

    @property
    def complete(self) -> bool:
        return not self.missing

    def render(self) -> str:
        parts = [answer.render() for answer in self.answers]
        if self.missing:
            parts.append(_render_missing(self.missing))
        return "\n".join(parts)

    def to_json(self) -> dict[str, Any]:
        return {
            "query": self.query,
            "banks": list(self.banks),
            "answers": [a.to_json() for a in self.answers],
            "missing": [m.to_json() for m in self.missing],
        }


@dataclass(frozen=True, slots=True)
class RetainAnswer:
    """Where a retain went and how many items the backend stored."""

    alias: str
    bank_id: str
    items_count: int

    def render(self) -> str:
        return f"retained {self.items_count} item(s) into [{self.alias}] ({self.bank_id})"

    def to_json(self) -> dict[str, Any]:
        return {"alias": self.alias, "bank_id": self.bank_id, "items_count": self.items_count}


# --- merging ------------------------------------------------------------------------------------


def merge_recalls(
    per_bank: Sequence[tuple[str, Sequence[RecallItem]]], *, limit: int | None = None
) -> tuple[LabelledRecall, ...]:
    """Merge the hits of several banks (given in read order, as ``(label, hits)``) into one ranking.

    Hits fold only when their normalised texts are equal: a document id is a caller's name inside
    one bank and says nothing about sameness across banks, so different texts under one id stay
    apart (folding them would hide a fact). A folded hit keeps every label, shows its best-scoring
    member and keeps a document id of its members. Ranked by score, then read order of the first
    label, then id; ``limit`` applies after folding. Why: ``docs/design/readside.md``.
    """
    entries: list[tuple[int, str, RecallItem]] = [
        (order, label, item) for order, (label, items) in enumerate(per_bank) for item in items
    ]
    parent = list(range(len(entries)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    def union(i: int, j: int) -> None:
        ri, rj = find(i), find(j)
        if ri != rj:
            parent[max(ri, rj)] = min(ri, rj)

    by_text: dict[str, int] = {}
    for index, (_, _, item) in enumerate(entries):
        key = normalize_text(item.text)
        if key:
            union(by_text.setdefault(key, index), index)

    groups: dict[int, list[int]] = {}
    for index in range(len(entries)):
        groups.setdefault(find(index), []).append(index)

    merged: list[tuple[tuple[float, int, str], LabelledRecall]] = []
    for members in groups.values():
        by_rank = sorted(members, key=lambda i: (-entries[i][2].score, entries[i][0], entries[i][2].id))
        _, _, item = entries[by_rank[0]]
        ordered = sorted(members, key=lambda i: (entries[i][0], i))
        labels = tuple(dict.fromkeys(entries[i][1] for i in ordered))
        first_order = entries[ordered[0]][0]
        document_id = next((entries[i][2].document_id for i in by_rank if entries[i][2].document_id), None)
        labelled = LabelledRecall(
            labels=labels,
            id=item.id,
            bank_id=item.bank_id,
            text=item.text,
            score=item.score,
            fact_type=item.fact_type,
            document_id=document_id,
            ids=tuple(dict.fromkeys(entries[i][2].id for i in ordered)),
            bank_ids=tuple(dict.fromkeys(entries[i][2].bank_id for i in ordered)),
            mentioned_at=item.mentioned_at,
            document_ids=tuple(dict.fromkeys(d for i in ordered if (d := entries[i][2].document_id))),
            supersedes=tuple(dict.fromkeys(s for i in ordered if (s := _supersedes(entries[i][2])))),
            related=tuple(dict.fromkeys(r for i in ordered if (r := _related(entries[i][2])))),
        )
        merged.append(((-item.score, first_order, item.id), labelled))
    merged.sort(key=lambda pair: pair[0])
    ranked = tuple(labelled for _, labelled in merged)
    return ranked if limit is None else ranked[: max(limit, 0)]


def _supersedes(item: RecallItem) -> str | None:
    """The card a roll-up card says it supersedes; only a card tagged as the roll-up tags one counts,
    so a memory someone retained with such metadata cannot retire a card."""
    if ROLLUP_TAG not in item.tags or SUPERSEDES not in item.tags:
        return None
    older = item.metadata.get(SUPERSEDES)
    return older if isinstance(older, str) and older and older != item.document_id else None


def _related(item: RecallItem) -> str | None:
    """The stored card a roll-up card names as related (its ``related_to`` metadata)."""
    if ROLLUP_TAG not in item.tags:
        return None
    related = item.metadata.get(RELATED_TO)
    return related if isinstance(related, str) and related and related != item.document_id else None


# --- why a bank is missing ----------------------------------------------------------------------


def failure_reason(exc: BaseException) -> str:
    """A short reason for a failed bank: ``timeout``, ``HTTP 503``, ``unavailable``, ``bad answer``."""
    if isinstance(exc, TimeoutError):
        return "timeout"
    if isinstance(exc, BackendError) and exc.status is not None:
        return f"HTTP {exc.status}"
    if "timed out" in str(exc).lower():
        return "timeout"
    if isinstance(exc, TransientBackendError):
        return "unavailable"
    if isinstance(exc, PermanentBackendError):
        return "refused"
    if isinstance(exc, ProtocolError):
        return "bad answer"
    return "failed"
