"""Who did what to whom, and whose stance a text tells: the reading behind a role swap.

Two texts naming the same people may tell one event from two sides ("Maria offered to help John" /
"John appreciated Maria's offer") or two facts ("Maria is willing to help John" / "John is willing
to help Maria"). This module reads, from the names' parts (`dreamer.details.NameRole`) and a few
word lists, who acts in each text and whether the two disagree (`role_swapped`, `same_doer`); the
stance families (`STANCE_FAMILIES`) say which words tell one feeling. Why: docs/design/dedup.md,
"Who did what to whom".
"""

from __future__ import annotations

import re
from collections import Counter
from typing import TYPE_CHECKING

from dreamer.details import NameRole
from dreamer.details.names import ACT_STEMS
from dreamer.text import content_tokens, stem, tokens

if TYPE_CHECKING:
    from dreamer.rollup.similarity import TextProfile

__all__ = ["FAMILY", "STANCE_FAMILIES", "role_swapped", "same_doer"]

#: Stems of one feeling or stance, read as one content word: "Jon is grateful for Gina's support" /
#: "Jon expressed gratitude for Gina's support" / "Jon appreciates Gina's encouragement" say one
#: fact that a stance told in many sessions repeats. On the labelled pairs (`bench.pairs`) the two
#: families add 10 true duplicates and no false one on the lexical route, 8 and none with MiniLM.
_FAMILIES = {
    "grateful": ("grateful", "gratitud", "thankful", "thank", "appreciat", "appreciation", "appreciativ"),
    "support": ("support", "supportiv", "encourag", "encouragement"),
}
FAMILY = {stem: family for family, stems in _FAMILIES.items() for stem in stems}
#: The families' own words, as a text's content words hold them: a card about a stance has one.
STANCE_FAMILIES = frozenset(_FAMILIES)

#: Words of a stance (a feeling or a judgement): "X values her friendship with Y" is X's stance,
#: not an event X and Y share, so "with" does not make it a joint telling.
_STANCE_WORDS = frozenset(
    {
        "grateful", "thankful", "appreciate", "appreciates", "appreciated", "appreciative", "values",
        "value", "valued", "loves", "love", "loved", "admires", "admire", "admired", "proud", "trusts",
        "trust", "trusted", "misses", "miss", "missed", "cares", "care", "believes", "believe",
        "believed", "respects", "respect", "respected", "enjoys", "enjoyed", "likes", "liked",
        "feels", "felt", "happy", "glad", "thanks", "thanked", "inspired", "inspires", "impressed",
        "excited", "excitement", "eager", "interested", "wants", "wanted", "hopes", "hoped",
    }
)  # fmt: skip


def _agents(profile: TextProfile, common: set[str]) -> frozenset[str]:
    """Names after "by" or "from" ("helped by Maria", "advice from James"), among `common`."""
    return frozenset(
        name for name, played in profile.details.name_roles if name in common and NameRole.AGENT in played
    )


#: Possessive pronouns: "on his recommendation" names its doer only by a pronoun.
_POSSESSIVE_PRONOUNS = frozenset({"his", "her", "their"})
#: Words before such a pronoun that make the act what the text's event answers to ("on his
#: recommendation", "thanked Nate for his help"): the one who did it is seldom the subject. Not
#: "told John about her offer", "shared her advice", where the pronoun is most often the subject.
_ANSWERING = frozenset({"on", "for", "after", "following", "upon"})


def _acts_held_by_pronoun(profile: TextProfile) -> frozenset[str]:
    """The stems of the acts a possessive pronoun holds after "on", "for", ... ("on his
    recommendation" -> recommendation)."""
    if profile.words.isdisjoint(_ANSWERING) or profile.words.isdisjoint(_POSSESSIVE_PRONOUNS):
        return frozenset()  # the cheap test first: the judge asks this of every pair it compares
    words = tokens(profile.text)
    held = frozenset(
        stem(act)
        for before, pronoun, act in zip(words, words[1:], words[2:], strict=False)
        if before in _ANSWERING and pronoun in _POSSESSIVE_PRONOUNS
    )
    return held & ACT_STEMS


def _named_doers(profile: TextProfile, common: set[str]) -> frozenset[str]:
    """The names among `common` written as the possessor of an act ("Evan's support")."""
    return frozenset(
        name for name, played in profile.details.name_roles if name in common and NameRole.DOER in played
    )


def _acting(profile: TextProfile, common: set[str], other: TextProfile) -> frozenset[str]:
    """Who acts in the event, among the names both texts share.

    A name after "by" or "from", else the possessor of an act outside the subject ("grateful for
    Evan's support", "Tim's suggestion"; not "supportive of Joanna's writing"), else the subject.
    An act held by a pronoun ("Joanna told Nate she enjoyed it on his recommendation") is read as
    done by the one the other text names as its doer ("... on Nate's recommendation"), when that
    one is not this text's subject: the pronoun cannot say who it is, and the subject is the one
    least likely meant.
    """
    agents = _agents(profile, common)
    if agents:
        return agents
    subject = profile.details.subject_names & common
    doers = _named_doers(profile, common) - subject
    if doers:
        return doers
    held = _acts_held_by_pronoun(profile)
    if held and not held.isdisjoint(stem(word) for word in other.words):
        told = _named_doers(other, common) - subject
        if told:
            return told
    return subject


#: "each other", "one another": a stance both people hold towards one another.
_MUTUAL = re.compile(r"\b(?:each other|one another)\b")
_MUTUAL_WORDS = frozenset({"each", "another"})
#: The stems of stance words and the stance families' names, as `_stance_of` reads a text.
_STANCE_STEMS = STANCE_FAMILIES | frozenset(stem(word) for word in _STANCE_WORDS)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def _tells_mutual_stance(profile: TextProfile, other: TextProfile) -> bool:
    """Whether a sentence of the text tells a stance both its people hold towards each other
    ("They express appreciation for each other's friendship and support"), in a word of the
    stance the other text tells: it says each one's stance, either way round."""
    if profile.words.isdisjoint(_MUTUAL_WORDS):
        return False  # the cheap test first: the judge asks this of every pair it compares
    held = _stance_of(other)
    for sentence in _SENTENCE_END.split(profile.text):
        if _MUTUAL.search(" ".join(tokens(sentence))):
            said = {FAMILY.get(word, word) for word in content_tokens(sentence)}
            if not said.isdisjoint(held):
                return True
    return False


def _stance_of(profile: TextProfile) -> frozenset[str]:
    """The stance words of a text as stems, a stance family as its name."""
    return frozenset(FAMILY.get(word, word) for word in content_tokens(profile.text)) & _STANCE_STEMS


#: Words of a directed act: "Caroline shared with Melanie that ..." goes from one to the other.
_DIRECTED_WORDS = frozenset(
    {
        "share", "shares", "shared", "sharing", "offer", "offers", "offered", "give", "gives", "gave",
        "sent", "send", "sends", "show", "shows", "showed", "told", "tells", "tell", "asked", "asks",
        "ask", "help", "helps", "helped", "helping", "thanked", "recommended", "introduced",
    }
)  # fmt: skip


def _joint_party(profile: TextProfile, common: set[str]) -> frozenset[str] | None:
    """Everyone in a joint event, or None if it is not one.

    "Sam plans a painting session with Evan", "Sam and Evan discussed ...": the subject and the
    names after "with", or two names joined by "and" as the subject. A stance or a directed act
    ("values her friendship with", "shared with") is no joint event.
    """
    if profile.words & (_STANCE_WORDS | _DIRECTED_WORDS):
        return None
    subject = profile.details.subject_names & common
    partners = frozenset(
        name for name, played in profile.details.name_roles if name in common and NameRole.PARTNER in played
    )
    if partners:
        return partners | subject
    return subject if len(subject) >= 2 else None


def role_swapped(new: TextProfile, old: TextProfile) -> bool:
    """Whether the two texts tell of different people acting on each other (who did what to whom).

    One event told from two sides is no swap: a joint event ("Sam plans a painting session with
    Evan" / "Evan plans a painting session with Sam"), or the same person acting in another voice
    ("Maria offered to help John" / "John appreciated Maria's offer"). Why: docs/design/dedup.md.
    """
    new_names, old_names = new.details.names, old.details.names
    common = set(new_names) & set(old_names)
    if len(common) >= 2:
        if _tells_mutual_stance(old, new) or _tells_mutual_stance(new, old):
            # One says the two hold this stance towards each other: it tells each one's.
            return False
        new_subject, old_subject = new.details.subject_names & common, old.details.subject_names & common
        new_stance, old_stance = bool(new.words & _STANCE_WORDS), bool(old.words & _STANCE_WORDS)
        if new_stance and old_stance and new_subject and old_subject and new_subject != old_subject:
            # Each holds a stance of their own: "Sam is grateful for Evan's support" / "Evan
            # appreciates Sam's support", "Caroline values her friendship with Melanie" / the reverse.
            return True
        new_party, old_party = _joint_party(new, common), _joint_party(old, common)
        if new_party is not None and old_party is not None:
            return new_party != old_party
        new_acting, old_acting = _acting(new, common, old), _acting(old, common, new)
        if new_acting and old_acting and new_acting != old_acting:
            return True
        if _agents(new, common) or _agents(old, common):
            # The voice changed ("Jon was encouraged by Gina"): word order no longer tells who acts.
            return False
    same_words = Counter(new.content) == Counter(old.content)
    if not same_words or new.content == old.content:
        return False
    # Same words, other order: "Evan gave Ben's dog to Sam" / "Evan gave Sam's dog to Ben".
    if common:
        new_groups = [group & common for group in new.details.name_groups if group & common]
        old_groups = [group & common for group in old.details.name_groups if group & common]
        return new_groups != old_groups
    # No names: "the dog bit the man" / "the man bit the dog".
    return new.content[:1] != old.content[:1]


def same_doer(new: TextProfile, old: TextProfile) -> bool:
    """Whether two texts naming the same two people tell of one act by the same one of them, each
    from its own side: "Joanna appreciates Nate's support" / "Nate supports Joanna's writing" (Nate
    acts in both). Who acts is read as `role_swapped` reads it; a swap is never the same doer."""
    common = set(new.details.names) & set(old.details.names)
    if len(common) < 2 or role_swapped(new, old):
        return False
    new_acting = _acting(new, common, old)
    return bool(new_acting) and new_acting == _acting(old, common, new)
