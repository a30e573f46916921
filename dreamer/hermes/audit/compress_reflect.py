"""Compressing memory entries with one LLM reflect, under the accelerator-slot lock.

The question lists the long entries, numbered, and asks for ``{"entries": [{"number": n, "text":
...}]}``. The reflect runs under the slot lock with the roll-up's retry rules (as the peer card's
polish does: the slot is held only around the call). The answer is untrusted: each rewrite passes
`rewrite_refusal` on its own, so one that loses a number, name, path or URL is rejected and that
entry kept, while the others are used; entries the answer does not address get the rules. When the
call fails (slot busy, server down, no structured answer) the rules reword all of them.
Every answer's LLM tokens are counted (`CompressionTokens`), usable or not, as the roll-up counts
its own; the audit's report carries them under the run-record names ``llm_*``.
Why: docs/design/hermes-audit.md.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import structlog
from pydantic import BaseModel, ConfigDict, ValidationError

from dreamer.backends.base import Budget, MemoryBackend
from dreamer.backends.reflect_schema import reflect_response_schema
from dreamer.errors import AuditError, DreamerError
from dreamer.hermes.audit.compress import Rewrite, RuleCompressor, rewrite_refusal
from dreamer.hermes.audit.ledger import one_line
from dreamer.llm.usage import TokenCounter, TokenUsage
from dreamer.retry import RetryPolicy, backoff_logger, call_holding_slot
from dreamer.slot import SlotLock

__all__ = [
    "CompressionAnswer",
    "CompressionTokens",
    "CompressionUnusable",
    "Compressions",
    "ReflectCompressor",
    "compress_query",
    "parse_compression",
    "reflect_compress",
]

log = structlog.get_logger("dreamer.hermes.audit")

#: Tags no memory carries, so the reflect answers from the question alone, not from the bank.
_NO_MEMORIES = ("dreamer:audit-compress",)


class _CompressedEntry(BaseModel):
    model_config = ConfigDict(strict=True, extra="ignore", frozen=True)

    number: int
    text: str


class CompressionAnswer(BaseModel):
    """The structured answer: one shorter text per numbered entry."""

    model_config = ConfigDict(strict=True, extra="ignore", frozen=True)

    entries: list[_CompressedEntry]


def compress_query(entries: Sequence[str]) -> str:
    """The one reflect question: rewrite each numbered entry shorter, keeping every detail."""
    lines = [
        "Rewrite each numbered memory entry below to be shorter, one rewrite per entry.",
        "Keep every number, date, version, name, file path, host and URL exactly as written, and keep "
        "every negation; do not merge entries, add facts or explain. Answer with the entry's number "
        "and its shorter text.",
        "Entries:",
    ]
    lines.extend(f"{number}. {' '.join(entry.split())}" for number, entry in enumerate(entries, start=1))
    return "\n".join(lines)


@dataclass(frozen=True)
class Compressions:
    """Accepted rewrites by original entry, a note for each rejected one, and the LLM tokens the
    answer used (None: the reflect used no LLM)."""

    rewrites: dict[str, Rewrite] = field(default_factory=dict)
    rejected: tuple[str, ...] = ()
    rejected_entries: frozenset[str] = frozenset()
    usage: TokenUsage | None = None


class CompressionUnusable(AuditError):
    """The compression reflect answered, but not in a usable shape; ``usage`` is what the answer
    cost in LLM tokens (None: no LLM). Caught by `ReflectCompressor`, which counts the tokens and
    falls back to the rules."""

    def __init__(self, message: str, usage: TokenUsage | None) -> None:
        super().__init__(message)
        self.usage = usage


#: The LLM tokens of an audit's compression reflects, counted as the roll-up counts its own.
CompressionTokens = TokenCounter


def parse_compression(structured: Mapping[str, Any] | None, entries: Sequence[str]) -> Compressions:
    """The gated rewrites of a reflect answer; raises `DreamerError` when it has no usable shape."""
    if not isinstance(structured, Mapping):
        raise DreamerError("the reflect gave no structured answer")
    try:
        answer = CompressionAnswer.model_validate(dict(structured))
    except ValidationError:
        raise DreamerError("the reflect's answer is not a list of numbered entries") from None
    rewrites: dict[str, Rewrite] = {}
    rejected: list[str] = []
    rejected_entries: set[str] = set()
    for item in answer.entries:
        if not 1 <= item.number <= len(entries):
            continue
        original = entries[item.number - 1]
        text = item.text.strip()
        refusal = rewrite_refusal(original, text)
        if refusal:
            rejected.append(f"compression of {one_line(original, 60)!r} rejected: {refusal}; entry kept")
            rejected_entries.add(original)
        elif original not in rewrites:
            rewrites[original] = Rewrite(text, "reflect")
    return Compressions(rewrites, tuple(rejected), frozenset(rejected_entries))


async def reflect_compress(
    backend: MemoryBackend,
    bank_id: str,
    entries: Sequence[str],
    *,
    budget: Budget,
    policy: RetryPolicy,
    slot: SlotLock,
) -> Compressions:
    """Ask one compression reflect of `bank_id` under `slot` (with retries) and gate each answer.

    The answer's token usage comes back in `Compressions.usage`. Raises what the call raises
    (`SlotBusyError`, `RetriesExhausted`, `BackendError`) and `CompressionUnusable`, carrying the
    usage, for an answer without a usable shape.
    """
    result = await call_holding_slot(
        "reflect",
        lambda: backend.reflect(
            bank_id,
            compress_query(entries),
            budget=budget,
            response_schema=reflect_response_schema(CompressionAnswer),
            tags=_NO_MEMORIES,
            tags_match="all_strict",
        ),
        policy,
        slot,
        on_retry=backoff_logger("reflect", log),
    )
    try:
        found = parse_compression(result.structured, entries)
    except DreamerError as exc:
        raise CompressionUnusable(str(exc), result.usage) from None
    return replace(found, usage=result.usage)


class ReflectCompressor:
    """Compresses long entries with `reflect_compress`, falling back to the rules when it fails.

    `run` carries the coroutine to the event loop the audit's worker thread came from (for example
    ``anyio.from_thread.run``); `notes` collects rejections and fallbacks for the report, `tokens`
    the LLM tokens of every answer (`llm_counts`).
    """

    def __init__(
        self,
        call: Callable[[Sequence[str]], Coroutine[Any, Any, Compressions]],
        run: Callable[[Callable[[], Coroutine[Any, Any, Compressions]]], Compressions],
        min_chars: int,
    ) -> None:
        self._call = call
        self._run = run
        self._rules = RuleCompressor(min_chars)
        self.min_chars = min_chars
        self.notes: list[str] = []
        self.tokens = CompressionTokens()

    def llm_counts(self) -> dict[str, int]:
        """The LLM tokens of the compression reflects so far, under the run record's ``llm_*`` names
        (zeros before any answer)."""
        return self.tokens.counts()

    def rewrite(self, entries: Sequence[str]) -> Mapping[str, Rewrite]:
        """Gated reflect rewrites of the long entries; the rules for all of them if the call fails."""
        long = [entry for entry in entries if len(entry) > self.min_chars]
        if not long:
            return {}
        try:
            found = self._run(lambda: self._call(long))
        except (DreamerError, TimeoutError, OSError) as exc:
            if isinstance(exc, CompressionUnusable):
                self.tokens.count(exc.usage)
            self.notes.append(f"entries compressed by rules: the compression reflect failed ({exc})")
            log.warning("hermes_audit_compress_reflect_failed", error=str(exc))
            return self._rules.rewrite(long)
        self.tokens.count(found.usage)
        self.notes.extend(found.rejected)
        # Entries the answer did not address get the rules; a rejected rewrite keeps its entry as is.
        unanswered = [e for e in long if e not in found.rewrites and e not in found.rejected_entries]
        if unanswered:
            self.notes.append(
                f"the compression reflect gave no rewrite for {len(unanswered)} of {len(long)} long "
                "entries; the rules reworded those"
            )
        return {**self._rules.rewrite(unanswered), **found.rewrites}
