"""The scope of a retained memory as a tag: ``dreamer retain --scope VALUE`` and the tools' ``scope``
tag the memory ``scope:<value>``, the tag a ``keep_both`` conflict carries with its profile's name.

Pure. A scope names where a fact holds (a host, a project, a repository), so two facts that would
otherwise conflict are kept apart rather than one superseding the other: a scoped memory's card
carries the tag upstream and its conflicts are kept both (``docs/design/readside.md``).
"""

from __future__ import annotations

import re

from dreamer.cardtags import SCOPE_TAG_PREFIX
from dreamer.errors import PolicyError

__all__ = ["MAX_SCOPE_CHARS", "SCOPE_PATTERN", "SCOPE_PREFIX", "ScopeError", "scope_tag"]

SCOPE_PREFIX = SCOPE_TAG_PREFIX
#: Longer than any host, project or repository name; a tag is not a place for prose.
MAX_SCOPE_CHARS = 64
#: A letter or digit, then letters, digits, ``.``, ``_`` or ``-``: every profile name fits, and a
#: value can neither hide a second tag level (``:``) or list (``,``) nor carry spaces or control
#: characters.
SCOPE_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"
_SCOPE = re.compile(SCOPE_PATTERN)
_RULE = (
    f"give 1 to {MAX_SCOPE_CHARS} printable characters without spaces: letters, digits, '.', '_' "
    "or '-', starting with a letter or digit (e.g. a host or project name)"
)


class ScopeError(PolicyError):
    """A scope value that cannot be a tag (a usage error, exit 2); the message says what is allowed."""


def scope_tag(value: str) -> str:
    """``scope:<value>`` for a usable scope, else :class:`ScopeError` saying what a scope may be.

    Surrounding whitespace is trimmed and a ``scope:`` prefix already given is not doubled; the
    case is kept, so the tag is exactly what a later filter names.
    """
    if not isinstance(value, str):
        raise ScopeError(f"scope must be a string, not {type(value).__name__}; {_RULE}")
    scope = value.strip()
    if scope.startswith(SCOPE_PREFIX):
        scope = scope[len(SCOPE_PREFIX) :]
    # repr escapes what a terminal would act on; a long value is shown clipped.
    shown = repr(scope[:MAX_SCOPE_CHARS]) + ("…" if len(scope) > MAX_SCOPE_CHARS else "")
    if not scope:
        raise ScopeError(f"scope {shown} is not usable: it is empty; {_RULE}, or leave it out")
    if len(scope) > MAX_SCOPE_CHARS:
        raise ScopeError(f"scope {shown} is not usable: it is {len(scope)} characters long; {_RULE}")
    if not _SCOPE.fullmatch(scope):
        what = "':' would make a second tag level" if ":" in scope else "it has a character not allowed"
        raise ScopeError(f"scope {shown} is not usable: {what}; {_RULE}")
    return SCOPE_PREFIX + scope
