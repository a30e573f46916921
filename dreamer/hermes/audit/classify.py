"""Deterministic, rule-based categorisation of memory entries.

Every category has a few weighted patterns (strong 3, clear 2, weak 1). The categories are grouped by
what the audit would do with them: discard (Session Note), expire (Temporary State, Historical
Snapshot), config (Technical Config), user profile (Identity, Preference), skill (Operating Rule)
and soul (Persona: who the agent itself is and how it speaks, which belongs in SOUL.md).
An entry is classified with confidence only when its best group scores at least 2 and leads the
runner-up group by at least 2; signals for two categories of the same group do not conflict,
because both lead to the same action. An entry with no signal at all is a Fact (kept as it is).
Anything else is returned as not confident, with the competing evidence as the reason, and the
audit leaves it untouched and lists it as unresolved.

`EntryClassifier` is the interface; a model-backed classifier can implement it later and be passed
to the audit instead of `RuleBasedClassifier`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

__all__ = [
    "Category",
    "Classification",
    "EntryClassifier",
    "Rule",
    "RuleBasedClassifier",
    "category_group",
]


class Category(StrEnum):
    """The contract's categories of memory entries."""

    SESSION_NOTE = "Session Note"
    TEMPORARY_STATE = "Temporary State"
    HISTORICAL_SNAPSHOT = "Historical Snapshot"
    TECHNICAL_CONFIG = "Technical Config"
    IDENTITY = "Identity"
    PREFERENCE = "Preference"
    OPERATING_RULE = "Operating Rule"
    PERSONA = "Persona"
    FACT = "Fact"


_GROUPS: dict[Category, str] = {
    Category.SESSION_NOTE: "discard",
    Category.TEMPORARY_STATE: "expire",
    Category.HISTORICAL_SNAPSHOT: "expire",
    Category.TECHNICAL_CONFIG: "config",
    Category.IDENTITY: "user profile",
    Category.PREFERENCE: "user profile",
    Category.OPERATING_RULE: "skill",
    Category.PERSONA: "soul",
    Category.FACT: "keep",
}

MIN_SCORE = 2
MIN_MARGIN = 2


def category_group(category: Category) -> str:
    """The action group of `category`: categories of one group are handled alike."""
    return _GROUPS[category]


@dataclass(frozen=True)
class Classification:
    """The category of an entry, whether it is certain enough to act on, and why."""

    category: Category
    confident: bool
    confidence: float
    reason: str


class EntryClassifier(Protocol):
    """Anything that can categorise a memory entry."""

    def classify(self, entry: str) -> Classification:
        """The classification of `entry`."""
        ...


@dataclass(frozen=True)
class Rule:
    """One signal: `pattern` found in the entry adds `weight` to `category`."""

    category: Category
    weight: int
    name: str
    pattern: re.Pattern[str]
    case_sensitive: bool = False


def _rule(category: Category, weight: int, name: str, pattern: str, *, case_sensitive: bool = False) -> Rule:
    flags = re.MULTILINE if case_sensitive else re.MULTILINE | re.IGNORECASE
    return Rule(category, weight, name, re.compile(pattern, flags), case_sensitive)


_WEEKDAY = r"(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)"
_OCCUPATION = (
    r"(?:engineer|developer|designer|student|researcher|manager|founder|doctor|nurse|teacher|scientist"
    r"|lawyer|writer|artist|analyst|consultant|programmer|architect|professor|journalist|accountant)"
)

_SESSION = Category.SESSION_NOTE
_TEMP = Category.TEMPORARY_STATE
_SNAP = Category.HISTORICAL_SNAPSHOT
_CONF = Category.TECHNICAL_CONFIG
_IDENT = Category.IDENTITY
_PREF = Category.PREFERENCE
_RULE = Category.OPERATING_RULE
_PERSONA = Category.PERSONA

DEFAULT_RULES: tuple[Rule, ...] = (
    # Session notes: what happened in one conversation.
    _rule(
        _SESSION, 3, "session label", r"^\s*(?:session(?: note| log| summary)?|today|wip|progress)\s*[:\-—]"
    ),
    _rule(_SESSION, 3, "this session", r"\b(?:this|current|today'?s|last) (?:session|conversation|chat)\b"),
    _rule(
        _SESSION,
        2,
        "just did",
        r"\b(?:we|i) (?:just|then) (?:fixed|ran|tried|discussed|finished|worked|debugged|looked|started"
        r"|completed)\b",
    ),
    _rule(_SESSION, 2, "earlier today", r"\b(?:earlier today|just now|so far today|later today)\b"),
    _rule(_SESSION, 2, "task progress", r"\b(?:task progress|work log|completed (?:the )?(?:task|step)s?)\b"),
    # Temporary state: true now, not for long.
    _rule(
        _TEMP,
        3,
        "deal state",
        r"\b(?:verbal offer|deal pending|offer pending|negotiation(?: phase)?|under negotiation)\b",
    ),
    _rule(_TEMP, 3, "temporary label", r"^\s*(?:temp(?:orary)?|pending|blocked)\s*[:\-—]"),
    _rule(
        _TEMP,
        2,
        "pending",
        r"\b(?:pending|awaiting|waiting (?:for|on)|on hold|blocked (?:on|by)|in progress"
        r"|until further notice)\b",
    ),
    _rule(
        _TEMP, 2, "for now", r"\b(?:temporarily|for now|for the time being|for the moment|at the moment)\b"
    ),
    _rule(
        _TEMP,
        2,
        "until",
        rf"\buntil (?:next|this|the end of|tomorrow|{_WEEKDAY}|\d{{4}}-\d{{2}}-\d{{2}})\b",
    ),
    _rule(_TEMP, 2, "away or down", r"\b(?:is (?:currently )?down|outage|out of office|on vacation)\b"),
    _rule(_TEMP, 1, "soon", r"\b(?:this week|this weekend|next week|tomorrow|tonight|currently)\b"),
    # Historical snapshots: figures or states pinned to a past moment.
    _rule(_SNAP, 3, "as of", r"\bas of\b"),
    _rule(_SNAP, 3, "snapshot", r"\bsnapshot\b"),
    _rule(_SNAP, 2, "back then", r"\b(?:at the time|back then|previously|used to|formerly|was at|were at)\b"),
    _rule(_SNAP, 1, "last period", r"\b(?:last|previous) (?:week|month|quarter|year|sprint)\b"),
    # Technical configuration: things a machine reads.
    _rule(_CONF, 3, "url", r"\bhttps?://"),
    _rule(_CONF, 3, "model key", r"\bmodel\s*:"),
    _rule(_CONF, 3, "unverified mark", r"\[UNVERIFIED\]", case_sensitive=True),
    _rule(
        _CONF,
        2,
        "endpoint",
        r"\b(?:endpoint|base[_ ]url|api[_ ]?(?:key|base|url)|port|hostname|host|webhook|dsn"
        r"|connection string)\b",
    ),
    _rule(_CONF, 2, "address", r"\b(?:localhost|\d{1,3}(?:\.\d{1,3}){3})(?::\d+)?\b"),
    _rule(
        _CONF, 2, "config file", r"\b[\w.-]+\.(?:ya?ml|json|toml|ini|conf|cfg|env)\b|\bconfig(?:uration)?\b"
    ),
    _rule(_CONF, 2, "env var", r"\b[A-Z][A-Z0-9]*_[A-Z0-9_]+\b", case_sensitive=True),
    _rule(_CONF, 1, "path", r"(?:^|\s)~?/[\w.-]+/[\w./-]*"),
    _rule(
        _CONF,
        1,
        "tooling",
        r"\b(?:docker|systemd|cron|ssh|postgres(?:ql)?|redis|nginx|kubernetes|k8s|npm|pip|ollama|vllm)\b",
    ),
    # Identity: who the user is.
    _rule(_IDENT, 3, "name", r"\b(?:my|user'?s|their|his|her) name is\b|\bgoes by\b|\bis called\b"),
    _rule(_IDENT, 3, "pronouns", r"\bpronouns?\b"),
    _rule(_IDENT, 3, "occupation", rf"\b(?:is|works as|working as) an? (?:[\w-]+ ){{0,2}}{_OCCUPATION}s?\b"),
    _rule(_IDENT, 2, "location", r"\b(?:lives|living|based|located|resides) in\b"),
    _rule(_IDENT, 2, "employer", r"\bworks? (?:at|for)\b"),
    _rule(_IDENT, 2, "time zone", r"\btime ?zone\b|\b(?:utc|gmt)[+-]\d"),
    _rule(_IDENT, 2, "age", r"\b(?:birthday|born (?:in|on)|years old)\b"),
    _rule(_IDENT, 2, "language", r"\b(?:native language|mother tongue|speaks)\b"),
    _rule(_IDENT, 2, "user is", r"^\s*(?:the )?user(?:'s| is| has)\b"),
    # Preferences: what the user likes and how they want to be answered.
    _rule(_PREF, 3, "prefers", r"\bprefer(?:s|red|ence|ences)?\b"),
    _rule(_PREF, 3, "would rather", r"\bwould rather\b"),
    _rule(
        _PREF, 2, "likes", r"\b(?:likes|loves|enjoys|dislikes|hates|can't stand|cannot stand|is fond of)\b"
    ),
    _rule(_PREF, 2, "favourite", r"\bfavou?rites?\b"),
    _rule(_PREF, 2, "wants", r"\b(?:wants|does ?n[o']t want|doesn't like|does not like)\b"),
    _rule(_PREF, 1, "style", r"\b(?:communication style|tone|verbose|concise|terse|formal|informal|emoji)\b"),
    # Operating rules: procedures the agent should follow (they belong in a skill).
    _rule(_RULE, 3, "rule label", r"^\s*(?:rule|procedure|workflow|policy|protocol|checklist)\s*[:\-—]"),
    _rule(_RULE, 3, "imperative", r"^\s*(?:always|never|do not|don't|must|before|after|when(?:ever)?)\b"),
    _rule(_RULE, 2, "always or never", r"\b(?:always|never)\b"),
    _rule(_RULE, 2, "must", r"\b(?:must|mustn't|shall|is required to)\b"),
    _rule(
        _RULE,
        2,
        "before acting",
        r"\bbefore (?:running|committing|deploying|pushing|merging|sending|replying|answering|editing"
        r"|deleting|starting)\b",
    ),
    _rule(_RULE, 2, "steps", r"\b(?:step \d|first,|then,|finally,)"),
    # Persona: the agent's own identity and voice (SOUL.md), addressed to it or said by it.
    _rule(_PERSONA, 3, "you are", r"^\s*(?:you are|you're)\b(?! (?:to|going|about|currently|now)\b)"),
    _rule(
        _PERSONA,
        3,
        "your identity",
        r"\byour (?:name|role|persona|personality|character|voice|tone|purpose|job) is\b",
    ),
    _rule(
        _PERSONA,
        3,
        "i am the agent",
        r"^\s*(?:i am|i'm) (?:an? |the )?(?:[\w-]+ ){0,2}(?:assistant|agent|bot)\b",
    ),
    _rule(_PERSONA, 2, "persona", r"\b(?:persona|personality|in character|stay in character)\b"),
    _rule(
        _PERSONA,
        2,
        "voice",
        r"\b(?:speak|talk|write|respond|reply|answer)s? (?:like an?|in the voice of|as if you were)\b",
    ),
)


def _describe(scores: dict[Category, int], evidence: dict[Category, list[str]], category: Category) -> str:
    return f"{category} ({scores[category]}: {', '.join(evidence[category])})"


class RuleBasedClassifier:
    """Categorises entries with weighted patterns; same text, same answer, no I/O."""

    def __init__(self, rules: Sequence[Rule] = DEFAULT_RULES) -> None:
        self._rules = tuple(rules)

    def classify(self, entry: str) -> Classification:
        """The classification of `entry`."""
        scores: dict[Category, int] = {}
        evidence: dict[Category, list[str]] = {}
        for rule in self._rules:
            if rule.pattern.search(entry):
                scores[rule.category] = scores.get(rule.category, 0) + rule.weight
                evidence.setdefault(rule.category, []).append(rule.name)
        if not scores:
            return Classification(Category.FACT, True, 1.0, "no signal of any other category")

        group_scores: dict[str, int] = {}
        for category, score in scores.items():
            group = category_group(category)
            group_scores[group] = group_scores.get(group, 0) + score
        ranked_groups = sorted(group_scores.items(), key=lambda item: -item[1])
        top_group, top_score = ranked_groups[0]
        runner_up = ranked_groups[1][1] if len(ranked_groups) > 1 else 0
        # Within the winning group, the strongest category names the entry (rule order breaks ties).
        in_group = [category for category in scores if category_group(category) == top_group]
        category = max(in_group, key=lambda c: scores[c])
        confidence = round(top_score / sum(group_scores.values()), 2)
        described = "; ".join(
            _describe(scores, evidence, c) for c in sorted(scores, key=lambda c: -scores[c])
        )

        if top_score < MIN_SCORE:
            return Classification(category, False, confidence, f"weak evidence only: {described}")
        if top_score - runner_up < MIN_MARGIN:
            return Classification(category, False, confidence, f"ambiguous: {described}")
        return Classification(category, True, confidence, described)
