"""Polishing a peer card: one reflect that rewrites its entries (merge overlaps, shorten, no new facts).

Optional (``peer_card.polish``) and only worth asking a backend whose reflect uses an LLM. The
question lists the card's entries as built (:func:`polish_query`) and asks for
``{"entries": [{"text": ..., "mark": ...}]}`` (:func:`polish_schema`). The reflect runs under the
accelerator-slot lock with the roll-up's retry rules (:func:`reflect_polish`): the slot is held only
around the call and released during backoff sleeps. Each answer's LLM tokens are counted in a
:class:`PolishTokens`, whether or not the answer is usable.

The answer is untrusted. :func:`parse_polish` accepts it only whole: a structured answer whose
``entries`` is a non-empty list of objects, each with a string ``text`` that has words, is not
content-free ("I don't have information ...") and shares a content word with the card (an entry
about nothing on the card is a new fact), and a ``mark`` from the allowed set (or ``NONE``). Any
defect rejects the whole answer (:class:`PolishRejected`): dropping one bad entry could drop a fact.
Neutralising, clipping and the entry and character bounds are not done here but by the card
builder, on the same code path as the card as built (:func:`dreamer.peercard.build.polished_peer_card`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import structlog
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from dreamer.backends.base import Budget, MemoryBackend, ReflectResult
from dreamer.backends.reflect_schema import reflect_response_schema
from dreamer.errors import DreamerError
from dreamer.llm.usage import TokenCounter
from dreamer.retry import RetryPolicy, backoff_logger, call_holding_slot
from dreamer.rollup.cards import is_content_free
from dreamer.slot import SlotLock
from dreamer.text import content_tokens, normalize_text

__all__ = [
    "NO_MARK",
    "PolishRejected",
    "PolishTokens",
    "PolishedEntry",
    "parse_polish",
    "polish_query",
    "polish_schema",
    "reflect_polish",
]

log = structlog.get_logger("dreamer.peercard")

#: The mark of an entry that is none of the classified kinds.
NO_MARK = "NONE"
#: How much of an offending value a rejection reason quotes (it is untrusted text).
_QUOTE_CHARS = 40


class PolishRejected(DreamerError):
    """The polish answer cannot be used; the message says why. The card as built stands."""


@dataclass(frozen=True, slots=True)
class PolishedEntry:
    """One entry of an accepted polish answer: its text and its mark (None: unmarked)."""

    text: str
    mark: str | None


@dataclass(slots=True)
class PolishTokens(TokenCounter):
    """The LLM tokens of the polish reflects of one refresh, counted as the roll-up counts its own
    (:meth:`dreamer.rollup.report.RollupReport.count_tokens`): a call whose usage the server did not
    report is estimated and counted in ``calls_estimated``; a reflect without an LLM (no usage)
    counts nothing."""

    def counts(self, prefix: str = "polish_") -> dict[str, int]:
        """The counts under their run-record names, ``polish_llm_*``."""
        return TokenCounter.counts(self, prefix)

    def add_to(self, counts: dict[str, int]) -> None:
        """Add the polish tokens to a run's ``counts``: into its ``llm_*`` totals (which the status,
        the metrics and the daily token budget read), and apart as ``polish_llm_*``. Nothing when no
        polish reflect was counted."""
        if not self.calls:
            return
        for key, value in self.counts().items():
            total = key.removeprefix("polish_")
            counts[total] = counts.get(total, 0) + value
            counts[key] = counts.get(key, 0) + value


class PolishEntryAnswer(BaseModel):
    """One entry of the structured polish answer, as the reflect gives it."""

    model_config = ConfigDict(strict=True, extra="ignore", frozen=True)

    text: str = Field(description="One fact of the card, rewritten short, without its mark.")
    mark: str = Field(json_schema_extra={"default": NO_MARK})


class PolishAnswer(BaseModel):
    """The structured polish answer: the rewritten entries."""

    model_config = ConfigDict(strict=True, extra="ignore", frozen=True)

    entries: list[PolishEntryAnswer]


def polish_schema(marks: Sequence[str]) -> dict[str, Any]:
    """The response schema: a list of entries, each a text and one of ``marks`` or ``NONE``.

    The marks differ per card, so their ``enum`` is added to the model's schema here; the answer's
    marks are then checked by :func:`parse_polish`, case-insensitively.
    """
    schema = reflect_response_schema(PolishAnswer)
    schema["properties"]["entries"]["items"]["properties"]["mark"]["enum"] = [*marks, NO_MARK]
    return schema


def polish_query(
    entries: Sequence[str], marks: Sequence[str], *, max_entries: int, max_entry_chars: int, budget_chars: int
) -> str:
    """The one reflect question of a polish: rewrite exactly these entries, adding nothing."""
    named = ", ".join(marks[:-1]) + f" or {marks[-1]}" if len(marks) > 1 else "".join(marks)
    lines = [
        f"Rewrite the peer card entries listed below into at most {max_entries} entries.",
        "Use only the facts these entries state: merge entries that overlap, shorten the wording, "
        "keep every number, date, version, name and negation exactly, and add no new fact.",
        f"Each entry is one line of at most {max_entry_chars} characters; all entries together "
        f"stay under {budget_chars} characters.",
        f"Give each entry a mark: {named} when it states one, else {NO_MARK}; "
        "do not repeat the mark in the text.",
        "Peer card entries:",
    ]
    lines.extend(f"- {' '.join(entry.split())}" for entry in entries)
    return "\n".join(lines)


def parse_polish(
    result: ReflectResult, marks: Sequence[str], card_entries: Sequence[str]
) -> list[PolishedEntry]:
    """The entries of a polish answer, or :class:`PolishRejected` saying what is wrong with it."""
    structured = result.structured
    if not isinstance(structured, Mapping):
        if result.structured_error:
            raise PolishRejected(f"no structured answer: {_quote(result.structured_error)}")
        if is_content_free(result.text):
            raise PolishRejected("the answer is empty or content-free")
        raise PolishRejected("no structured answer")
    try:
        answer = PolishAnswer.model_validate(dict(structured))
    except ValidationError as exc:
        raise PolishRejected(_schema_defect(exc)) from None
    if not answer.entries:
        raise PolishRejected("the answer holds no entries")
    allowed = {mark.upper(): mark for mark in marks}
    known_words = {word for entry in card_entries for word in content_tokens(entry)}
    parsed: list[PolishedEntry] = []
    for number, entry in enumerate(answer.entries, start=1):
        text, mark = entry.text, entry.mark
        label = mark.strip().upper()
        if label not in allowed and label not in (NO_MARK, ""):
            raise PolishRejected(f"entry {number} has an unknown mark {_quote(mark)}")
        if not normalize_text(text) or is_content_free(text):
            raise PolishRejected(f"entry {number} is empty or content-free")
        if not known_words.intersection(content_tokens(text)):
            raise PolishRejected(f"entry {number} shares no word with the card: {_quote(text)}")
        parsed.append(PolishedEntry(text, allowed.get(label)))
    return parsed


def _schema_defect(exc: ValidationError) -> str:
    """What the first validation error says about the answer, in the words of a rejection."""
    loc = exc.errors(include_url=False, include_input=False)[0]["loc"]
    if len(loc) >= 2 and isinstance(loc[1], int):
        number = loc[1] + 1
        field = loc[2] if len(loc) > 2 else None
        if field in ("text", "mark"):
            return f"entry {number} has no {field}"
        return f"entry {number} is not an object"
    return "the answer has no list of entries"


def _quote(value: str) -> str:
    flat = " ".join(value.split())
    return repr(flat if len(flat) <= _QUOTE_CHARS else flat[:_QUOTE_CHARS] + "…")


async def reflect_polish(
    backend: MemoryBackend,
    bank_id: str,
    entries: Sequence[str],
    marks: Sequence[str],
    *,
    max_entries: int,
    max_entry_chars: int,
    budget_chars: int,
    budget: Budget,
    tags: Sequence[str],
    policy: RetryPolicy,
    slot: SlotLock,
    tokens: PolishTokens | None = None,
) -> list[PolishedEntry]:
    """Ask ``bank_id`` one polish reflect (under ``slot``, with retries) and parse the answer.

    The answer's token usage is counted in ``tokens`` before it is parsed, so an unusable answer's
    tokens count too. Raises what the call raises (:class:`~dreamer.errors.SlotBusyError`,
    :class:`~dreamer.retry.RetriesExhausted`, :class:`~dreamer.errors.BackendError`) and
    :class:`PolishRejected` for an unusable answer.
    """
    query = polish_query(
        entries, marks, max_entries=max_entries, max_entry_chars=max_entry_chars, budget_chars=budget_chars
    )
    result = await call_holding_slot(
        "reflect",
        lambda: backend.reflect(
            bank_id,
            query,
            budget=budget,
            response_schema=polish_schema(marks),
            tags=tags,
            tags_match="any_strict",
        ),
        policy,
        slot,
        on_retry=backoff_logger("reflect", log),
    )
    if tokens is not None:
        tokens.count(result.usage)
    return parse_polish(result, marks, entries)
