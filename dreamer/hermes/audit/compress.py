"""Compressing long memory entries (the contract's `compress_entries`): shorter wording, every detail kept.

`compress_by_rules` rewrites by fixed rules with no model: wordy phrases to short ones ("in order
to" → "to"), filler openers and adverbs dropped, negations contracted, number words to digits,
spaces collapsed. `rewrite_refusal` is the gate every rewrite passes, by rules or by a model: it
must be shorter, non-empty, one entry (no line holding only "§"), no canary marker, keep an
[UNVERIFIED] mark, and keep every
protected detail of the original (numbers, dates, versions, URLs, hosts, paths, names, and the
count of negations; :mod:`dreamer.details`). A rewrite that fails the gate is dropped and the entry
stays as it is. Pure: no I/O. Why: docs/design/hermes-audit.md.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from dreamer.details import protected_details
from dreamer.hermes.audit.canary import CANARY_MARKER
from dreamer.hermes.audit.planner import UNVERIFIED_MARK
from dreamer.hermes.memory.entries import has_delimiter_line

__all__ = [
    "Compressor",
    "Rewrite",
    "RuleCompressor",
    "compress_by_rules",
    "lost_details",
    "rewrite_refusal",
]


@dataclass(frozen=True)
class Rewrite:
    """A shorter wording of one entry, and what produced it ("rules" or "reflect")."""

    text: str
    method: str


class Compressor(Protocol):
    """Anything that proposes shorter wordings for entries (only gated ones come back); `notes`
    says what it rejected or could not do, `llm_counts` the LLM tokens it used."""

    notes: list[str]

    def rewrite(self, entries: Sequence[str]) -> Mapping[str, Rewrite]:
        """For some of `entries`, a shorter wording that kept every protected detail."""
        ...

    def llm_counts(self) -> Mapping[str, int]:
        """The LLM tokens it used, under the run record's ``llm_*`` names; empty without an LLM."""
        ...


_PHRASES: tuple[tuple[str, str], ...] = (
    (r"in order to", "to"),
    (r"so as to", "to"),
    (r"due to the fact that", "because"),
    (r"owing to the fact that", "because"),
    (r"in spite of the fact that", "although"),
    (r"at this point in time", "now"),
    (r"at the present time", "now"),
    (r"for the purpose of", "for"),
    (r"in the event that", "if"),
    (r"in the process of", ""),
    (r"(?:is|are) able to", "can"),
    (r"(?:has|have) the ability to", "can"),
    (r"a large number of", "many"),
    (r"a majority of", "most"),
    (r"with regards? to", "about"),
    (r"in regards? to", "about"),
    (r"prior to", "before"),
    (r"subsequent to", "after"),
    (r"as well as", "and"),
    (r"make sure that", "ensure"),
    (r"(?:which|that) is (?:located|situated|running|hosted) (?:at|on)", "at"),
    (r"(?:which|that) (?:is|are) called", "called"),
    (r"approximately", "about"),
    (r"had a conversation", "talked"),
    (r"(?:is|are) going to", "will"),
    (r"was going to", "would"),
    (r"despite the fact that", "although"),
    (r"in the future", "later"),
    (r"a lot of", "many"),
    (r"each and every", "every"),
    (r"first of all", "first"),
    (r"which means that", "so"),
    (r"(you|we) (?:need|have) to", r"\1 must"),
    (r"it is worth noting that", ""),
    (r"it should be noted that", ""),
    (r"it is (?:necessary|required) to", "must"),
    (r"can be (?:reached|found|accessed) (at|on|via)", r"is \1"),
    (r"(?:is|are) located (in|at|on)", r"is \1"),
    (r"is running on", "runs on"),
    (r"are running on", "run on"),
    (r"for example", "e.g."),
    (
        r"((?:said|says|mentioned|mentions|explained|explains|agreed|agrees|noted|notes|felt|feels|thinks"
        r"|thought|believes|believed|hoped|hopes|shared|shares|realized|realizes|decided|decides|added|adds"
        r"|knows|knew|stated|states|confirmed|confirms|told \w+|tells \w+)) that",
        r"\1",
    ),
    (r"(?:basically|actually|essentially|literally|really|very|quite|simply) ", ""),
    (r"do not", "don't"),
    (r"does not", "doesn't"),
    (r"did not", "didn't"),
    (r"is not", "isn't"),
    (r"are not", "aren't"),
    (r"was not", "wasn't"),
    (r"were not", "weren't"),
    (r"cannot|can not", "can't"),
    (r"will not", "won't"),
    (r"should not", "shouldn't"),
    (r"has not", "hasn't"),
    (r"have not", "haven't"),
)
_OPENERS = re.compile(
    r"(?i)(?:^|(?<=[.!?]\s))(?:please note that|note that|note:|it is worth noting that"
    r"|it should be noted that|keep in mind that|remember that|fyi,?|important:)\s+"
)
_NUMBER_WORDS = {
    "two": "2", "three": "3", "four": "4", "five": "5", "six": "6", "seven": "7", "eight": "8",
    "nine": "9", "ten": "10", "eleven": "11", "twelve": "12", "fifteen": "15", "twenty": "20",
    "thirty": "30", "forty": "40", "fifty": "50", "hundred": "100",
}  # fmt: skip
_NUMBER_WORD = re.compile(r"\b(" + "|".join(_NUMBER_WORDS) + r")\b(?=\s+[a-z])", re.IGNORECASE)
# A phrase dropped altogether takes one following space with it.
_COMPILED = tuple(
    (re.compile(rf"(?i)\b{pattern}\b" + ("" if replacement else r"\s?")), replacement)
    for pattern, replacement in _PHRASES
)
_REPEATED_WORD = re.compile(r"(?i)\b(\w+)(\s+\1\b)+")
_SPACES = re.compile(r"[ \t]{2,}")
_SPACE_BEFORE_PUNCT = re.compile(r"[ \t]+([,.;:!?])")


def _keep_case(match: re.Match[str], replacement: str) -> str:
    text = match.expand(replacement)
    if text and match.group(0)[:1].isupper():
        return text[:1].upper() + text[1:]
    return text


def _capitalise_sentences(text: str) -> str:
    return re.sub(r"(^|[.!?]\s+)([a-z])", lambda m: m.group(1) + m.group(2).upper(), text)


def compress_by_rules(text: str) -> str:
    """`text` reworded shorter by fixed rules; unchecked: pass the result through `rewrite_refusal`."""
    lines = []
    for line in text.split("\n"):
        out = _OPENERS.sub("", line)
        for pattern, replacement in _COMPILED:
            out = pattern.sub(functools.partial(_keep_case, replacement=replacement), out)
        out = _NUMBER_WORD.sub(lambda m: _NUMBER_WORDS[m.group(1).casefold()], out)
        out = _REPEATED_WORD.sub(r"\1", out)
        out = _SPACE_BEFORE_PUNCT.sub(r"\1", _SPACES.sub(" ", out)).rstrip()
        lines.append(_capitalise_sentences(out) if out != line else out)
    return "\n".join(lines).strip()


def lost_details(before: str, after: str) -> tuple[str, ...]:
    """The protected details of `before` that `after` no longer states ("number 27.1", "name ada")."""
    old, new = protected_details(before), protected_details(after)
    lost = [
        f"{kind} {value}"
        for kind, values in old.values
        for value in sorted(set(values) - set(new.of_kind(kind)))
    ]
    # A filler opener ("Please note that") reads as a name at the start of a sentence; it is not one.
    names = protected_details(_OPENERS.sub("", before)).names
    lost += [f"name {name}" for name in names if name not in new.names]
    if old.negations != new.negations:
        lost.append(f"negations {old.negations} → {new.negations}")
    return tuple(lost)


def rewrite_refusal(before: str, after: str) -> str:
    """Why `after` may not replace the entry `before`, or "" when it may."""
    if not after.strip():
        return "the rewrite is empty"
    if len(after) >= len(before):
        return "the rewrite is not shorter"
    if has_delimiter_line(after):
        return "the rewrite holds a line with only '§' and would split into several entries"
    if CANARY_MARKER in after:
        return "the rewrite holds the canary marker"
    if UNVERIFIED_MARK in before and UNVERIFIED_MARK not in after:
        return f"the rewrite drops the {UNVERIFIED_MARK} mark"
    lost = lost_details(before, after)
    if lost:
        return f"the rewrite loses {', '.join(lost[:5])}"
    return ""


class RuleCompressor:
    """Rewrites entries longer than `min_chars` by `compress_by_rules`, keeping only gated results."""

    def __init__(self, min_chars: int) -> None:
        self.min_chars = min_chars
        self.notes: list[str] = []

    def llm_counts(self) -> Mapping[str, int]:
        """Nothing: the rules use no LLM."""
        return {}

    def rewrite(self, entries: Sequence[str]) -> Mapping[str, Rewrite]:
        """For each long entry the rules shorten without losing a detail, its shorter wording."""
        found: dict[str, Rewrite] = {}
        for entry in entries:
            if len(entry) <= self.min_chars or CANARY_MARKER in entry:
                continue
            shorter = compress_by_rules(entry)
            if not rewrite_refusal(entry, shorter):
                found[entry] = Rewrite(shorter, "rules")
        return found
