"""Tokens an LLM-backed call used: from the server's ``usage`` where it gives one, else estimated.

Pure. Consolidation that burns an LLM budget unseen is a known failure of memory systems; every
reflect, chat completion, peer-card polish and audit rewrite Dreamer makes reports its tokens
here, and the roll-up caps them (``rollup.max_llm_tokens_per_run`` / ``_per_day``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["CHARS_PER_TOKEN", "TokenCounter", "TokenUsage", "estimate_tokens", "usage_from"]

#: The estimate's rule: about four characters of English per token (OpenAI's own rule of thumb).
CHARS_PER_TOKEN = 4


@dataclass(frozen=True, slots=True)
class TokenUsage:
    """Prompt and completion tokens of one or more calls; ``estimated`` when any part was guessed."""

    prompt: int = 0
    completion: int = 0
    estimated: bool = False

    @property
    def total(self) -> int:
        return self.prompt + self.completion

    def __add__(self, other: TokenUsage) -> TokenUsage:
        return TokenUsage(
            self.prompt + other.prompt, self.completion + other.completion, self.estimated or other.estimated
        )


@dataclass(slots=True)
class TokenCounter:
    """The tokens of several calls, as a run record counts them: a call whose usage the server
    did not report is estimated and counted in ``calls_estimated``; no usage (no LLM) counts
    nothing."""

    prompt: int = 0
    completion: int = 0
    calls: int = 0
    calls_estimated: int = 0

    @property
    def total(self) -> int:
        return self.prompt + self.completion

    def count(self, usage: TokenUsage | None) -> None:
        """Count one call's usage (None: the call used no LLM)."""
        if usage is None:
            return
        self.prompt += usage.prompt
        self.completion += usage.completion
        self.calls += 1
        self.calls_estimated += usage.estimated

    def counts(self, prefix: str = "") -> dict[str, int]:
        """The counts under a run record's names, ``llm_*`` (``<prefix>llm_*``)."""
        return {
            f"{prefix}llm_calls": self.calls,
            f"{prefix}llm_calls_estimated": self.calls_estimated,
            f"{prefix}llm_prompt_tokens": self.prompt,
            f"{prefix}llm_completion_tokens": self.completion,
            f"{prefix}llm_tokens": self.total,
        }


def estimate_tokens(text: str) -> int:
    """A token estimate of ``text`` (`CHARS_PER_TOKEN`); 0 for an empty text."""
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def _count(value: Any) -> int | None:
    # A count the server gives must be a plain non-negative integer; anything else is no count.
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 10**12 else None


def usage_from(usage: Any, *, prompt_text: str, answer_text: str) -> TokenUsage:
    """The usage a server reported (OpenAI's ``prompt_tokens`` / ``completion_tokens`` or
    Hindsight's ``input_tokens`` / ``output_tokens``), or estimated from the texts when it
    reported none, or garbage, or zeros for a call that evidently used tokens."""
    if isinstance(usage, Mapping):
        prompt = _count(usage.get("prompt_tokens", usage.get("input_tokens")))
        completion = _count(usage.get("completion_tokens", usage.get("output_tokens")))
        if prompt is not None and completion is not None and (prompt or completion or not answer_text):
            return TokenUsage(prompt, completion)
    return TokenUsage(estimate_tokens(prompt_text), estimate_tokens(answer_text), estimated=True)
