"""Grounding: a card keeps the units it cites only if it says what they say, and says nothing else.

Pure. Every drafted card, reflect or extractive, is checked both ways before it is judged:

- **held**: a card holds a unit when it repeats every protected detail of the unit (each number,
  date, version, URL, host and path, each negation, each name) and at least `HOLD_SHARE` of its
  content words (or of their character shingles, for inflections and typos), without swapping who
  did what. A unit a card cites but does not hold loses that citation; it joins another card of the
  batch that holds it, or gets a card of its own. A fact is never "merged" on a citation alone.
- **invented**: a card may state a protected detail only if a unit it cites states it (leading
  date clauses included). A card with an invented detail is rejected whole.
- **fused**: a card holding two units that state one fact with different values ("Nate has 2
  turtles" / "Nate has 3 turtles") is rejected, so that the judge sees the conflict.

`ground_cards` returns the cards that stand, the rejections with their reasons and the units
left to card again; `units_not_held` is the invariant the tests and benchmarks check after a run.
Why: docs/design/rollup.md ("Grounding").
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from dreamer.details import VALUE_DETAILS, Detail, ProtectedDetails, protected_details
from dreamer.rollup import extractive
from dreamer.rollup.cards import MAX_CARD_CHARS, CardDraft, SourceUnit, sentences
from dreamer.rollup.dedup_rules import DedupThresholds, is_conflict
from dreamer.rollup.similarity import TextProfile, compare, profile_text, role_swapped

__all__ = [
    "HOLD_SHARE",
    "GroundedBatch",
    "Grounding",
    "RejectReason",
    "Rejection",
    "ground_batch",
    "ground_cards",
    "held_why_not",
    "units_not_held",
]

#: Share of a unit's content words (or of their shingles) a card must say to hold the unit; the
#: same share the extractive fold asks of a fuller unit (`extractive.COVER_SHARE`).
HOLD_SHARE = 0.6

_THRESHOLDS = DedupThresholds()

#: The value details a card must repeat (negations and names are checked on their own).
_HELD_KINDS = tuple(kind for kind in Detail if kind in VALUE_DETAILS and kind is not Detail.NEGATION)


class RejectReason(StrEnum):
    """Why a drafted card was not kept (its units are carded again)."""

    INVENTED = "states a detail no unit it cites states"
    HOLDS_NONE = "holds none of the units it cites"
    FUSED = "fuses different values of one detail"
    TOO_LONG = "longer than the card cap"


@dataclass(frozen=True, slots=True)
class Rejection:
    """A card that was not kept: its text, what it cited, the reason and what showed it."""

    text: str
    source_ids: tuple[str, ...]
    reason: RejectReason
    detail: str

    def to_json(self) -> dict[str, object]:
        return {
            "text": self.text,
            "source_ids": list(self.source_ids),
            "reason": str(self.reason),
            "detail": self.detail,
        }


@dataclass
class Grounding:
    """What grounding made of a batch's drafts."""

    #: The cards that stand, each citing only units it holds (in draft order).
    cards: list[CardDraft] = field(default_factory=list)
    rejected: list[Rejection] = field(default_factory=list)
    #: Units no standing card holds: to be carded again (in input order).
    unheld: list[SourceUnit] = field(default_factory=list)
    #: Citations removed because the card did not hold the unit.
    claims_dropped: int = 0
    #: Units a standing card held without citing them, now cited by it.
    claims_added: int = 0


class _Analysed:
    """A text's profile, its details with any leading date clause, and its sentences' profiles."""

    __slots__ = ("_full", "_sentences", "profile")

    def __init__(self, text: str) -> None:
        self.profile = profile_text(text)
        self._full: ProtectedDetails | None = None
        self._sentences: list[TextProfile] | None = None

    @property
    def full(self) -> ProtectedDetails:
        """The details with a leading date clause ("On 8 May 2023, ...") kept ("and " in front
        stops it being stripped): a card may repeat the date its unit was told on."""
        if self._full is None:
            self._full = protected_details("and " + self.profile.text)
        return self._full

    def sentences(self) -> list[TextProfile]:
        if self._sentences is None:
            parts = sentences(self.profile.text)
            self._sentences = [self.profile] if len(parts) <= 1 else [profile_text(p) for p in parts]
        return self._sentences


def _share(part: frozenset[str], whole: frozenset[str]) -> float:
    return len(part & whole) / len(part) if part else 1.0


def held_why_not(card: TextProfile, unit: TextProfile, *, sentences_of: Sequence[TextProfile] = ()) -> str:
    """ "" when ``card`` holds ``unit``'s fact, else what it misses (for a log line).

    ``sentences_of`` are the card's sentences, when it has several: who did what is read in the
    sentence that shares most words with the unit.
    """
    for kind in _HELD_KINDS:
        missing = set(unit.details.of_kind(kind)) - set(card.details.of_kind(kind))
        if missing:
            return f"does not say its {kind} {sorted(missing)[0]!r}"
    if Counter(unit.details.negated) - Counter(card.details.negated):
        return "drops its negation"
    for name in unit.details.names:
        if name not in card.words:
            return f"does not name {name!r}"
    words = _share(unit.content_set, card.content_set)
    if words < HOLD_SHARE and _share(unit.shingles, card.shingles) < HOLD_SHARE:
        return f"says {words:.0%} of its content words (at least {HOLD_SHARE:.0%} needed)"
    best = max(sentences_of or (card,), key=lambda s: len(unit.content_set & s.content_set))
    if role_swapped(unit, best):
        return "swaps who did what to whom"
    return ""


def _invented(card: _Analysed, cited: Sequence[_Analysed]) -> str:
    """What the card states that none of ``cited`` states, or ""."""
    for kind in _HELD_KINDS:
        allowed = {v for u in cited for v in u.full.of_kind(kind)}
        extra = set(card.full.of_kind(kind)) - allowed
        if extra:
            return f"its {kind} {sorted(extra)[0]!r}"
    if set(card.full.negated) - {n for u in cited for n in u.full.negated}:
        return "a negation"
    words = {w for u in cited for w in u.profile.words}
    for name in card.profile.details.names:
        if name not in words:
            return f"the name {name!r}"
    return ""


def _fused(held: Sequence[_Analysed]) -> str:
    """Two held units that the dedup would call a conflict (the same statement about the same
    subject with a changed value: `dedup_rules.is_conflict`), or ""."""
    for i, a in enumerate(held):
        for b in held[i + 1 :]:
            comparison = compare(a.profile, b.profile)
            if is_conflict(comparison, _THRESHOLDS):
                changed = ", ".join(str(kind) for kind in comparison.changed)
                return f"{changed}: {a.profile.text!r} / {b.profile.text!r}"
    return ""


def ground_cards(
    drafts: Sequence[CardDraft],
    units: Sequence[SourceUnit],
    *,
    max_chars: int | None = MAX_CARD_CHARS,
    check_invented: bool = True,
) -> Grounding:
    """Check each draft against the units it cites (see the module docstring).

    ``units`` may hold several pieces of one long unit under one id: each piece must be held by a
    card citing the id. A draft citing no known unit claims the units of the batch it holds. Cards
    longer than ``max_chars`` (None: no cap) are rejected rather than cut. ``check_invented``
    False skips the invention check, for cards made of their units' own sentences (extractive).
    """
    grounder = _Grounder(units, check_invented=check_invented)
    for draft in drafts:
        grounder.check(draft, max_chars)
    grounder.claim_unheld()
    return grounder.result()


class _Grounder:
    """One grounding of a batch: its unit pieces by id, each text analysed once, the cards that stand.

    Drafts are checked in order (`check`); the pieces no standing card holds are then offered to
    the standing cards that did not cite them (`claim_unheld`), before they are left to card again.
    """

    def __init__(self, units: Sequence[SourceUnit], *, check_invented: bool) -> None:
        self.check_invented = check_invented
        self._analysed: dict[str, _Analysed] = {}
        self.pieces = [(u, self.analyse(u.text)) for u in units if u.text.strip()]
        self.by_id: dict[str, list[tuple[SourceUnit, _Analysed]]] = {}
        for unit, a in self.pieces:
            self.by_id.setdefault(unit.id, []).append((unit, a))
        self.out = Grounding()
        #: The pieces (by object id) some standing card holds.
        self.held_pieces: set[int] = set()
        #: Each standing draft, its analysis and the ids it keeps (in draft order).
        self.standing: list[tuple[CardDraft, _Analysed, list[str]]] = []

    def analyse(self, text: str) -> _Analysed:
        """The analysis of ``text``, made once: a card may repeat a unit's text word for word."""
        found = self._analysed.get(text)
        if found is None:
            found = self._analysed[text] = _Analysed(text)
        return found

    def check(self, draft: CardDraft, max_chars: int | None) -> None:
        """Keep ``draft`` standing, citing only the units it holds, or record why it is rejected."""
        if not draft.text.strip():
            return
        ids = [i for i in dict.fromkeys(draft.source_ids) if i in self.by_id]
        if max_chars is not None and len(draft.text) > max_chars:
            self._reject(draft, RejectReason.TOO_LONG, f"{len(draft.text)} characters")
            return
        card = self.analyse(draft.text)
        if not ids:
            # Cited nothing of this batch: it claims what it holds.
            ids = self._claimed(card)
        if not ids:
            self._reject(draft, RejectReason.HOLDS_NONE, "it holds no unit of the batch")
            return
        cited = [a for i in ids for _, a in self.by_id[i]]
        kept_ids, held, held_here = self._held(card, ids)
        # What the card states must come from the units it keeps (from those it cites, when it
        # keeps none: the reason told is then the invention, not the missing facts).
        invented = _invented(card, held or cited) if self.check_invented else ""
        if invented:
            self._reject(draft, RejectReason.INVENTED, f"states {invented}")
            return
        if not kept_ids:
            self._reject(draft, RejectReason.HOLDS_NONE, "it says none of their facts")
            return
        fused = _fused(held)
        if fused:
            self._reject(draft, RejectReason.FUSED, fused)
            return
        self.out.claims_dropped += len(cited) - len(held)
        self.held_pieces.update(held_here)
        self.standing.append((draft, card, kept_ids))

    def _reject(self, draft: CardDraft, reason: RejectReason, detail: str) -> None:
        self.out.rejected.append(Rejection(draft.text, draft.source_ids, reason, detail))

    def _claimed(self, card: _Analysed) -> list[str]:
        """The ids of the batch's units ``card`` holds a piece of, for a card that cites none."""
        return [
            i
            for i, group in self.by_id.items()
            if any(not held_why_not(card.profile, a.profile, sentences_of=card.sentences()) for _, a in group)
        ]

    def _held(self, card: _Analysed, ids: Sequence[str]) -> tuple[list[str], list[_Analysed], list[int]]:
        """Of the pieces of ``ids``, those ``card`` holds: the ids it keeps (in citation order),
        the pieces' analyses and the pieces themselves (by object id)."""
        kept_ids: list[str] = []
        held: list[_Analysed] = []
        held_here: list[int] = []
        for i in ids:
            for unit, a in self.by_id[i]:
                if not held_why_not(card.profile, a.profile, sentences_of=card.sentences()):
                    held.append(a)
                    held_here.append(id(unit))
                    if i not in kept_ids:
                        kept_ids.append(i)
        return kept_ids, held, held_here

    def claim_unheld(self) -> None:
        """A piece no card held may still be held by a standing card that did not cite it: the
        first such card cites it now; a piece none holds is left to card again."""
        for unit, a in self.pieces:
            if id(unit) in self.held_pieces:
                continue
            for _draft, card, kept_ids in self.standing:
                if self._holds_uncited(card, a, kept_ids):
                    if unit.id not in kept_ids:
                        kept_ids.append(unit.id)
                        self.out.claims_added += 1
                    self.held_pieces.add(id(unit))
                    break
            else:
                self.out.unheld.append(unit)

    def _holds_uncited(self, card: _Analysed, piece: _Analysed, kept_ids: Sequence[str]) -> bool:
        """Whether a standing card holds ``piece`` and, citing it, would still invent nothing."""
        return not held_why_not(card.profile, piece.profile, sentences_of=card.sentences()) and not (
            self.check_invented and _invented(card, [piece, *(b for i in kept_ids for _, b in self.by_id[i])])
        )

    def result(self) -> Grounding:
        """The grounding, each standing card citing the units it keeps."""
        self.out.cards = [CardDraft(d.text, d.kind, tuple(ids)) for d, _, ids in self.standing]
        return self.out


@dataclass(frozen=True, slots=True)
class GroundedBatch:
    """A batch's cards after grounding: the summariser's that stand, then the fallback cards."""

    #: What grounding made of the summariser's own drafts.
    first: Grounding
    #: Cards for the units no summariser card held.
    fallback: list[CardDraft]
    #: Ids of units a summariser card cited without holding, carded again.
    recarded: frozenset[str]

    @property
    def cards(self) -> list[CardDraft]:
        return [*self.first.cards, *self.fallback]


def ground_batch(
    drafts: Sequence[CardDraft], sources: Sequence[SourceUnit], *, model_written: bool
) -> GroundedBatch:
    """Ground a batch's drafts (`ground_cards`) and card every unit none of them holds: a model's
    drafts (``model_written``, capped at `MAX_CARD_CHARS`) leave theirs to the extractive
    summariser, whose cards are grounded in turn; whatever is still not held gets a card of its
    own text (`extractive.own_card`), which holds it by construction."""
    # Extractive cards are their units' own sentences: they cannot invent a detail.
    first = ground_cards(
        drafts,
        sources,
        max_chars=MAX_CARD_CHARS if model_written else None,
        check_invented=model_written,
    )
    leftover = first.unheld
    cited = {i for d in drafts for i in d.source_ids}
    recarded = frozenset(u.id for u in leftover if u.id in cited)
    fallback: list[CardDraft] = []
    if leftover and model_written:
        extracted = extractive.extract_cards(leftover, len(leftover))
        second = ground_cards(extracted, leftover, max_chars=None, check_invented=False)
        fallback, leftover = list(second.cards), second.unheld
    fallback += [extractive.own_card(u) for u in leftover]
    return GroundedBatch(first, fallback, recarded)


def units_not_held(
    units: Mapping[str, str] | Iterable[tuple[str, str]],
    cards: Iterable[tuple[str, Sequence[str]]],
) -> dict[str, str]:
    """The invariant "every unit kept": each unit (id, text) whose protected details (values,
    negations, names) the cards citing its id do not say between them, with what is missing.

    ``cards`` are (text, source ids) pairs, e.g. the ledger after a run. A unit cited by no card
    is missing whole.
    """
    texts: dict[str, list[str]] = {}
    for text, ids in cards:
        for i in ids:
            texts.setdefault(i, []).append(text)
    missing: dict[str, str] = {}
    cards_read: dict[str, tuple[ProtectedDetails, frozenset[str]]] = {}

    def read(card: str) -> tuple[ProtectedDetails, frozenset[str]]:
        # A card cited by several units is analysed once.
        if card not in cards_read:
            cards_read[card] = (protected_details("and " + card), profile_text(card).words)
        return cards_read[card]

    for unit_id, text in units.items() if isinstance(units, Mapping) else units:
        citing = texts.get(unit_id)
        if not citing:
            missing[unit_id] = "cited by no card"
            continue
        why = _details_missing(protected_details(text), [read(t) for t in citing])
        if why:
            missing[unit_id] = why
    return missing


def _details_missing(unit: ProtectedDetails, cards: Sequence[tuple[ProtectedDetails, frozenset[str]]]) -> str:
    for kind in _HELD_KINDS:
        said = {v for details, _ in cards for v in details.of_kind(kind)}
        lost = set(unit.of_kind(kind)) - said
        if lost:
            return f"its {kind} {sorted(lost)[0]!r} is in no card citing it"
    if Counter(unit.negated) - sum((Counter(details.negated) for details, _ in cards), Counter()):
        return "its negation is in no card citing it"
    words = {w for _, card_words in cards for w in card_words}
    for name in unit.names:
        if name not in words:
            return f"the name {name!r} is in no card citing it"
    return ""
