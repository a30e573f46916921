"""Text similarity: how close a new card's text is to an existing one, and what differs.

`profile_text` analyses a text once into a `TextProfile` (normalised text, content words, character
shingles, protected details). `compare` measures a new profile against an existing one: content-word
Jaccard, containment of the new text's words, shingle Jaccard (inflection and typos), the Jaccard of
the words outside protected details, and which protected details changed, role swaps and other
named entities included. A `Sketch` holds the word sets a cheap gate needs; it is stored beside each
ledger card so that the card need not be analysed again.

The thresholds that turn these figures into verdicts are in `dreamer.rollup.dedup`; why they are
what they are: docs/design/dedup.md.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from dreamer.details import VALUE_DETAILS, Detail, ProtectedDetails, cut_details, protected_details
from dreamer.rollup.roles import FAMILY, STANCE_FAMILIES, role_swapped, same_doer
from dreamer.text import content_tokens, normalize_text

__all__ = [
    "STANCE_FAMILIES",
    "Comparison",
    "Sketch",
    "TextProfile",
    "compare",
    "compare_figures",
    "content_shingles",
    "covered_by",
    "jaccard_index",
    "jaccard_of_counts",
    "profile_of",
    "profile_text",
    "role_swapped",
    "same_doer",
    "says_outright",
    "sketch_of",
    "stance_topic",
]


def _content_words(text: str) -> list[str]:
    """The content words similarity counts: `text.content_tokens`, a stance family as one word."""
    return [FAMILY.get(word, word) for word in content_tokens(text)]


def stance_topic(profile: TextProfile) -> frozenset[str]:
    """What a text says besides who and the stance: its content words outside its names and the
    stance families ("Gina encourages Jon to sing" -> {"sing"})."""
    named = {word for name in profile.details.names for word in _content_words(name)}
    return profile.content_set - STANCE_FAMILIES - named


#: Third-person pronouns that can stand for a name the other text spells out.
_PRONOUNS = frozenset({"he", "she", "him", "her", "his", "hers", "they", "them", "their"})


@dataclass(frozen=True, slots=True)
class TextProfile:
    """Everything dedup needs to know about one text, computed once."""

    text: str
    normalized: str
    words: frozenset[str]
    content: tuple[str, ...]
    content_set: frozenset[str]
    shingles: frozenset[str]
    details: ProtectedDetails

    @property
    def subject(self) -> frozenset[str]:
        """Who or what the text is about: its first group of names, else its first content word."""
        if self.details.subject_names:
            return self.details.subject_names
        return frozenset(self.content[:1])


def _char_shingles(words: Sequence[str], n: int = 3) -> frozenset[str]:
    joined = " ".join(words)
    if len(joined) <= n:
        return frozenset([joined]) if joined else frozenset()
    return frozenset(joined[i : i + n] for i in range(len(joined) - n + 1))


def content_shingles(text: str) -> frozenset[str]:
    """The character shingles of a text's content words: ``profile_text(text).shingles`` without
    the rest of the analysis (protected details are most of its cost)."""
    return _char_shingles(_words_of(text)[1])


@functools.lru_cache(maxsize=256)
def _words_of(text: str) -> tuple[str, tuple[str, ...]]:
    """The normalised text and its content words, for both `sketch_text` and `profile_text`."""
    return normalize_text(text), tuple(_content_words(text))


@functools.lru_cache(maxsize=256)
def profile_text(text: str) -> TextProfile:
    """Precompute the comparison features of a text. Frozen, so shared: the summariser, grounding,
    the judge and the ledger row analyse a batch's texts one after the other (the last 256 texts
    are kept, about 2.5 MiB; on LoCoMo's quick run Dreamer's wall fell from 2.5 s to 1.2 s)."""
    normalized, content = _words_of(text)
    return profile_of(text, normalized, content, protected_details(text))


def profile_of(text: str, normalized: str, content: Sequence[str], details: ProtectedDetails) -> TextProfile:
    """The profile of ``text`` from what its analysis found: its normalised text, its content
    words in order and its protected details (kept with a ledger card: `dreamer.rollup.analysis`)."""
    words = tuple(content)
    return TextProfile(
        text=text,
        normalized=normalized,
        words=frozenset(normalized.split()),
        content=words,
        content_set=frozenset(words),
        shingles=_char_shingles(words),
        details=details,
    )


def sketch_text(text: str) -> Sketch:
    """``sketch_of(profile_text(text))``, without the names, negations and shingles the sketch does
    not hold: the sentence of a card kept without its sentences' sketches (an older ledger row, an
    upstream candidate) that its sketch turns away costs about half an analysis
    (`dreamer.rollup.existing`). What it computes, a later `profile_text` of the text reuses."""
    normalized, content = _words_of(text)
    return Sketch(normalized, frozenset(content), frozenset(cut_details(text).residual_tokens))


@dataclass(frozen=True, slots=True)
class Sketch:
    """The two word sets the cheap gate compares: enough to rule a pair out without a full profile.

    Stored beside each ledger card as a string (`dumps`); a string from another format version reads
    as None and the card is sketched again from its text. A card of several sentences keeps its
    sentences' sketches in ``parts`` too, as stored (read by `dreamer.rollup.existing`, which
    checks them against the sentences it cuts), and a stored card its whole analysis in
    ``analysis`` (`dreamer.rollup.analysis`); neither takes part in comparing two sketches.
    """

    normalized: str
    content: frozenset[str]
    residual: frozenset[str]
    parts: str | None = field(default=None, compare=False)
    analysis: str | None = field(default=None, compare=False)

    #: Bump when normalisation or protected-detail extraction changes what a sketch holds.
    #: s2: signs, currency, "%", decimal points and "C++"/"C#"/"@name" kept (`dreamer.text`).
    #: s3: the words of a stance family read as one (`_FAMILIES`).
    VERSION = "s3"

    def dumps(self) -> str:
        """One line: version, normalised text, content words, residual words (and the sentences'
        sketches, when kept: empty when not and the analysis is; then the analysis), tab-separated."""
        fields = [self.VERSION, *self.fields()]
        if self.analysis is not None:
            return "\t".join([*fields, self.parts or "", self.analysis])
        return "\t".join(fields if self.parts is None else [*fields, self.parts])

    @classmethod
    def loads(cls, stored: str | None) -> Sketch | None:
        """The sketch in `stored`, or None when it is missing, malformed or of another version."""
        if not stored:
            return None
        parts = stored.split("\t")
        if len(parts) not in (4, 5, 6) or parts[0] != cls.VERSION:
            return None
        kept = parts[4] or None if len(parts) >= 5 else None
        return cls.of_fields(*parts[1:4], parts=kept, analysis=parts[5] if len(parts) == 6 else None)

    def fields(self) -> tuple[str, str, str]:
        """Its normalised text and its two word sets, each as one string (sorted, space-separated):
        how a stored line, and a sentence's record in ``parts``, hold a sketch."""
        return self.normalized, " ".join(sorted(self.content)), " ".join(sorted(self.residual))

    @classmethod
    def of_fields(
        cls,
        normalized: str,
        content: str,
        residual: str,
        *,
        parts: str | None = None,
        analysis: str | None = None,
    ) -> Sketch:
        """The sketch whose :meth:`fields` these are."""
        return cls(normalized, frozenset(content.split()), frozenset(residual.split()), parts, analysis)


def sketch_of(profile: TextProfile) -> Sketch:
    """The sketch of an analysed text."""
    return Sketch(profile.normalized, profile.content_set, frozenset(profile.details.residual_tokens))


@dataclass(frozen=True, slots=True)
class Comparison:
    """How a new text relates to an existing one."""

    #: Content-word Jaccard.
    jaccard: float
    #: Share of the new text's content words present in the existing text.
    containment: float
    #: Jaccard of character 3-grams of the content words (tolerates inflection and typos).
    shingle: float
    #: Content-word Jaccard with protected values cut out of both texts.
    residual_jaccard: float
    #: Protected details that differ, in `Detail` order.
    changed: tuple[Detail, ...]
    #: Both texts are about the same subject.
    same_subject: bool
    #: Changed details that only one of the texts has at all ("last Friday" against no date):
    #: more or less specific, rather than a different value.
    added: tuple[Detail, ...] = ()

    def scores(self) -> dict[str, float]:
        """The similarity figures, for the verdict's log line."""
        return {
            "jaccard": round(self.jaccard, 3),
            "containment": round(self.containment, 3),
            "shingle": round(self.shingle, 3),
            "residual_jaccard": round(self.residual_jaccard, 3),
        }


def jaccard_index(a: frozenset[str], b: frozenset[str]) -> float:
    """Shared items over all items of two sets; 1.0 when both are empty."""
    # Counted, not built: the gate calls this for every ledger card of every run.
    return jaccard_of_counts(len(a & b), len(a), len(b))


def jaccard_of_counts(common: int, a: int, b: int) -> float:
    """The Jaccard index of two sets of ``a`` and ``b`` items sharing ``common``; 1.0 when both
    are empty."""
    union = a + b - common
    return common / union if union else 1.0


def _changed_details(new: TextProfile, old: TextProfile) -> tuple[Detail, ...]:
    changed: set[Detail] = set()
    for kind in VALUE_DETAILS - {Detail.NEGATION}:
        if new.details.of_kind(kind) != old.details.of_kind(kind):
            changed.add(kind)
    if new.details.negated != old.details.negated:  # another count, or another negated word
        changed.add(Detail.NEGATION)
    if role_swapped(new, old):
        changed.add(Detail.ROLE)
    # A name in one text that the other never mentions: another person, place or thing -- unless
    # the other text has a third-person pronoun where the name would stand and no name of its own
    # ("... made Caroline feel accepted" / "... made her feel accepted").
    only_new = [name for name in new.details.names if name not in old.words]
    only_old = [name for name in old.details.names if name not in new.words]
    pronoun_stands_in = (bool(only_new) and not only_old and bool(old.words & _PRONOUNS)) or (
        bool(only_old) and not only_new and bool(new.words & _PRONOUNS)
    )
    if (only_new or only_old) and not pronoun_stands_in:
        changed.add(Detail.ENTITY)
    return tuple(kind for kind in Detail if kind in changed)


def compare_figures(new: TextProfile, old: Sketch, old_shingles: frozenset[str]) -> Comparison:
    """The figures of :func:`compare` (Jaccard, containment, shingle, residual Jaccard) from the old
    text's sketch and shingles alone; its details are not looked at, so ``changed`` is empty and
    ``same_subject`` False. Enough to tell that a pair can be neither a duplicate nor a conflict."""
    common = len(new.content_set & old.content)
    return Comparison(
        jaccard=jaccard_index(new.content_set, old.content),
        containment=common / len(new.content_set) if new.content_set else 1.0,
        shingle=jaccard_index(new.shingles, old_shingles),
        residual_jaccard=jaccard_index(frozenset(new.details.residual_tokens), old.residual),
        changed=(),
        same_subject=False,
    )


def compare(new: TextProfile, old: TextProfile) -> Comparison:
    """Compare a new text with an existing one (containment is measured from the new text's side)."""
    common = len(new.content_set & old.content_set)
    changed = _changed_details(new, old)
    return Comparison(
        jaccard=jaccard_index(new.content_set, old.content_set),
        containment=common / len(new.content_set) if new.content_set else 1.0,
        shingle=jaccard_index(new.shingles, old.shingles),
        residual_jaccard=jaccard_index(
            frozenset(new.details.residual_tokens), frozenset(old.details.residual_tokens)
        ),
        changed=changed,
        same_subject=new.subject == old.subject,
        added=tuple(
            kind
            for kind in changed
            if kind in VALUE_DETAILS - {Detail.NEGATION}
            and not (new.details.of_kind(kind) and old.details.of_kind(kind))
        ),
    )


def _negations_held(part: TextProfile, whole: TextProfile) -> bool:
    """Whether ``whole`` negates what ``part`` negates, and nothing else that ``part`` says.

    "Gina encouraged Jon to keep going and not stop dreaming" holds "Gina encourages Jon to keep
    going": its "not" is about "stop", a word the part does not say. "Sam does not like tea" does
    not hold "Sam likes tea", nor does a negation whose word is unknown hold anything.
    """
    extra = Counter(whole.details.negated)
    extra.subtract(part.details.negated)
    if any(count < 0 for count in extra.values()):
        return False
    said = part.content_set
    return not any(
        count > 0 and (not word or word in said or FAMILY.get(word, word) in said)
        for word, count in extra.items()
    )


def covered_by(part: TextProfile, whole: TextProfile) -> float | None:
    """How much of ``part``'s content words ``whole`` says (0..1), or None when ``whole`` cannot
    be telling the same fact: a protected detail of ``part`` that ``whole`` lacks (a number, date,
    version, place, path or name it does not repeat), a negation it lacks or one of a word ``part``
    says (`_negations_held`), or a role swap.

    ``whole`` may add details of a kind ``part`` has none of: it is the fuller telling ("Caroline
    attended an LGBTQ support group" is covered by "Caroline attended an LGBTQ support group on 7
    May and found it powerful"; "Caroline attended it in 2022" is not). Of a kind ``part`` has,
    ``whole`` must hold the same values and no others: in "Nate has 3 turtles and 2 dogs" the "2"
    of "Nate has 2 turtles" counts something else.
    """
    if not part.content_set:
        return None
    for kind in VALUE_DETAILS - {Detail.NEGATION}:
        values = set(part.details.of_kind(kind))
        if values and values != set(whole.details.of_kind(kind)):
            return None
    if not _negations_held(part, whole):
        return None
    if any(name not in whole.words for name in part.details.names) or role_swapped(part, whole):
        return None
    return len(part.content_set & whole.content_set) / len(part.content_set)


def says_outright(part: TextProfile, whole: TextProfile) -> bool:
    """Whether ``whole`` says ``part`` word for word: ``part``'s normalised text is a run of
    ``whole``'s words, or ``part`` holds no protected value and no negation and its content words
    are a run of ``whole``'s content words ("Melanie finds pottery relaxing" in "Melanie made a
    plate and finds pottery relaxing and creative"). Sharing every word is not enough: "Sam likes
    tea" is in the words of "Evan likes tea and Sam likes coffee" but not said by it."""
    if f" {part.normalized} " in f" {whole.normalized} ":
        return True
    if part.details.negations or any(values for _, values in part.details.values):
        return False
    n = len(part.content)
    return n > 0 and any(whole.content[i : i + n] == part.content for i in range(len(whole.content) - n + 1))
