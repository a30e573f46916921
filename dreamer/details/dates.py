"""Dates and times in a text, each in one canonical spelling ("8 May 2023" and "2023-05-08" alike,
"3 pm" and "15:00" alike); a part the text does not say is "?".

Read after locations and versions and before numbers, so a day or a year is not read as a count.
"""

from __future__ import annotations

import re

from dreamer.details.kinds import Detail
from dreamer.details.matches import collect, digit_pattern, needing, one_of_words

__all__ = ["MONTHS", "WEEKDAYS", "extract_dates"]

MONTHS = {
    "january": 1, "jan": 1, "february": 2, "feb": 2, "march": 3, "mar": 3, "april": 4, "apr": 4,
    "may": 5, "june": 6, "jun": 6, "july": 7, "jul": 7, "august": 8, "aug": 8, "september": 9,
    "sep": 9, "sept": 9, "october": 10, "oct": 10, "november": 11, "nov": 11, "december": 12, "dec": 12,
}  # fmt: skip
WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_MONTH_RE = "|".join(sorted(MONTHS, key=len, reverse=True))
_DAY_RE = r"[0-3]?\d(?:st|nd|rd|th)?"
_YEAR_RE = r"(?:1[89]|2[01])\d\d"

_ISO_DATE = digit_pattern(
    r"\b(\d{4})-(\d{1,2})-(\d{1,2})(?:[T ]\d{1,2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+\-]\d{2}:?\d{2})?)?\b"
)
_NUMERIC_DATE = digit_pattern(r"\b(\d{1,2})/(\d{1,2})/(\d{2,4})\b")
_DAY_MONTH = digit_pattern(
    rf"(?i)\b(?:the\s+)?({_DAY_RE})\s+(?:of\s+)?({_MONTH_RE})\.?(?:,?\s+({_YEAR_RE}))?\b"
)
_MONTH_DAY = digit_pattern(rf"(?i)\b({_MONTH_RE})\.?\s+(?:the\s+)?({_DAY_RE})(?!\d)(?:,?\s+({_YEAR_RE}))?\b")
_MONTH_YEAR = digit_pattern(rf"(?i)\b({_MONTH_RE})\.?,?\s+({_YEAR_RE})\b")
# A month name alone only when capitalised: "may" and "march" are also verbs.
_LONE_MONTH = re.compile(
    r"\b("
    + one_of_words(
        [
            *("January", "February", "March", "April", "May", "June", "July", "August"),
            *("September", "October", "November", "December"),
        ]
    )
    + r")\b"
)
_WEEKDAY = needing(rf"(?i)\b({one_of_words(WEEKDAYS)})s?\b", "(?i)day")
_LONE_YEAR = digit_pattern(rf"\b({_YEAR_RE})\b")
_CLOCK_TIME = digit_pattern(r"(?i)\b(\d{1,2})(?::(\d{2}))?\s*([ap])\.?m\b\.?|\b(\d{1,2}):(\d{2})\b")


def _date_value(year: str | None, month: int | None, day: str | None) -> str:
    day_digits = re.sub(r"\D", "", day) if day else None
    return "-".join(
        [year or "?", f"{month:02d}" if month else "?", f"{int(day_digits):02d}" if day_digits else "?"]
    )


def _month(name: str) -> int:
    return MONTHS[name.casefold().rstrip(".")]


def extract_dates(text: str, found: dict[Detail, list[str]]) -> str:
    matches, text = collect(_ISO_DATE, text)
    found[Detail.DATE] += [_date_value(m[1], int(m[2]), m[3]) for m in matches]
    matches, text = collect(_NUMERIC_DATE, text)
    found[Detail.DATE] += [f"{m[1]}/{m[2]}/{m[3]}" for m in matches]  # day/month order is ambiguous
    matches, text = collect(_DAY_MONTH, text)
    found[Detail.DATE] += [_date_value(m[3], _month(m[2]), m[1]) for m in matches]
    matches, text = collect(_MONTH_DAY, text)
    found[Detail.DATE] += [_date_value(m[3], _month(m[1]), m[2]) for m in matches]
    matches, text = collect(_MONTH_YEAR, text)
    found[Detail.DATE] += [_date_value(m[2], _month(m[1]), None) for m in matches]
    matches, text = collect(_LONE_MONTH, text)
    found[Detail.DATE] += [_date_value(None, _month(m[1]), None) for m in matches]
    matches, text = collect(_WEEKDAY, text)
    found[Detail.DATE] += [m[1].casefold() for m in matches]
    matches, text = collect(_LONE_YEAR, text)
    found[Detail.DATE] += [m[1] for m in matches]
    matches, text = collect(_CLOCK_TIME, text)
    for m in matches:
        if m[1] is not None:
            hour = int(m[1]) % 12 + (12 if m[3].casefold() == "p" else 0)
            found[Detail.DATE].append(f"{hour:02d}:{m[2] or '00'}")
        else:
            found[Detail.DATE].append(f"{int(m[4]):02d}:{m[5]}")
    return text
