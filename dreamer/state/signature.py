"""A ledger card's word signature, as the state keeps it beside the card's word-set sizes: one bit
of 63 set for each word the card is found by, the bit a fixed hash of the word.

The signature only ever over-counts: a word of another card whose bit is set in it may be one of
the card's words or share its bit with one, so the words of a new card found in a signature are at
least those the two cards share. That is what lets the judge rule out most of the cards the word
index names without reading them (`dreamer.rollup.candidates.GateProbe`). 63 bits keep the value a
positive 64-bit integer in SQLite and PostgreSQL alike; the hash is BLAKE2b, not Python's `hash`,
which differs between processes. Changing either changes every stored signature: a schema upgrade
must then drop them. Pure.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Iterable

__all__ = ["SIGNATURE_BITS", "word_bit", "word_signature"]

#: How many bits a signature has.
SIGNATURE_BITS = 63


@functools.lru_cache(maxsize=4096)  # the common words; about 0.5 MB held
def word_bit(word: str) -> int:
    """The signature bit of ``word`` (a mask with one bit set)."""
    # "surrogatepass": a lone surrogate left in a word by a hostile text still hashes, never raises.
    digest = hashlib.blake2b(word.encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return 1 << (int.from_bytes(digest, "little") % SIGNATURE_BITS)


def word_signature(words: Iterable[str]) -> int:
    """The signature of a card found by ``words``: the bits of its words, OR-ed."""
    signature = 0
    for word in words:
        signature |= word_bit(word)
    return signature
