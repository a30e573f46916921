"""Numbers in a text, in digits or in words, with their sign, currency, "%" and "+" ("two" and "2",
"-$5" and "$-5" alike).

Read last of the values: whatever digits are left once locations, versions and dates are cut out.
"""

from __future__ import annotations

import re

from dreamer.details.kinds import Detail
from dreamer.details.matches import collect, digit_pattern, one_of_words
from dreamer.text import CURRENCY_SYMBOLS, NUMBER_WORDS

__all__ = ["extract_numbers"]

# Digits with a short unit or ordinal suffix ("4th", "1900s", "5k", "30gb"), with their sign,
# currency, "%" and a trailing "+" as the normaliser keeps them (`dreamer.text`): "-5", "$100",
# "100 €", "12%", "5+". A sign counts where it cannot be a hyphen or a range ("COVID-19", "5-10"),
# and a "+" after a letter ("UTC+5", where "UTC-5" is read as a hyphen, as the normaliser does).
_SIGNS = "+\\-\u2212"
_NUMBER = digit_pattern(
    rf"(?:(?<![\w.,{_SIGNS}])(?P<sign>[{_SIGNS}])|(?<=[^\W\d_])(?P<joined>\+))?"
    rf"(?:(?P<cur>[{CURRENCY_SYMBOLS}])\s?(?P<signed>[{_SIGNS}])?)?"
    r"(?<![\w.])(?P<digits>\d+(?:[.,]\d+)*[A-Za-z]{0,3})(?![\w])"
    rf"(?(cur)|(?:(?P<post>[{CURRENCY_SYMBOLS}])|\s(?P<spaced>[{CURRENCY_SYMBOLS}])(?!\s?[{_SIGNS}]?\d))?)"
    r"(?:\s?(?P<percent>%))?(?P<plus>\++(?![\w+]))?"
)
_NUMBER_WORD = re.compile(r"(?i)\b(" + one_of_words(NUMBER_WORDS) + r")\b")


def _number_value(match: re.Match[str]) -> str:
    """A number's canonical spelling: sign, digits, currency, "%", "+" ("-$5" and "$-5" are "-5$")."""
    sign = (match["sign"] or match["joined"] or match["signed"] or "").replace("\u2212", "-")
    # "1,000" is a thousand; "3,5" stays as written.
    digits = re.sub(r",(?=\d{3}\b)", "", match["digits"]).casefold()
    currency = match["cur"] or match["post"] or match["spaced"] or ""
    return f"{sign}{digits}{currency}{match['percent'] or ''}{match['plus'] or ''}"


def extract_numbers(text: str, found: dict[Detail, list[str]]) -> str:
    matches, text = collect(_NUMBER, text)
    found[Detail.NUMBER] += [_number_value(m) for m in matches]
    matches, text = collect(_NUMBER_WORD, text)
    found[Detail.NUMBER] += [NUMBER_WORDS[m[1].casefold()] for m in matches]
    return text
