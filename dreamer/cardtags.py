"""The tags and metadata keys Dreamer writes on memories, shared by the roll-up that writes them and
the read side that reads them back (on Hindsight the only record a recall result carries).

- ``rollup`` (tag) with the metadata key ``dreamer_version`` (:data:`CARD_MARK`): a card the roll-up
  promoted; never rolled up again. The tag alone is not enough: an agent may tag its own memory
  "rollup" by accident, and such a memory is rolled up like any other (:func:`is_dreamer_card`).
- ``src:<profile>`` (tag): the profile whose memories the card consolidates.
- ``supersedes`` (tag, and metadata key whose value is the older card's document id): a conflict
  under ``recency_wins``; the older card is superseded.
- ``related_to`` (metadata key whose value is a stored card's document id): the card was kept beside
  a stored one it is near (a later instance of the same event, or a near card that does not hold
  its words), and names it; recall shows the link.
- ``scope:<value>`` (tag): the memory holds only within a scope: a ``keep_both`` conflict carries
  its profile, ``dreamer retain --scope`` a value of the caller's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

__all__ = [
    "CARD_MARK",
    "RELATED_TO",
    "ROLLUP_TAG",
    "SCOPE_TAG_PREFIX",
    "SOURCE_TAG_PREFIX",
    "SUPERSEDES",
    "is_dreamer_card",
    "scope_tags",
    "source_tag",
]

#: The tag every Dreamer card carries upstream; with :data:`CARD_MARK`, never rolled up again.
ROLLUP_TAG = "rollup"
#: The metadata key (Dreamer's version) every card Dreamer promotes carries.
CARD_MARK = "dreamer_version"
SOURCE_TAG_PREFIX = "src:"
#: Both the tag of a card that supersedes another and the metadata key naming the one it supersedes.
SUPERSEDES = "supersedes"
SCOPE_TAG_PREFIX = "scope:"
#: The metadata key naming the stored card a card was kept beside (near it, but another fact).
RELATED_TO = "related_to"


def is_dreamer_card(tags: Sequence[str], metadata: Mapping[str, str]) -> bool:
    """Whether a memory is a card Dreamer promoted: the ``rollup`` tag and Dreamer's metadata key."""
    return ROLLUP_TAG in tags and CARD_MARK in metadata


def source_tag(profile: str) -> str:
    return SOURCE_TAG_PREFIX + profile


def scope_tags(tags: Sequence[str]) -> tuple[str, ...]:
    """The ``scope:<value>`` tags among ``tags``, in order, without repeats."""
    scoped = (t for t in tags if t.startswith(SCOPE_TAG_PREFIX) and len(t) > len(SCOPE_TAG_PREFIX))
    return tuple(dict.fromkeys(scoped))
