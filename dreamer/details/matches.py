"""Cutting matches out of a text, so that what one finder read is not read again by the next.

The finders run in a fixed order (locations, versions, dates, numbers): the digits of a path must
not come back as a number, nor a date's day as a count. A match is blanked rather than deleted,
so the offsets of later matches stay valid.
"""

from __future__ import annotations

import re

__all__ = ["NEEDS_DIGIT", "collect", "cut", "digit_pattern"]

_DIGIT = re.compile(r"\d")
#: The patterns that match nothing without a digit (`digit_pattern`): not scanned in a text
#: without one. Most memory text has none, and the scans were a third of the extraction's time.
NEEDS_DIGIT: set[re.Pattern[str]] = set()


def digit_pattern(pattern: str) -> re.Pattern[str]:
    """``pattern`` compiled, and marked as matching nothing in a text without a digit (``\\d``)."""
    compiled = re.compile(pattern)
    NEEDS_DIGIT.add(compiled)
    return compiled


def cut(text: str, span: tuple[int, int]) -> str:
    # Replace rather than delete, so offsets of later matches stay valid.
    start, end = span
    return text[:start] + " " * (end - start) + text[end:]


def collect(pattern: re.Pattern[str], text: str) -> tuple[list[re.Match[str]], str]:
    """``pattern``'s matches in ``text``, and the text with them blanked (a pattern of
    `NEEDS_DIGIT` in a text without a digit: none, unscanned)."""
    if pattern in NEEDS_DIGIT and _DIGIT.search(text) is None:
        return [], text
    matches = list(pattern.finditer(text))
    for match in matches:
        text = cut(text, match.span())
    return matches, text
