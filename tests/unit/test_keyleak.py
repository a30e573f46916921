"""The key-leak check itself: it finds a piece of the key, and stays off for the development key."""

from __future__ import annotations

from tests.support.keyleak import DEVELOPMENT_KEY, key_pieces, leaked_pieces


def test_finds_any_eight_character_piece() -> None:
    pieces = key_pieces("hs-ci-8f2a91c07d3e4b5a")
    assert leaked_pieces("error: Bearer hs-ci-8f2", pieces) == ["hs-ci-8f", "s-ci-8f2"]
    assert leaked_pieces("…91c07d3e…", pieces) == ["91c07d3e"]
    assert leaked_pieces("nothing here", pieces) == []


def test_off_for_the_development_key_and_short_keys() -> None:
    assert key_pieces(DEVELOPMENT_KEY) == frozenset()
    assert key_pieces("short") == frozenset()
