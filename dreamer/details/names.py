"""Names in a text: who it is about and, with the other names, who did what to whom.

A name is a capitalised word that is not a stopword, a month, a weekday, a number word or a
common noun starting a sentence; names joined by "and" form one group, and the words around a
name tell the part it plays (`NameRole`). Read on the text once its locations are cut out, as
`dreamer.details.protected_details` orders the finders.
"""

from __future__ import annotations

import functools
import re

from dreamer.details.dates import MONTHS, WEEKDAYS
from dreamer.details.kinds import NameRole
from dreamer.text import NUMBER_WORDS, STOPWORDS, normalize_text, stem

__all__ = ["ACT_STEMS", "find_names"]

# A name is one normalised word (`dreamer.text`): a "." between digits, a leading "@" or "#" and a
# trailing "+" or "#" belong to it, so "C++", "C#" and "@Alice" are not "C" and "Alice".
_NAME_WORD = re.compile(
    r"(?:(?<!\w)[@#])?[^\W_]+(?:(?:['’ʼ]|(?<=\d)\.(?=\d))[^\W_]+)*(?:\++(?![\w+])|#(?![\w#]))?"
)
_POSSESSIVE_SUFFIX = re.compile(r"['’ʼ]s$")
_NOT_NAMES = frozenset(STOPWORDS | set(MONTHS) | set(WEEKDAYS) | set(NUMBER_WORDS))
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
#: Stems of nouns of an act one person does for another: "Evan's support" is Evan's doing, so
#: "Sam is grateful for Evan's support" and "Evan supports Sam" tell of one act by Evan.
ACT_STEMS = frozenset(
    stem(word)
    for word in (
        "support", "supportive", "encouragement", "encouraging", "help", "offer", "suggestion",
        "recommendation", "advice", "invitation", "kindness", "kind", "guidance", "motivation",
        "belief", "feedback", "praise", "compliment", "compliments", "words", "reassurance", "cheering",
    )
)  # fmt: skip


@functools.lru_cache(maxsize=8192)
def _fold_word(word: str) -> str:
    # Names repeat across cards; one word's normal form is worth remembering (a few MB at most).
    return normalize_text(word)


def find_names(
    text: str,
) -> tuple[tuple[str, ...], tuple[frozenset[str], ...], tuple[tuple[str, frozenset[NameRole]], ...]]:
    """Capitalised names in order, the same names grouped where joined by "and", and their roles."""
    ordered: list[str] = []
    roles: dict[str, set[NameRole]] = {}
    groups: list[set[str]] = []
    current: set[str] = set()
    previous_end = 0
    marker: NameRole | None = None
    possessor: str | None = None  # the name written "X's" just before this word
    for match in _NAME_WORD.finditer(text):
        raw = match.group(0)
        word = _POSSESSIVE_SUFFIX.sub("", raw)
        folded = _fold_word(word)
        if possessor is not None and stem(folded) in ACT_STEMS:
            roles[possessor].add(NameRole.DOER)
        possessor = None
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
                possessor = folded
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
