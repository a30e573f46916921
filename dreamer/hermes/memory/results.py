"""What a store call gives back: how much of a file's budget its entries occupy, and a write's result."""

from __future__ import annotations

from dataclasses import dataclass

from dreamer.hermes.memory.entries import Target, usage_percent

__all__ = ["Usage", "WriteResult"]


@dataclass(frozen=True)
class Usage:
    """How much of a file's budget its entries occupy."""

    chars: int
    limit: int

    @property
    def percent(self) -> int:
        """Whole percent, truncated and capped at 100, as Hermes reports it."""
        return usage_percent(self.chars, self.limit)

    def __str__(self) -> str:
        return f"{self.percent}% — {self.chars:,}/{self.limit:,} chars"


@dataclass(frozen=True)
class WriteResult:
    """A successful store call; `changed` is False when nothing had to be written."""

    target: Target
    message: str
    usage: Usage
    entry_count: int
    changed: bool
