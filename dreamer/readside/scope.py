"""The scope of a retained memory: ``dreamer retain --scope VALUE`` (and a tool's ``scope``) tags the
memory ``scope:<value>``, the tag a ``keep_both`` conflict carries with its profile's name.

A scoped memory's card carries the tag upstream, and its conflicts are kept both (a fact that holds
within one scope does not overturn another): ``docs/design/readside.md``.
"""

from __future__ import annotations

import re

from dreamer.cardtags import SCOPE_TAG_PREFIX
from dreamer.errors import UsageError

__all__ = ["MAX_SCOPE_CHARS", "SCOPE_PATTERN", "ScopeError", "scope_tag"]

#: Longest scope value accepted; a scope names a host, environment or project, not a sentence.
MAX_SCOPE_CHARS = 64
#: A letter or digit, then letters, digits, ``.``, ``_`` or ``-``: every profile name fits, and a
#: value can neither hide a second tag (``:``, ``,``) nor carry spaces or control characters.
SCOPE_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"
_SCOPE = re.compile(SCOPE_PATTERN)


class ScopeError(UsageError):
    """A scope value that cannot be a tag; the message says what is allowed."""


def scope_tag(value: str) -> str:
    """``scope:<value>`` for a valid scope value; :class:`ScopeError` naming the rule otherwise.

    The value is taken as given (no trimming or case folding), so the tag it makes is the tag a
    later filter will name.
    """
    if not isinstance(value, str):
        raise ScopeError(f"scope must be a string, not {type(value).__name__}")
    if not value:
        raise ScopeError("scope is empty: give a short name such as 'staging' or 'atlas', or leave it out")
    # repr escapes what a terminal would act on; a long value is shown clipped.
    shown = repr(value[:MAX_SCOPE_CHARS]) + ("…" if len(value) > MAX_SCOPE_CHARS else "")
    if len(value) > MAX_SCOPE_CHARS:
        raise ScopeError(
            f"scope {shown} is {len(value)} characters long; at most {MAX_SCOPE_CHARS} are allowed"
        )
    if value.startswith(SCOPE_TAG_PREFIX):
        raise ScopeError(f"scope {shown}: give the value without the 'scope:' prefix")
    if not _SCOPE.fullmatch(value):
        raise ScopeError(
            f"scope {shown} is not allowed: use letters, digits, '.', '_' and '-', "
            "starting with a letter or digit (no spaces or ':')"
        )
    return SCOPE_TAG_PREFIX + value
