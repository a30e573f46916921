"""The key-leak check itself: it finds a piece of the key, and stays off for the development key."""

from __future__ import annotations

from tests.support.keyleak import DEVELOPMENT_KEY, key_pieces, leaked_pieces


def test_finds_any_eight_character_piece() -> None:
    """A piece of a CI-style key (letters of both cases) in a message is found."""
    pieces = key_pieces("hs-ci-Q8f2a_91cK07d3eZ4b5a")
    assert leaked_pieces("error: Bearer hs-ci-Q8f", pieces) == ["hs-ci-Q8", "s-ci-Q8f"]
    assert leaked_pieces("…91cK07d3…", pieces) == ["91cK07d3"]
    assert leaked_pieces("nothing here", pieces) == []


def test_id_like_pieces_are_not_evidence() -> None:
    """A piece spelled only with lowercase hex digits and dashes could be part of any UUID: a unit
    id that happens to contain it is not a leak, while the key's other pieces are still searched."""
    pieces = key_pieces("hs-dev-9b6cbca4a56e0b98")
    uuid = "ea8201ce-9065-4b41-aa23-9b6cbca4a56e"
    assert "9b6cbca4" not in pieces
    assert leaked_pieces(uuid, pieces) == []
    assert leaked_pieces("Bearer hs-dev-9b6", pieces) == ["-dev-9b6", "hs-dev-9", "s-dev-9b"]


def test_off_for_the_development_key_and_short_keys() -> None:
    """The shared development key and short keys switch the check off."""
    assert key_pieces(DEVELOPMENT_KEY) == frozenset()
    assert key_pieces("short") == frozenset()
