"""Cutting matches out of a text, so that what one finder read is not read again by the next.

The finders run in a fixed order (locations, versions, dates, numbers): the digits of a path must
not come back as a number, nor a date's day as a count. A match is blanked rather than deleted,
so the offsets of later matches stay valid.
"""

from __future__ import annotations

import re

__all__ = ["collect", "cut"]

_DIGIT = re.compile(r"\d")


def cut(text: str, span: tuple[int, int]) -> str:
    # Replace rather than delete, so offsets of later matches stay valid.
    start, end = span
    return text[:start] + " " * (end - start) + text[end:]


def collect(
    pattern: re.Pattern[str], text: str, *, needs_digit: bool = False
) -> tuple[list[re.Match[str]], str]:
    """``pattern``'s matches in ``text``, and the text with them blanked. ``needs_digit``: the
    pattern matches nothing without a digit (``\\d``, the same test), so a text without one is not
    scanned; most memory text has none, and the scans were a third of the extraction's time."""
    if needs_digit and _DIGIT.search(text) is None:
        return [], text
    matches = list(pattern.finditer(text))
    for match in matches:
        text = cut(text, match.span())
    return matches, text
