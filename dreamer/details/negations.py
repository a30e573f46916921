"""Negations in a text, each known by what it negates ("Sam does not like tea" negates "tea").

Read on the whole text (its leading date clause excluded), not on what the value finders left,
so the words a negation reaches are the words the text says.
"""

from __future__ import annotations

import re
import unicodedata

from dreamer.text import content_tokens

__all__ = ["negated_words"]

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


def _is_negation(word: str) -> bool:
    return word in _NEGATION_WORDS or word.endswith("n't")


#: How many words after a negation its negated word may be ("does not really drink" -> "drink").
_NEGATION_REACH = 3

#: Words that make one negation with the word before it: "no longer has a dog" negates "dog".
_NEGATION_TAILS = frozenset({"longer", "more"})


def negated_words(text: str) -> tuple[str, ...]:
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
        start = index + 1
        while start < len(words) and words[start] in _NEGATION_TAILS:
            start += 1
        after = [w for w in words[start : start + _NEGATION_REACH] if not _is_negation(w)]
        targets = [t for w in after for t in content_tokens(w)]
        negated.append(targets[0] if targets else "")
    return tuple(sorted(negated))
