"""``scope_tag``: a retained memory's scope becomes the tag ``scope:<value>``, or a clear refusal."""

from __future__ import annotations

from typing import Any

import pytest

from dreamer.errors import PolicyError, UsageError
from dreamer.readside.scope import MAX_SCOPE_CHARS, ScopeError, scope_tag


class TestScopeTag:
    @pytest.mark.parametrize("value", ["staging", "atlas", "homelab", "prod-eu_1.2", "A", "9lives", "s" * 64])
    def test_valid_values_become_the_tag(self, value: str) -> None:
        """Letters, digits, '.', '_', '-' (every profile name among them) are tagged as given."""
        assert scope_tag(value) == f"scope:{value}"

    def test_value_is_trimmed_not_folded_and_a_prefix_is_not_doubled(self) -> None:
        """Case is kept, so the tag is exactly what a later filter names; surrounding whitespace
        goes, and a value given as a tag already is tagged once."""
        assert scope_tag("Staging") == "scope:Staging"
        assert scope_tag("  staging\n") == "scope:staging"
        assert scope_tag("scope:repo-x") == "scope:repo-x"

    @pytest.mark.parametrize(
        ("value", "says"),
        [
            ("", "it is empty"),
            ("   ", "it is empty"),
            ("scope:", "it is empty"),
            ("s" * (MAX_SCOPE_CHARS + 1), "65 characters long"),
            ("x" * 1_000_000, "1000000 characters long"),
            ("prod:eu", "':' would make a second tag level"),
            ("scope:scope:prod", "':' would make a second tag level"),
            ("two words", "not allowed"),
            ("line\nbreak", "not allowed"),
            ("-flag", "not allowed"),
            ("a,b", "not allowed"),
            ("\x1b[31mred", "not allowed"),
            ("admin\u202e", "not allowed"),
            ("café", "not allowed"),
            ("../etc", "not allowed"),
        ],
    )
    def test_values_that_cannot_be_a_tag_are_refused_with_the_rule(self, value: str, says: str) -> None:
        """Empty, too long, a colon, the prefix, whitespace, control and non-ASCII characters are
        refused with a message naming what is allowed; the message never echoes a control character
        raw and never more than the allowed length of a long value."""
        with pytest.raises(ScopeError) as caught:
            scope_tag(value)
        message = str(caught.value)
        assert says in message and "is not usable" in message
        assert "letters, digits, '.', '_' or '-'" in message
        assert "\x1b" not in message and "\u202e" not in message and "\n" not in message
        assert len(message) < 400

    @pytest.mark.parametrize("value", [None, 7, ["staging"]])
    def test_non_strings_are_refused(self, value: Any) -> None:
        """A tool call's non-string scope is a usage error, not a crash."""
        with pytest.raises(ScopeError, match="must be a string"):
            scope_tag(value)

    def test_a_scope_error_is_a_policy_refusal(self) -> None:
        """Reported like a refused bank: one line and exit 2 at the CLI, an error the model can act
        on in a tool result."""
        assert issubclass(ScopeError, PolicyError) and issubclass(ScopeError, UsageError)

    def test_a_scope_becomes_one_tag(self) -> None:
        """``scope`` is stored as ``scope:<value>``; a value already prefixed is not doubled."""
        assert scope_tag("homelab") == "scope:homelab"
        assert scope_tag("scope:repo-x") == "scope:repo-x"

    @pytest.mark.parametrize("value", ["", "two words", "line\nbreak", "\x1b[2J", "x" * 65, "scope:"])
    def test_hostile_scopes_are_refused(self, value: str) -> None:
        """Whitespace, control characters, empty and overlong scopes are refused with what to give."""
        with pytest.raises(PolicyError, match="printable characters without spaces"):
            scope_tag(value)
