"""Versions in a text: "v2", "1.2.3", and a decimal after "version" or a product name ("Python 3.11").

Read after locations and before dates and numbers, so that "3.11" or "1.2.3" is a version, not a number.
"""

from __future__ import annotations

from dreamer.details.kinds import Detail
from dreamer.details.matches import collect, cut, digit_pattern, find

__all__ = ["extract_versions"]

_PREFIXED_VERSION = digit_pattern(r"(?i)\bv\d+(?:\.\d+)*(?:[\-+][\w.]+)?\b")
_DOTTED_VERSION = digit_pattern(r"\b\d+(?:\.\d+){2,}(?:[\-+][\w.]+)?\b")
_DECIMAL = digit_pattern(r"\b\d+\.\d+\b")
_VERSION_WORDS = frozenset({"version", "release", "ver", "rev", "revision", "build", "update"})


def extract_versions(text: str, found: dict[Detail, list[str]]) -> str:
    for pattern in (_PREFIXED_VERSION, _DOTTED_VERSION):
        matches, text = collect(pattern, text)
        found[Detail.VERSION] += [m.group(0).casefold().lstrip("v") for m in matches]
    for match in find(_DECIMAL, text):
        before = text[: match.start()].split()
        previous = before[-1] if before else ""
        # "Python 3.11", "version 2.4": a decimal right after a product name or "version" is a version.
        if previous.casefold() in _VERSION_WORDS or (previous[:1].isupper() and previous.isalpha()):
            found[Detail.VERSION].append(match.group(0))
            text = cut(text, match.span())
    return text
