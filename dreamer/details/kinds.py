"""The kinds of protected detail and what one text's details are: the package's values.

Pure values, apart from the extraction, so that what only reads details (dedup, grounding,
salience) meets their shape here, and each finder beside it fills one part of it.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

__all__ = ["VALUE_DETAILS", "Detail", "NameRole", "ProtectedDetails"]


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


class NameRole(StrEnum):
    """The part a name plays, as far as the words right around it tell.

    `AGENT`: after "by" or "from" ("was helped by Maria", "advice from James"); `POSSESSOR`:
    written "X's" ("Evan's support"); `DOER`: a possessor of an act, who did it ("Evan's support",
    "Tim's suggestion", not "Joanna's writing"); `PARTNER`: after "with" ("a painting session
    with Sam"); `PLAIN`: none of these (a subject or an object).
    """

    AGENT = "agent"
    POSSESSOR = "possessor"
    DOER = "doer"
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
