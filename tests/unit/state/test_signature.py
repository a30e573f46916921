"""The word signature the state keeps beside each card: one bit of 63 per word, the same in every
process, and a hostile word hashes like any other."""

from __future__ import annotations

import os
import subprocess
import sys

from dreamer.state.signature import SIGNATURE_BITS, word_bit, word_signature

WORDS = ["alpha", "beta", "gamma", "Zoë", "東京", "x" * 5000, "", "\ud800lone", "c++", "-5"]


def test_each_word_sets_one_bit_of_63() -> None:
    for word in WORDS:
        bit = word_bit(word)
        assert bit > 0 and bit.bit_count() == 1 and bit < 1 << SIGNATURE_BITS


def test_a_signature_is_the_or_of_its_words_and_fits_a_signed_64_bit_integer() -> None:
    signature = word_signature(WORDS)
    for word in WORDS:
        assert signature & word_bit(word)
    assert signature == word_signature(reversed(WORDS)) == word_signature([*WORDS, *WORDS])
    assert 0 <= signature < 2**63
    assert word_signature([]) == 0


def test_the_bits_are_the_same_in_another_process_with_another_hash_seed() -> None:
    """Signatures are stored: Python's own `hash` (salted per process) would make them unreadable
    by the next process."""
    code = f"from dreamer.state.signature import word_bit; print([word_bit(w) for w in {WORDS[:6]!r}])"
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == str([word_bit(w) for w in WORDS[:6]])


def test_words_spread_over_the_bits() -> None:
    """Not every word on a few bits (a signature that is always full rules nothing out)."""
    bits = {word_bit(f"word{i}") for i in range(2000)}
    assert len(bits) == SIGNATURE_BITS
