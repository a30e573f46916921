"""Protected details: the values two texts must share to state the same fact.

A protected detail is a number, date, version, URL, host, path or negation, or a name: who a text
is about and, with the other names, who did what to whom. `protected_details` finds them with the
regex tables of its finders in a fixed order (locations, versions, dates, numbers), cutting each match out so
that the digits of a path are not read again as a number, and gives each value one canonical
spelling ("two" and "2", "8 May 2023" and "2023-05-08", "3 pm" and "15:00"). The content words left
over (the residual) tell a changed value apart from a different statement.

Used by dedup (a changed detail vetoes a duplicate), by salience and by the memory audit's
compression (a rewrite must keep every detail), so it sits below both the roll-up and hermes.
Each kind has its finder in a module of its own (`locations`, `names`, `versions`, `dates`,
`numbers`, `negations`), the values in `kinds`, the cutting out of what a finder read in `matches`;
`protected_details` runs them in order.
Why: docs/design/dedup.md.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

from dreamer.details.dates import extract_dates
from dreamer.details.kinds import VALUE_DETAILS, Detail, NameRole, ProtectedDetails
from dreamer.details.locations import extract_locations
from dreamer.details.names import find_names
from dreamer.details.negations import negated_words
from dreamer.details.numbers import extract_numbers
from dreamer.details.versions import extract_versions
from dreamer.text import content_tokens, without_leading_date_clause

__all__ = [
    "VALUE_DETAILS",
    "Cut",
    "Detail",
    "NameRole",
    "ProtectedDetails",
    "cut_details",
    "protected_details",
]


class Cut(NamedTuple):
    """A text's values cut out (the first half of `protected_details`): what the judge's cheap gate
    needs (the residual words) without the names and negations it does not."""

    #: The text without its leading date clause: negations are read here.
    body: str
    #: The body with its locations cut out: names are read here.
    named: str
    values: tuple[tuple[Detail, tuple[str, ...]], ...]
    residual_tokens: tuple[str, ...]


@functools.lru_cache(maxsize=256)
def cut_details(text: str) -> Cut:
    """Cut a text's locations, versions, dates and numbers out (its leading date clause excluded),
    each kind's values kept. Kept for the last 256 texts: a sentence of a stored card is sketched
    first (`dreamer.rollup.similarity.sketch_text`), and analysed in full only when the sketch
    does not settle it, which then reuses this."""
    body = without_leading_date_clause(text)
    found: dict[Detail, list[str]] = {kind: [] for kind in Detail}
    named = extract_locations(body, found)
    rest = extract_versions(named, found)
    rest = extract_dates(rest, found)
    rest = extract_numbers(rest, found)
    values = tuple((kind, tuple(sorted(found[kind]))) for kind in Detail if found[kind])
    return Cut(body, named, values, tuple(content_tokens(rest)))


def protected_details(text: str) -> ProtectedDetails:
    """Extract the protected details of a text (its leading date clause excluded)."""
    cut = cut_details(text)
    names, name_groups, name_roles = find_names(cut.named)
    return ProtectedDetails(
        values=cut.values,
        negated=negated_words(cut.body),
        names=names,
        name_groups=name_groups,
        residual_tokens=cut.residual_tokens,
        name_roles=name_roles,
    )
