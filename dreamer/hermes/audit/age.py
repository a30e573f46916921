"""How old a memory entry is: from a date written in it, else from when the audit first saw it.

Dates understood: ISO `2025-03-01`, `1 March 2025` / `1st Mar 2025`, `March 1, 2025`. The newest
date that is not in the future counts (a future date is a deadline, not when the entry was
written). An entry with no such date is as old as the first audit that saw it; one never seen
before is 0 days old, so nothing is ever deleted on first sight for want of a date.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime

__all__ = ["EntryAge", "entry_age", "entry_dates"]

_MONTHS = {
    "jan": 1,
    "feb": 2,
    "mar": 3,
    "apr": 4,
    "may": 5,
    "jun": 6,
    "jul": 7,
    "aug": 8,
    "sep": 9,
    "oct": 10,
    "nov": 11,
    "dec": 12,
}
_MONTH = (
    r"(jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?"
    r"|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)"
)
_ISO = re.compile(r"(?<!\d)(\d{4})-(\d{2})-(\d{2})(?!\d)")
_DAY_MONTH_YEAR = re.compile(rf"\b(\d{{1,2}})(?:st|nd|rd|th)? {_MONTH}\.? (\d{{4}})\b", re.IGNORECASE)
_MONTH_DAY_YEAR = re.compile(rf"\b{_MONTH}\.? (\d{{1,2}})(?:st|nd|rd|th)?,? (\d{{4}})\b", re.IGNORECASE)


def _make_date(year: str, month: int, day: str) -> date | None:
    try:
        return date(int(year), month, int(day))
    except ValueError:
        return None


def entry_dates(text: str) -> tuple[date, ...]:
    """Every valid calendar date written in `text`, in order of appearance per format."""
    found: list[date | None] = []
    found.extend(_make_date(y, int(m), d) for y, m, d in _ISO.findall(text))
    found.extend(_make_date(y, _MONTHS[m[:3].lower()], d) for d, m, y in _DAY_MONTH_YEAR.findall(text))
    found.extend(_make_date(y, _MONTHS[m[:3].lower()], d) for m, d, y in _MONTH_DAY_YEAR.findall(text))
    return tuple(d for d in found if d is not None)


@dataclass(frozen=True)
class EntryAge:
    """An entry's age in whole days and what it was measured from."""

    days: int
    basis: str


def entry_age(text: str, first_seen: datetime | None, now: datetime) -> EntryAge:
    """The age of the entry `text` at `now`."""
    today = now.date()
    past = [d for d in entry_dates(text) if d <= today]
    if past:
        newest = max(past)
        return EntryAge((today - newest).days, f"dated {newest.isoformat()}")
    if first_seen is not None:
        return EntryAge(max(0, (now - first_seen).days), f"first seen {first_seen.date().isoformat()}")
    return EntryAge(0, "first seen in this audit")
