"""Something a new card can repeat, as the judge (`dreamer.rollup.dedup`) meets it: a ledger card,
an earlier card of the batch, an upstream candidate, or one sentence of one of those.

Known by its sketch (made without the full analysis: `sketch_text`); its full analysis is made on
first use and kept, and shared with another entry of the very same text. A card of several
sentences has its sentences as parts (:attr:`Existing.parts`): a new card may repeat one sentence
of a stored card, which a comparison of the whole texts misses (the stored card says more, so their
word overlap is low). A ledger card's stored sketch keeps its sentences' sketches (`stored_sketch`,
what the ledger's rows are written with), so its parts are known without analysing them; each is
checked against the sentence it is read for (a checksum of its text), and one that does not match
is sketched again. Pure.
"""

from __future__ import annotations

import dataclasses
import zlib

from dreamer.rollup.analysis import analysis_record, kept_profile
from dreamer.rollup.cards import sentences
from dreamer.rollup.similarity import (
    Sketch,
    TextProfile,
    content_shingles,
    profile_text,
    sketch_of,
    sketch_text,
)

__all__ = ["Existing", "sentence_sketches", "stored_sketch"]

# Between the sentences' sketches, and between a sentence's checksum and its sketch's fields.
_PART, _FIELD = "\x1e", "\x1f"


def stored_sketch(text: str) -> Sketch:
    """The sketch a ledger row keeps: the text's, with its sentences' when it has several, and its
    analysis (`dreamer.rollup.analysis`)."""
    profile = profile_text(text)
    return dataclasses.replace(
        sketch_of(profile), parts=sentence_sketches(text), analysis=analysis_record(profile)
    )


def sentence_sketches(text: str) -> str | None:
    """The sketches of the sentences of ``text``, as a stored sketch keeps them; None for a text of
    one sentence (or none)."""
    said = sentences(text)
    return _PART.join(_part(sentence) for sentence in said) if len(said) > 1 else None


def _checksum(sentence: str) -> str:
    return format(zlib.crc32(sentence.encode("utf-8", "surrogatepass")), "08x")


def _part(sentence: str) -> str:
    profile = profile_text(sentence)
    return _FIELD.join((_checksum(sentence), *sketch_of(profile).fields(), analysis_record(profile)))


def _kept_parts(kept: str | None, said: list[str]) -> list[Sketch] | list[None]:
    """The stored sketches of the sentences ``said``, each checked against its sentence; all None
    (sketch them again) when none are kept, or they are not these sentences', or do not read."""
    pieces = kept.split(_PART) if kept is not None else []
    if len(pieces) != len(said):
        return [None] * len(said)
    sketches = []
    for piece, sentence in zip(pieces, said, strict=True):
        fields = piece.split(_FIELD)
        if len(fields) not in (4, 5) or fields[0] != _checksum(sentence):
            return [None] * len(said)
        sketches.append(Sketch.of_fields(*fields[1:4], analysis=fields[4] if len(fields) == 5 else None))
    return sketches


class Existing:
    """Something a card can repeat: a ledger card, an earlier card of the batch, an upstream
    candidate, or one sentence of one of those (``part``: its place, from 0; its ``card_id`` and
    ``repeats`` are its card's, so a repeat of the sentence is a repeat of the card).

    Known by its sketch; the full profile is computed on first use and kept.
    """

    __slots__ = (
        "_parts",
        "_profile",
        "_same_text",
        "_shingles",
        "card_id",
        "origin",
        "part",
        "repeats",
        "semantic_score",
        "sketch",
        "text",
    )

    card_id: str
    origin: str
    text: str
    sketch: Sketch
    semantic_score: float | None
    repeats: str | None
    part: int | None
    _parts: tuple[Existing, ...] | None
    _profile: TextProfile | None
    _same_text: Existing | None
    _shingles: frozenset[str] | None

    def __init__(
        self,
        card_id: str,
        origin: str,
        text: str,
        *,
        profile: TextProfile | None = None,
        sketch: Sketch | None = None,
        same_text: Existing | None = None,
        semantic_score: float | None = None,
        repeats: str | None = None,
        part: int | None = None,
    ) -> None:
        self.card_id = card_id
        self.origin = origin
        self.text = text
        self._profile = profile
        self._shingles = None
        #: Another entry with this very text, whose analysis this one shares.
        self._same_text = same_text
        if sketch is None and same_text is not None:
            sketch = same_text.sketch
        elif sketch is None:
            # Without the full analysis unless it was made: the sketch turns most sentences away.
            sketch = sketch_of(profile) if profile is not None else sketch_text(text)
        self.sketch = sketch
        self.semantic_score = semantic_score
        #: For an earlier batch card that was itself a duplicate: the card it repeats.
        self.repeats = repeats
        self.part = part
        self._parts = None if part is None else ()

    @property
    def profile(self) -> TextProfile:
        if self._profile is None:
            if self._same_text is not None:
                self._profile = self._same_text.profile
            else:
                self._profile = kept_profile(self.text, self.sketch) or profile_text(self.text)
        return self._profile

    @property
    def shingles(self) -> frozenset[str]:
        """The character shingles of the content words, without analysing the whole text (from
        the analysis kept with a stored card, when it is)."""
        if self._profile is not None:
            return self._profile.shingles
        if self._same_text is not None:
            return self._same_text.shingles
        if self.sketch.analysis is not None and (kept := kept_profile(self.text, self.sketch)) is not None:
            self._profile = kept
            return kept.shingles
        if self._shingles is None:
            self._shingles = content_shingles(self.text)
        return self._shingles

    @property
    def parts(self) -> tuple[Existing, ...]:
        """Its sentences, each an entry of its own, when it has more than one; else none."""
        if self._parts is None:
            said = sentences(self.text)
            kept = _kept_parts(self.sketch.parts, said)
            self._parts = (
                tuple(
                    Existing(self.card_id, self.origin, text, sketch=sketch, repeats=self.repeats, part=i)
                    for i, (text, sketch) in enumerate(zip(said, kept, strict=True))
                )
                if len(said) > 1
                else ()
            )
        return self._parts
