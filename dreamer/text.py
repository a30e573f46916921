"""Canonical text for comparing cards, and the content-derived document id a card is promoted under.

`normalize_text` is what "the same text" means everywhere in the roll-up: Unicode NFKC, case-folded,
punctuation removed, whitespace collapsed, and leading date clauses ("On 8 May 2023, ...", "Yesterday,
...", "2023-05-08: ...") dropped, because the same fact restated on another day must still compare
equal. Dates *inside* a sentence are kept: they are part of the fact.

Punctuation goes, but not the symbols that change what a word means: a number's sign ("-5" and
"−5" are not "5"; a hyphen after a letter or a digit is no sign: "COVID-19", "5-10"), its currency
("$100", "100 $" and "100$" are all "100$", not "100"), "%" ("50 %" is "50%") and a trailing "+"
("5+"); a decimal point between digits ("10.5" is neither "105" nor "10 5"); "C++", "g++", "C#",
"F#", "A+" (one "+" after a longer word goes: "LGBTQ+" is "lgbtq"), "@alice" and "#general".
"," before three digits is a thousands separator ("1,000" is "1000"); dashes between words are
spaces ("well-known" is "well known"), as are quotes and trailing punctuation; apostrophes join
("don't" is "dont", a possessive "'s" goes). The result is a fixed point: normalising it again
changes nothing.

`card_document_id` hashes the profile, the normalised text and the normalisation rule
(`NORMALIZATION_RULE`), so a card re-sent after a crash keeps its id, two cards of a profile share
an id only if their normalised texts are equal, which dedup already judges a duplicate before
anything is sent (``docs/design/rollup.md``), and an id made under an older rule is never given to
another text. Why these symbols: ``docs/design/dedup.md`` ("What normalisation keeps").
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import re
import unicodedata

__all__ = [
    "CURRENCY_SYMBOLS",
    "NORMALIZATION_RULE",
    "EmptyCardTextError",
    "InvalidProfileError",
    "card_document_id",
    "content_tokens",
    "normalize_text",
    "normalize_text_keeping_dates",
    "shingles",
    "stem",
    "strip_leading_date_clause",
    "tokens",
    "without_leading_date_clause",
]


class EmptyCardTextError(ValueError):
    """The card text is empty once normalised, so it has no content to derive a document id from."""


class InvalidProfileError(ValueError):
    """The profile name cannot be part of a document id (empty, or contains whitespace or ':')."""


# --- leading date clauses -------------------------------------------------------------------------
# Matched on the already normalised form (lower case, single spaces, no punctuation but the kept
# symbols: a decimal point joins "08.05.2023" and "10.30"), so that stripping is idempotent: a clause
# that survives normalisation is still recognised.

_MONTH = (
    r"(?:january|february|march|april|may|june|july|august|september|october|november|december"
    r"|jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec)"
)
_WEEKDAY = r"(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)"
_DAY = r"(?:[0-3]?\d(?:st|nd|rd|th)?)"
_YEAR = r"(?:1[89]\d\d|2[01]\d\d)"
_PART_OF_DAY = r"(?:morning|afternoon|evening|night)"
_COUNT = (
    r"(?:\d+|a|an|one|two|three|four|five|six|seven|eight|nine|ten|a few|a couple of|a couple|couple of"
    r"|several|few)"
)
_UNIT_OF_TIME = r"(?:day|week|weekend|month|year|fortnight)s?"
_CLOCK = r"(?:[0-2]?\d(?:[ .][0-5]\d){0,2} ?(?:am|pm|a m|p m)|[0-2]?\d[ .][0-5]\d(?:[ .][0-5]\d)?)"

# A unit that is a date on its own, with or without a preposition in front.
_BARE_DATE = "|".join(
    [
        # 2023-05-08, optionally with a time, seconds, fraction and offset
        rf"{_YEAR}[ .][01]?\d[ .][0-3]?\d"
        r"(?:(?: |t| t)[0-2]?\d [0-5]\d(?: [0-5]\d)?(?:[ .]\d+)?z?(?: [0-2]\d(?: [0-5]\d)?)?)?",
        rf"[0-3]?\d[ .][01]?\d[ .]{_YEAR}",  # 08/05/2023, 08.05.2023
        rf"(?:{_WEEKDAY} )?(?:the )?{_DAY} (?:of )?{_MONTH}(?: {_YEAR})?",  # 8 May 2023, the 8th of May
        rf"(?:{_WEEKDAY} )?{_MONTH} (?:the )?{_DAY}(?: {_YEAR})?",  # May 8, 2023
        rf"{_MONTH} {_YEAR}",  # June 2023
        rf"{_WEEKDAY}(?: {_PART_OF_DAY})?",  # Tuesday, Tuesday evening
        r"yesterday|today|tonight|recently|lately|earlier today|the other day|over the weekend",
        rf"(?:this|last|next|earlier this|later this|past)"
        rf" (?:{_PART_OF_DAY}|{_UNIT_OF_TIME}|{_WEEKDAY}|{_MONTH})",
        rf"(?:the )?{_COUNT} {_UNIT_OF_TIME} ago",
        rf"(?:the )?{_COUNT} {_UNIT_OF_TIME} later",
    ]
)
# A unit that only reads as a date after a preposition ("in May", "in 2023", "at 7:37 pm").
_PREPOSITION_ONLY = "|".join([_MONTH, _YEAR, _CLOCK, rf"the {_PART_OF_DAY}", r"the weekend"])
_PREPOSITION = r"(?:on|in|at|as of|around|during|over)"

_DATE_UNIT = rf"(?:(?:{_PREPOSITION} )?(?:{_BARE_DATE})|{_PREPOSITION} (?:{_PREPOSITION_ONLY}))"
_FIRST_DATE_UNIT = re.compile(rf"^{_DATE_UNIT}(?: |$)")
# "on 8 may 2023 and at 7 37 pm": later units of the same clause may be joined by "and".
_NEXT_DATE_UNIT = re.compile(rf"^(?:and )?{_DATE_UNIT}(?: |$)")


def strip_leading_date_clause(normalized: str) -> str:
    """Drop leading date/time clauses from already normalised text; keep the text if nothing else remains."""
    rest = normalized
    pattern = _FIRST_DATE_UNIT
    while (match := pattern.match(rest)) is not None:
        rest = rest[match.end() :]
        pattern = _NEXT_DATE_UNIT
    return rest if rest else normalized


# --- normalisation --------------------------------------------------------------------------------

_POSSESSIVE = re.compile(r"['’ʼ]s\b")
_APOSTROPHE = re.compile(r"['’ʼ]")

#: Currency symbols (Unicode category Sc) as NFKC leaves them; their full-width forms fold to these.
CURRENCY_SYMBOLS = (
    "$\u00a2-\u00a5\u058f\u060b\u07fe\u07ff\u09f2\u09f3\u09fb\u0af1\u0bf9\u0e3f\u17db"
    "\u20a0-\u20a7\u20a9-\u20c0\ua838\U00011fdd-\U00011fe0\U0001e2ff\U0001ecb0"
)
# A word: letters and digits of any script (Python's \w without "_"), joined by "." between two
# digits ("10.5", "3.11.2") and by "," before a group of three digits (dropped: "1,000" is "1000").
_WORD_REST = r"[^\W_]*(?:(?:(?<=\d)\.(?=\d)|(?<=\d),(?=\d{3}(?!\d)))[^\W_]+)*"
# Every other character separates words, except the symbols that carry meaning next to a word: a
# number's sign, currency, "%" and trailing "+" ("-5", "$100", "100 €", "50%", "5+"), and a word's
# trailing "++", "#" or "+" (this after one or two letters only: "C++", "C#", "A+", not "LGBTQ+")
# and leading "@" or "#" ("@alice", "#general"). A sign counts only
# where it cannot be a hyphen or a range ("COVID-19", "5-10", "2023-05-08" keep none), and a "+"
# after a letter is one ("UTC+5" is "utc +5", where "UTC-5" is "utc 5").
_TOKEN = re.compile(
    rf"""
    (?=[^\W_]|[+\-@\#{CURRENCY_SYMBOLS}])  # where a word can start (the scan skips the rest fast)
    (?:
        (?:
            (?:(?<![\w.,+\-])(?P<sign>[+\-])|(?<=[^\W\d_])(?P<joined>\+))(?P<pre>[{CURRENCY_SYMBOLS}])?
          | (?P<cur>[{CURRENCY_SYMBOLS}])\s?(?P<signed>[+\-])?
        )?
        (?P<number>\d{_WORD_REST})
        (?(pre)|(?(cur)|(?:(?P<post>[{CURRENCY_SYMBOLS}])|\s(?P<spaced>[{CURRENCY_SYMBOLS}])(?!\s?[+\-]?\d))?))
        (?:\s?(?P<percent>%))?
        (?P<plus>\++(?![\w+]))?
      |
        (?:(?<!\w)(?P<mark>[@\#]))?
        (?P<word>[^\W\d_]{_WORD_REST})
        (?P<tail>\++(?![\w+])|\#(?![\w#]))?
    )
    """,
    re.VERBOSE,
)


#: Format characters (zero-width spaces and joiners, soft hyphens, bidi marks): invisible, so two
#: texts that differ only by them read the same and must compare the same ("a\u200btlas" is "atlas").
_FORMAT_CHARACTERS = re.compile(
    r"[\u00ad\u061c\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u206f\ufeff]"
)


def _fold(text: str) -> str:
    # NFKC again after casefold: casefolding can decompose a character NFKC would compose back.
    # The minus sign is a hyphen-minus once folded: "−5" and "-5" are the same number.
    visible = _FORMAT_CHARACTERS.sub("", text)
    folded = unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", visible).casefold())
    return folded.replace("\u2212", "-")



def _token(match: re.Match[str]) -> str:
    """One word as normalised: a number as sign, digits, currency, "%", "+" ("-$5" is "-5$")."""
    word = match.group(0)
    if word.isalnum():
        return word
    if match["word"] is not None:
        # One "+" after a word longer than two letters is a mark, not a name: "LGBTQ+" is "lgbtq".
        tail = "" if match["tail"] == "+" and len(match["word"]) > 2 else match["tail"] or ""
        return (match["mark"] or "") + match["word"].replace(",", "") + tail
    return "".join(
        (
            match["sign"] or match["joined"] or match["signed"] or "",
            match["number"].replace(",", ""),
            match["pre"] or match["cur"] or match["post"] or match["spaced"] or "",
            match["percent"] or "",
            match["plus"] or "",
        )
    )


# Without any of these, the words are the runs of letters and digits (most texts: the fast way).
_NON_WORD = re.compile(r"[\W_]+")
_KEPT_SYMBOL = re.compile(rf"[+#@%{CURRENCY_SYMBOLS}]")
_NEAR_DIGIT = re.compile(r"[\-.,]\d")  # a sign, a decimal point or a thousands separator, maybe


def _words_only(text: str) -> str:
    without_possessive = _POSSESSIVE.sub("", text)
    without_apostrophes = _APOSTROPHE.sub("", without_possessive)
    if _KEPT_SYMBOL.search(without_apostrophes) is None and _NEAR_DIGIT.search(without_apostrophes) is None:
        return _NON_WORD.sub(" ", without_apostrophes).strip()
    return " ".join(_token(match) for match in _TOKEN.finditer(without_apostrophes))


def normalize_text(text: str) -> str:
    """Return the canonical form used to compare card texts.

    >>> normalize_text("On 8 May 2023, Evan’s  NEW job—at ACME!")
    'evan new job at acme'
    >>> normalize_text("The UTC offset is −5 hours; C++ costs $1,000.50.")
    'the utc offset is -5 hours c++ costs 1000.50$'
    """
    return strip_leading_date_clause(normalize_text_keeping_dates(text))


# A raw word as the normaliser joins it; a word's sign or currency, and NFKC or case folding that
# splits a word, can still make the n-th raw word miss the n-th normalised one (then `_WORD_START`).
_RAW_WORD = re.compile(r"[^\W_]+(?:(?:['’ʼ]|(?<=\d)[.,](?=\d)|(?<=[^\W\d_])\+(?=[^\W_]))[^\W_]+)*")
_WORD_START = re.compile(r"(?<!\w)\S")


def without_leading_date_clause(text: str) -> str:
    """The NFKC text with its leading date clause removed, case and punctuation kept.

    >>> without_leading_date_clause("On 8 May 2023, Evan met Sam.")
    'Evan met Sam.'
    >>> without_leading_date_clause("On 8 May, -5 degrees was the low.")
    '-5 degrees was the low.'
    """
    nfkc = unicodedata.normalize("NFKC", text)
    all_words = normalize_text_keeping_dates(nfkc)
    body = strip_leading_date_clause(all_words)
    dropped = len(all_words.split()) - len(body.split())
    if dropped <= 0:
        return nfkc.strip()
    # Mostly the n-th raw word starts the body; else the first place after which the text reads as it.
    guess = next((m.start() for i, m in enumerate(_RAW_WORD.finditer(nfkc)) if i == dropped), None)
    if guess is not None and normalize_text_keeping_dates(nfkc[guess:]) == body:
        return nfkc[guess:].strip()
    # The clause is a few words long: look no further than a few places per word it dropped.
    for match in itertools.islice(_WORD_START.finditer(nfkc), 4 * dropped + 8):
        if normalize_text_keeping_dates(nfkc[match.start() :]) == body:
            return nfkc[match.start() :].strip()
    return nfkc.strip()


def normalize_text_keeping_dates(text: str) -> str:
    """Like `normalize_text`, but a leading date clause is kept."""
    # Remembered: analysing one text normalises it whole three times and each of its words once,
    # and the same words recur from card to card. Words in a bounded cache, a few whole texts of
    # up to a card's length in another (under a MiB together, for the life of the process).
    if len(text) <= _WORD_CACHED:
        return _normalize_word(text)
    if len(text) <= _TEXT_CACHED:
        return _normalize_recent(text)
    return _normalize(text)


def _normalize(text: str) -> str:
    # The second fold/clean pass makes the result a fixed point even for characters whose
    # case-folded form contains something punctuation-like.
    return _words_only(_fold(_words_only(_fold(text))))


#: The longest text remembered among the words (at most 4,096 of them), and among the recent texts.
_WORD_CACHED = 40
_TEXT_CACHED = 2_000
_normalize_word = functools.lru_cache(maxsize=4096)(_normalize)
_normalize_recent = functools.lru_cache(maxsize=8)(_normalize)


def tokens(text: str) -> list[str]:
    """The words of the normalised text, in order."""
    normalized = normalize_text(text)
    return normalized.split(" ") if normalized else []


def shingles(text: str, n: int = 3) -> frozenset[str]:
    """Character n-grams of the normalised text (spaces included): overlap that tolerates typos."""
    if n < 1:
        raise ValueError(f"shingle size must be at least 1, got {n}")
    normalized = normalize_text(text)
    if len(normalized) <= n:
        return frozenset([normalized]) if normalized else frozenset()
    return frozenset(normalized[i : i + n] for i in range(len(normalized) - n + 1))


# --- content words --------------------------------------------------------------------------------

# Function words carry no fact. Negations are listed too: overlap should measure the topic, while
# a flipped negation is caught separately as a protected detail.
_STOPWORD_LIST = """
    a an the and or but if then than so as of at by for with about against between into through during
    before after above below to from up down in out on off over under again further once here there when
    where why how all any both each few more most other some such only own same too very can will just
    should now i me my myself we our ours ourselves you your yours yourself yourselves he him his himself
    she her hers herself it its itself they them their theirs themselves what which who whom this that
    these those am is are was were be been being have has had having do does did doing would could might
    must shall may also s t d ll m o re ve y not no nor never dont doesnt didnt isnt arent wasnt werent
    cant cannot couldnt wont wouldnt shouldnt hasnt havent hadnt neither none nobody nothing nowhere
    something someone anything anyone everything everyone really quite still even much many lot lots
    get gets got getting make makes made making like likes well one ones thing things way
    currently recently finally actually always
"""
STOPWORDS: frozenset[str] = frozenset(_STOPWORD_LIST.split())

_DOUBLE_CONSONANT = re.compile(r"([b-df-hj-np-tv-z])\1$")


def stem(word: str) -> str:
    """A deliberately light suffix stripper: enough to match "appreciates" with "appreciated"."""
    if len(word) <= 3 or not word.isalpha():
        return word
    if word.endswith("ies") and len(word) > 4:
        word = word[:-3] + "y"
    elif word.endswith("sses"):
        word = word[:-2]
    elif word.endswith("s") and not word.endswith(("ss", "us", "is")):
        word = word[:-1]
    if word.endswith("ing") and len(word) > 5:
        word = word[:-3]
    elif word.endswith("ed") and len(word) > 4:
        word = word[:-2]
    if _DOUBLE_CONSONANT.search(word) and not word.endswith(("ll", "ss", "zz")):
        word = word[:-1]
    if word.endswith("e") and len(word) > 4:
        word = word[:-1]
    return word


# Summaries report speech ("Sam mentioned his new router"); the reporting verb is
# narration, not part of the fact, so it must not make two statements of one fact look different.
NARRATION_STEMS: frozenset[str] = frozenset(
    {"mention", "express", "discuss", "tell", "told", "say", "said", "talk", "explain", "describ"}
)


# Spelled-out numbers, as digits, so "two turtles" and "2 turtles" are the same words.
# "one" is left out on purpose: it is mostly a pronoun ("one of their games"), and "a"/"an" say the same.
NUMBER_WORDS: dict[str, str] = {
    "zero": "0", "two": "2", "three": "3", "four": "4", "five": "5", "six": "6", "seven": "7",
    "eight": "8", "nine": "9", "ten": "10", "eleven": "11", "twelve": "12", "thirteen": "13",
    "fourteen": "14", "fifteen": "15", "sixteen": "16", "seventeen": "17", "eighteen": "18",
    "nineteen": "19", "twenty": "20", "thirty": "30", "forty": "40", "fifty": "50", "sixty": "60",
    "seventy": "70", "eighty": "80", "ninety": "90", "hundred": "100", "thousand": "1000",
    "million": "1000000", "billion": "1000000000", "dozen": "12", "half": "0.5", "twice": "2x",
    "first": "1st", "second": "2nd", "third": "3rd", "fourth": "4th", "fifth": "5th", "sixth": "6th",
    "seventh": "7th", "eighth": "8th", "ninth": "9th", "tenth": "10th", "eleventh": "11th",
    "twelfth": "12th", "hundredth": "100th",
}  # fmt: skip


def content_tokens(text: str) -> list[str]:
    """Stemmed normalised words without stopwords or narration verbs, in order: what similarity counts."""
    stems = (NUMBER_WORDS.get(word) or stem(word) for word in tokens(text) if word not in STOPWORDS)
    return [word for word in stems if word not in NARRATION_STEMS]


# --- document ids ---------------------------------------------------------------------------------

_PROFILE_FORBIDDEN = re.compile(r"[\s:]")

#: The normalisation a document id is made with, part of its digest. Bump it whenever
#: `normalize_text` changes: an id made under an older rule then never equals one made now, so a
#: text that rule normalised alike with another ("5 hours" as "-5 hours" was) cannot take the id the
#: other card was promoted under and replace it upstream. 1 (no marker): signs, currency, "%",
#: decimal points, "C++" dropped; 2: kept.
NORMALIZATION_RULE = 2


def card_document_id(profile: str, text: str) -> str:
    """The backend document id for a card: `rollup:<profile>:<first 32 hex of sha256>`.

    The hash covers the profile, the normalised text and `NORMALIZATION_RULE`, so the id is stable
    across retries and cosmetic rewrites (case, punctuation, a leading date clause), and differs for
    any change of words, of a number's sign or currency, or of the normalisation rule.
    """
    if not profile or _PROFILE_FORBIDDEN.search(profile):
        raise InvalidProfileError(
            f"profile {profile!r} cannot be used in a document id: use a non-empty name without spaces or ':'"
        )
    normalized = normalize_text(text)
    if not normalized:
        raise EmptyCardTextError(
            f"card text {text!r} has no words once normalised: drop the card instead of promoting it"
        )
    digest = hashlib.sha256(f"{profile}\n{normalized}\nrule {NORMALIZATION_RULE}".encode()).hexdigest()
    return f"rollup:{profile}:{digest[:32]}"


# Characters a terminal acts on instead of showing: C0/C1 controls (ANSI escapes), format characters
# (bidi overrides, zero-width), line and paragraph separators. The zero-width joiner stays: emoji
# sequences need it and it moves no text.
_HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp"})
_KEPT = frozenset({"\n", "\t", "\u200d"})


def printable(text: str, *, keep_newlines: bool = True) -> str:
    """``text`` safe to print on a terminal: every character a terminal would act on (an ANSI
    escape, a right-to-left override, a zero-width space) is shown as its escape (``\\x1b``,
    ``\\u202e``). For output to people only; JSON output keeps the exact text."""
    kept = _KEPT if keep_newlines else _KEPT - {"\n"}
    if text.isprintable() and "\u200d" not in text:
        return text
    return "".join(
        ch
        if ch in kept or unicodedata.category(ch) not in _HIDDEN_CATEGORIES
        else ch.encode("unicode_escape").decode("ascii")
        for ch in text
    )


def has_hidden_characters(text: str) -> bool:
    """Whether ``text`` holds a character a reader cannot see: a format character (zero-width,
    bidi) or a control other than newline and tab. Of two texts that compare the same, the one
    without is the one to show."""
    if text.isprintable():
        return False
    return any(ch not in "\n\t" and unicodedata.category(ch) in _HIDDEN_CATEGORIES for ch in text)

def well_formed(text: str) -> str:
    """``text`` with each lone surrogate (from a JSON ``\\ud800`` escape, or a command-line
    argument that was not UTF-8) replaced by U+FFFD: such a string cannot be encoded for a server
    or a database, so the whole memory would be lost for one character."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text
