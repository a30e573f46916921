"""A text's analysis kept as a string, so a stored card is compared without analysing it again.

The judge compares a new card in full with each ledger card whose figures pass a lexical rule, and
with the sentences of such a card: at 1M ledger cards that was about 4,000 analyses a run, most of
the judge's time, each made again from the stored text. A ledger row now keeps what
`dreamer.rollup.similarity.profile_text` found beside its sketch (`analysis_record`): the content
words in order (the character shingles are made from them) and the protected details. Read back
(`kept_profile`), it gives the very profile the analysis would.

A record names its version (:data:`ANALYSIS_VERSION`) and is checked against the sketch it is kept
with (the same content and residual words); one of another version, damaged or not matching is
ignored and the text analysed as before. Pure.
"""

from __future__ import annotations

import json
from typing import Any

from dreamer.details import Detail, NameRole, ProtectedDetails
from dreamer.rollup.similarity import Sketch, TextProfile, profile_of

__all__ = ["ANALYSIS_VERSION", "analysis_record", "is_current", "kept_profile"]

#: Bump whenever `profile_text` would give another profile for some text: another normalisation,
#: tokenisation, stemming or detail extraction (tests/unit/rollup/test_analysis.py pins a digest of
#: the analyses of a fixed set of texts to this version, and fails until both change together).
ANALYSIS_VERSION = "a1"


def analysis_record(profile: TextProfile) -> str:
    """What ``profile``'s analysis found beyond its sketch, as one line of JSON (no tab, no control
    character: it is a field of the stored sketch)."""
    details = profile.details
    return json.dumps(
        [
            ANALYSIS_VERSION,
            list(profile.content),
            [[str(kind), list(values)] for kind, values in details.values],
            list(details.names),
            [sorted(group) for group in details.name_groups],
            list(details.residual_tokens),
            [[name, sorted(str(role) for role in roles)] for name, roles in details.name_roles],
            list(details.negated),
        ],
        ensure_ascii=False,
        separators=(",", ":"),
    )


def is_current(sketch: Sketch) -> bool:
    """Whether ``sketch`` keeps an analysis of this version (its version read, nothing parsed):
    a row written by this code, whose sentences' records then keep theirs too."""
    return sketch.analysis is not None and sketch.analysis.startswith(f'["{ANALYSIS_VERSION}",')


def kept_profile(text: str, sketch: Sketch) -> TextProfile | None:
    """The profile of ``text`` from the analysis kept in ``sketch``; None when there is none, or it
    is of another version, does not read, or does not match the sketch (then analyse the text)."""
    if sketch.analysis is None:
        return None
    try:
        record = json.loads(sketch.analysis)
        version, content, values, names, groups, residual, roles, negated = record
        if version != ANALYSIS_VERSION:
            return None
        details = ProtectedDetails(
            values=tuple((Detail(kind), _strings(found)) for kind, found in values),
            names=_strings(names),
            name_groups=tuple(frozenset(_strings(group)) for group in groups),
            residual_tokens=_strings(residual),
            name_roles=tuple((_string(n), frozenset(NameRole(r) for r in _strings(of))) for n, of in roles),
            negated=_strings(negated),
        )
        words = _strings(content)
    except (ValueError, TypeError, RecursionError):  # not JSON (or nested past the parser's
        return None  # depth), another shape, an unknown kind or role
    if frozenset(words) != sketch.content or frozenset(details.residual_tokens) != sketch.residual:
        return None
    return profile_of(text, sketch.normalized, words, details)


def _strings(items: Any) -> tuple[str, ...]:
    if not isinstance(items, list):
        raise TypeError("a list of strings was expected")
    return tuple(_string(item) for item in items)


def _string(item: Any) -> str:
    if not isinstance(item, str):
        raise TypeError("a string was expected")
    return item
