"""Protected details: the values two texts must share to state the same fact.

A protected detail is a number, date, version, URL, host, path or negation, or a name: who a text
is about and, with the other names, who did what to whom. `protected_details` finds them with the
regex tables below in a fixed order (locations, versions, dates, numbers), cutting each match out so
that the digits of a path are not read again as a number, and gives each value one canonical
spelling ("two" and "2", "8 May 2023" and "2023-05-08", "3 pm" and "15:00"). The content words left
over (the residual) tell a changed value apart from a different statement.

Used by dedup (a changed detail vetoes a duplicate), by salience and by the memory audit's
compression (a rewrite must keep every detail), so it sits below both the roll-up and hermes.
Why: docs/design/dedup.md.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from dataclasses import dataclass
from enum import StrEnum

from dreamer.text import (
    CURRENCY_SYMBOLS,
    NUMBER_WORDS,
    STOPWORDS,
    content_tokens,
    normalize_text,
    without_leading_date_clause,
)

__all__ = ["VALUE_DETAILS", "Detail", "NameRole", "ProtectedDetails", "protected_details"]


class Detail(StrEnum):
    """A protected detail: texts that differ in one of these never state the same fact."""

    NUMBER = "number"
    DATE = "date"
    VERSION = "version"
    URL = "url"
    HOST = "host"
    PATH = "path"
    NEGATION = "negation"
    ROLE = "role"
    ENTITY = "entity"


#: Details whose change, everything else equal, restates a fact with a new value (a conflict).
#: A role swap or another named entity is a different fact instead.
VALUE_DETAILS: frozenset[Detail] = frozenset(
    {Detail.NUMBER, Detail.DATE, Detail.VERSION, Detail.URL, Detail.HOST, Detail.PATH, Detail.NEGATION}
)


# --- finding them in a text -----------------------------------------------------------------------

_MONTHS = {
    "january": 1, "jan": 1, "february": 2, "feb": 2, "march": 3, "mar": 3, "april": 4, "apr": 4,
    "may": 5, "june": 6, "jun": 6, "july": 7, "jul": 7, "august": 8, "aug": 8, "september": 9,
    "sep": 9, "sept": 9, "october": 10, "oct": 10, "november": 11, "nov": 11, "december": 12, "dec": 12,
}  # fmt: skip
_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_MONTH_RE = "|".join(sorted(_MONTHS, key=len, reverse=True))
_WEEKDAY_RE = "|".join(_WEEKDAYS)
_DAY_RE = r"[0-3]?\d(?:st|nd|rd|th)?"
_YEAR_RE = r"(?:1[89]|2[01])\d\d"

_URL = re.compile(r"(?i)\b(?:[a-z][a-z0-9+.\-]*://|www\.)[^\s<>\"'()\[\]{}]+")
_EMAIL = re.compile(r"(?i)\b[\w.+\-]+@[\w\-]+(?:\.[\w\-]+)+")
_ABSOLUTE_PATH = re.compile(r"(?<![\w.:/])(?:~|\.{1,2})?/[\w.@%+~\-]+(?:/[\w.@%+~\-]+)*/?")
_WINDOWS_PATH = re.compile(r"\b[A-Za-z]:\\[^\s]+")
_RELATIVE_PATH = re.compile(r"(?<![\w/])[A-Za-z_][\w.\-]*(?:/[\w.@%+~\-]+)+/?")
_FILE_EXTENSIONS = (
    "py|toml|json|ya?ml|md|txt|cfg|conf|ini|log|sh|service|timer|socket|db|sqlite3?|env|lock|csv|html?"
    "|js|ts|rs|go|c|h|cpp|java|rb|sql|xml|pdf|png|jpe?g|gz|tgz|zip|tar"
)
_FILE_NAME = re.compile(rf"(?i)\b[\w\-]+(?:\.[\w\-]+)*\.(?:{_FILE_EXTENSIONS})\b")
_IPV4 = re.compile(r"\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?\b")
_TLDS = (
    "com|org|net|io|dev|ai|app|co|uk|de|fr|nl|eu|us|ca|au|jp|info|biz|edu|gov|me|sh|tech|cloud"
    "|local|lan|internal|home|arpa|localdomain|test|example|invalid"
)
_HOST_NAME = re.compile(rf"(?i)\b(?:localhost|(?:[a-z0-9](?:[a-z0-9\-]*[a-z0-9])?\.)+(?:{_TLDS}))(?::\d+)?\b")
_PREFIXED_VERSION = re.compile(r"(?i)\bv\d+(?:\.\d+)*(?:[\-+][\w.]+)?\b")
_DOTTED_VERSION = re.compile(r"\b\d+(?:\.\d+){2,}(?:[\-+][\w.]+)?\b")
_DECIMAL = re.compile(r"\b\d+\.\d+\b")
_VERSION_WORDS = frozenset({"version", "release", "ver", "rev", "revision", "build", "update"})
_ISO_DATE = re.compile(
    r"\b(\d{4})-(\d{1,2})-(\d{1,2})(?:[T ]\d{1,2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+\-]\d{2}:?\d{2})?)?\b"
)
_NUMERIC_DATE = re.compile(r"\b(\d{1,2})/(\d{1,2})/(\d{2,4})\b")
_DAY_MONTH = re.compile(rf"(?i)\b(?:the\s+)?({_DAY_RE})\s+(?:of\s+)?({_MONTH_RE})\.?(?:,?\s+({_YEAR_RE}))?\b")
_MONTH_DAY = re.compile(rf"(?i)\b({_MONTH_RE})\.?\s+(?:the\s+)?({_DAY_RE})(?!\d)(?:,?\s+({_YEAR_RE}))?\b")
_MONTH_YEAR = re.compile(rf"(?i)\b({_MONTH_RE})\.?,?\s+({_YEAR_RE})\b")
# A month name alone only when capitalised: "may" and "march" are also verbs.
_LONE_MONTH = re.compile(
    r"\b(January|February|March|April|May|June|July|August|September|October|November|December)\b"
)
_WEEKDAY = re.compile(rf"(?i)\b({_WEEKDAY_RE})s?\b")
_LONE_YEAR = re.compile(rf"\b({_YEAR_RE})\b")
_CLOCK_TIME = re.compile(r"(?i)\b(\d{1,2})(?::(\d{2}))?\s*([ap])\.?m\b\.?|\b(\d{1,2}):(\d{2})\b")
# Digits with a short unit or ordinal suffix ("4th", "1900s", "5k", "30gb"), with their sign,
# currency, "%" and a trailing "+" as the normaliser keeps them (`dreamer.text`): "-5", "$100",
# "100 €", "12%", "5+". A sign counts where it cannot be a hyphen or a range ("COVID-19", "5-10"),
# and a "+" after a letter ("UTC+5", where "UTC-5" is read as a hyphen, as the normaliser does).
_SIGNS = "+\\-\u2212"
_NUMBER = re.compile(
    rf"(?:(?<![\w.,{_SIGNS}])(?P<sign>[{_SIGNS}])|(?<=[^\W\d_])(?P<joined>\+))?"
    rf"(?:(?P<cur>[{CURRENCY_SYMBOLS}])\s?(?P<signed>[{_SIGNS}])?)?"
    r"(?<![\w.])(?P<digits>\d+(?:[.,]\d+)*[A-Za-z]{0,3})(?![\w])"
    rf"(?(cur)|(?:(?P<post>[{CURRENCY_SYMBOLS}])|\s(?P<spaced>[{CURRENCY_SYMBOLS}])(?!\s?[{_SIGNS}]?\d))?)"
    r"(?:\s?(?P<percent>%))?(?P<plus>\++(?![\w+]))?"
)
_NUMBER_WORD = re.compile(r"(?i)\b(" + "|".join(NUMBER_WORDS) + r")\b")
_NEGATION_WORDS = frozenset(
    {
        "not",
        "no",
        "never",
        "none",
        "nobody",
        "nothing",
        "nowhere",
        "neither",
        "nor",
        "without",
        "cannot",
        "unable",
    }
)
_NEGATION_TOKEN = re.compile(r"[^\W_]+(?:'[^\W_]+)*")
# A name is one normalised word (`dreamer.text`): a "." between digits, a leading "@" or "#" and a
# trailing "+" or "#" belong to it, so "C++", "C#" and "@Alice" are not "C" and "Alice".
_NAME_WORD = re.compile(
    r"(?:(?<!\w)[@#])?[^\W_]+(?:(?:['’ʼ]|(?<=\d)\.(?=\d))[^\W_]+)*(?:\++(?![\w+])|#(?![\w#]))?"
)
_POSSESSIVE_SUFFIX = re.compile(r"['’ʼ]s$")
_NOT_NAMES = frozenset(STOPWORDS | set(_MONTHS) | set(_WEEKDAYS) | set(NUMBER_WORDS))
#: Common nouns and adverbs that are capitalised only because they start a sentence
#: ("Host atlas runs ..."): at the start of a sentence they are not names.
_SENTENCE_STARTERS = frozenset(
    [
        "host",
        "hosts",
        "server",
        "servers",
        "service",
        "services",
        "user",
        "users",
        "project",
        "projects",
        "team",
        "repo",
        "repository",
        "app",
        "application",
        "database",
        "db",
        "backup",
        "backups",
        "config",
        "configuration",
        "deploy",
        "deployment",
        "deployments",
        "production",
        "staging",
        "model",
        "models",
        "job",
        "jobs",
        "daemon",
        "agent",
        "assistant",
        "system",
        "tool",
        "tools",
        "file",
        "files",
        "directory",
        "port",
        "ports",
        "version",
        "versions",
        "node",
        "nodes",
        "cluster",
        "container",
        "containers",
        "machine",
        "box",
        "network",
        "both",
        "each",
        "every",
        "all",
        "some",
        "most",
        "many",
        "several",
        "one",
        "another",
        "other",
        "new",
        "old",
        "later",
        "earlier",
        "also",
        "however",
        "still",
        "now",
        "then",
        "there",
        "here",
        "today",
        "yesterday",
        "tomorrow",
        "recently",
        "currently",
    ]
)
_SENTENCE_END = re.compile(r"[.!?:;]\s*$")
#: Words before a name that say what part it plays in the event (see `NameRole`).
_ROLE_MARKERS = {"by": "agent", "from": "agent", "with": "partner"}


class NameRole(StrEnum):
    """The part a name plays, as far as the words right around it tell.

    `AGENT`: after "by" or "from" ("was helped by Maria", "advice from James"); `POSSESSOR`:
    written "X's" ("Evan's support"); `PARTNER`: after "with" ("a painting session with Sam");
    `PLAIN`: none of these (a subject or an object).
    """

    AGENT = "agent"
    POSSESSOR = "possessor"
    PARTNER = "partner"
    PLAIN = "plain"


@dataclass(frozen=True, slots=True)
class ProtectedDetails:
    """The details of one text that a duplicate must repeat exactly, each kind as a sorted multiset."""

    values: tuple[tuple[Detail, tuple[str, ...]], ...]
    #: Capitalised names in order of first appearance, case-folded.
    names: tuple[str, ...]
    #: Names grouped where joined by "and" ("Nate and Joanna"), in order.
    name_groups: tuple[frozenset[str], ...]
    #: Content words of the text with every protected value cut out.
    residual_tokens: tuple[str, ...]
    #: Each name with the parts it plays, in order of first appearance (`NameRole`).
    name_roles: tuple[tuple[str, frozenset[NameRole]], ...] = ()
    #: What each negation negates (`_negated`): its next content word, stemmed, sorted.
    negated: tuple[str, ...] = ()

    @property
    def negations(self) -> int:
        """How many negations the text holds ("not", "never", "n't", ...)."""
        return len(self.negated)

    @property
    def subject_names(self) -> frozenset[str]:
        """The first group of names: who the sentence is about."""
        return self.name_groups[0] if self.name_groups else frozenset()

    def of_kind(self, kind: Detail) -> tuple[str, ...]:
        """The canonical values of one kind, sorted."""
        for value_kind, values in self.values:
            if value_kind == kind:
                return values
        return ()


def _cut(text: str, span: tuple[int, int]) -> str:
    # Replace rather than delete, so offsets of later matches stay valid.
    start, end = span
    return text[:start] + " " * (end - start) + text[end:]


def _date_value(year: str | None, month: int | None, day: str | None) -> str:
    day_digits = re.sub(r"\D", "", day) if day else None
    return "-".join(
        [year or "?", f"{month:02d}" if month else "?", f"{int(day_digits):02d}" if day_digits else "?"]
    )


def _month(name: str) -> int:
    return _MONTHS[name.casefold().rstrip(".")]


def _collect(pattern: re.Pattern[str], text: str) -> tuple[list[re.Match[str]], str]:
    matches = list(pattern.finditer(text))
    for match in matches:
        text = _cut(text, match.span())
    return matches, text


def _trim_url(url: str) -> str:
    return url.rstrip(".,;:!?").rstrip("/")


def _extract_locations(text: str, found: dict[Detail, list[str]]) -> str:
    matches, text = _collect(_URL, text)
    found[Detail.URL] += [_trim_url(m.group(0)) for m in matches]
    matches, text = _collect(_EMAIL, text)
    found[Detail.URL] += [m.group(0).casefold() for m in matches]
    for pattern in (_WINDOWS_PATH, _ABSOLUTE_PATH):
        matches, text = _collect(pattern, text)
        found[Detail.PATH] += [m.group(0).rstrip(".,;:!?") for m in matches]
    for match in list(_RELATIVE_PATH.finditer(text)):
        path = match.group(0).rstrip(".,;:!?")
        segments = path.rstrip("/").split("/")
        # "and/or", "TCP/IP" are words; "src/cli.py" and "a/b/c" are paths.
        if len(segments) >= 3 or _FILE_NAME.fullmatch(segments[-1]):
            found[Detail.PATH].append(path)
            text = _cut(text, match.span())
    matches, text = _collect(_FILE_NAME, text)
    found[Detail.PATH] += [m.group(0) for m in matches]
    matches, text = _collect(_IPV4, text)
    found[Detail.HOST] += [m.group(0) for m in matches]
    matches, text = _collect(_HOST_NAME, text)
    found[Detail.HOST] += [m.group(0).casefold() for m in matches]
    return text


def _extract_versions(text: str, found: dict[Detail, list[str]]) -> str:
    for pattern in (_PREFIXED_VERSION, _DOTTED_VERSION):
        matches, text = _collect(pattern, text)
        found[Detail.VERSION] += [m.group(0).casefold().lstrip("v") for m in matches]
    for match in list(_DECIMAL.finditer(text)):
        before = text[: match.start()].split()
        previous = before[-1] if before else ""
        # "Python 3.11", "version 2.4": a decimal right after a product name or "version" is a version.
        if previous.casefold() in _VERSION_WORDS or (previous[:1].isupper() and previous.isalpha()):
            found[Detail.VERSION].append(match.group(0))
            text = _cut(text, match.span())
    return text


def _extract_dates(text: str, found: dict[Detail, list[str]]) -> str:
    matches, text = _collect(_ISO_DATE, text)
    found[Detail.DATE] += [_date_value(m[1], int(m[2]), m[3]) for m in matches]
    matches, text = _collect(_NUMERIC_DATE, text)
    found[Detail.DATE] += [f"{m[1]}/{m[2]}/{m[3]}" for m in matches]  # day/month order is ambiguous
    matches, text = _collect(_DAY_MONTH, text)
    found[Detail.DATE] += [_date_value(m[3], _month(m[2]), m[1]) for m in matches]
    matches, text = _collect(_MONTH_DAY, text)
    found[Detail.DATE] += [_date_value(m[3], _month(m[1]), m[2]) for m in matches]
    matches, text = _collect(_MONTH_YEAR, text)
    found[Detail.DATE] += [_date_value(m[2], _month(m[1]), None) for m in matches]
    matches, text = _collect(_LONE_MONTH, text)
    found[Detail.DATE] += [_date_value(None, _month(m[1]), None) for m in matches]
    matches, text = _collect(_WEEKDAY, text)
    found[Detail.DATE] += [m[1].casefold() for m in matches]
    matches, text = _collect(_LONE_YEAR, text)
    found[Detail.DATE] += [m[1] for m in matches]
    matches, text = _collect(_CLOCK_TIME, text)
    for m in matches:
        if m[1] is not None:
            hour = int(m[1]) % 12 + (12 if m[3].casefold() == "p" else 0)
            found[Detail.DATE].append(f"{hour:02d}:{m[2] or '00'}")
        else:
            found[Detail.DATE].append(f"{int(m[4]):02d}:{m[5]}")
    return text


def _number_value(match: re.Match[str]) -> str:
    """A number's canonical spelling: sign, digits, currency, "%", "+" ("-$5" and "$-5" are "-5$")."""
    sign = (match["sign"] or match["joined"] or match["signed"] or "").replace("\u2212", "-")
    # "1,000" is a thousand; "3,5" stays as written.
    digits = re.sub(r",(?=\d{3}\b)", "", match["digits"]).casefold()
    currency = match["cur"] or match["post"] or match["spaced"] or ""
    return f"{sign}{digits}{currency}{match['percent'] or ''}{match['plus'] or ''}"


def _extract_numbers(text: str, found: dict[Detail, list[str]]) -> str:
    matches, text = _collect(_NUMBER, text)
    found[Detail.NUMBER] += [_number_value(m) for m in matches]
    matches, text = _collect(_NUMBER_WORD, text)
    found[Detail.NUMBER] += [NUMBER_WORDS[m[1].casefold()] for m in matches]
    return text


def _is_negation(word: str) -> bool:
    return word in _NEGATION_WORDS or word.endswith("n't")


#: How many words after a negation its negated word may be ("does not really drink" -> "drink").
_NEGATION_REACH = 3


def _negated(text: str) -> tuple[str, ...]:
    """What each negation negates: the first content word after it within `_NEGATION_REACH`
    words, stemmed, sorted ("" when none is that near). "Sam does not like tea" negates "tea" ("like"
    is a stopword), "Sam likes tea, not coffee" negates "coffee": one negation each, another fact.
    Their count is the text's number of negations."""
    folded = unicodedata.normalize("NFKC", text).casefold().replace("’", "'").replace("ʼ", "'")
    words = _NEGATION_TOKEN.findall(folded)
    negated = []
    for index, word in enumerate(words):
        if not _is_negation(word):
            continue
        after = [w for w in words[index + 1 : index + 1 + _NEGATION_REACH] if not _is_negation(w)]
        targets = [t for w in after for t in content_tokens(w)]
        negated.append(targets[0] if targets else "")
    return tuple(sorted(negated))


@functools.lru_cache(maxsize=8192)
def _fold_word(word: str) -> str:
    # Names repeat across cards; one word's normal form is worth remembering (a few MB at most).
    return normalize_text(word)


def _names(
    text: str,
) -> tuple[tuple[str, ...], tuple[frozenset[str], ...], tuple[tuple[str, frozenset[NameRole]], ...]]:
    """Capitalised names in order, the same names grouped where joined by "and", and their roles."""
    ordered: list[str] = []
    roles: dict[str, set[NameRole]] = {}
    groups: list[set[str]] = []
    current: set[str] = set()
    previous_end = 0
    marker: NameRole | None = None
    for match in _NAME_WORD.finditer(text):
        raw = match.group(0)
        word = _POSSESSIVE_SUFFIX.sub("", raw)
        folded = _fold_word(word)
        # Only the gap since the previous word can end a sentence (words hold no punctuation).
        gap = text[previous_end : match.start()]
        starts_sentence = (previous_end == 0 and not gap.strip()) or bool(_SENTENCE_END.search(gap))
        previous_end = match.end()
        is_name = (
            word.lstrip("@#")[:1].isupper()
            and folded not in _NOT_NAMES
            and not folded.isdigit()
            and not (starts_sentence and folded in _SENTENCE_STARTERS)
        )
        if is_name:
            current.add(folded)
            if folded not in ordered:
                ordered.append(folded)
            played = roles.setdefault(folded, set())
            if marker is not None:
                played.add(marker)
            if word != raw:
                played.add(NameRole.POSSESSOR)
            continue
        # "with Sam and Evan": a marker covers the names it is followed by, joined by "and".
        if folded == "and" and current:
            continue
        marker = NameRole(_ROLE_MARKERS[folded]) if folded in _ROLE_MARKERS else None
        if current:
            groups.append(current)
            current = set()
    if current:
        groups.append(current)
    name_roles = tuple(
        (name, frozenset(roles[name]) if roles[name] else frozenset({NameRole.PLAIN})) for name in ordered
    )
    return tuple(ordered), tuple(frozenset(group) for group in groups), name_roles


def protected_details(text: str) -> ProtectedDetails:
    """Extract the protected details of a text (its leading date clause excluded)."""
    body = without_leading_date_clause(text)
    found: dict[Detail, list[str]] = {kind: [] for kind in Detail}
    rest = _extract_locations(body, found)
    names, name_groups, name_roles = _names(rest)
    rest = _extract_versions(rest, found)
    rest = _extract_dates(rest, found)
    rest = _extract_numbers(rest, found)
    values = tuple((kind, tuple(sorted(found[kind]))) for kind in Detail if found[kind])
    return ProtectedDetails(
        values=values,
        negated=_negated(body),
        names=names,
        name_groups=name_groups,
        residual_tokens=tuple(content_tokens(rest)),
        name_roles=name_roles,
    )
