"""The scope of a retained memory as a tag: ``scope:<value>``, the tag ``keep_both`` conflicts use.

Pure. A scope names where a fact holds (a host, a project, a repository), so two facts that would
otherwise conflict are kept apart rather than one superseding the other.
"""

from __future__ import annotations

from dreamer.errors import PolicyError

__all__ = ["SCOPE_PREFIX", "scope_tag"]

SCOPE_PREFIX = "scope:"
#: Longer than any host, project or repository name; a tag is not a place for prose.
MAX_SCOPE_CHARS = 64


def scope_tag(value: str) -> str:
    """``scope:<value>`` for a scope of 1 to 64 printable characters without spaces; PolicyError
    otherwise, saying what a scope may be."""
    scope = value.strip()
    if scope.startswith(SCOPE_PREFIX):
        scope = scope[len(SCOPE_PREFIX) :]
    if (
        not scope
        or len(scope) > MAX_SCOPE_CHARS
        or not all(c.isprintable() and not c.isspace() for c in scope)
    ):
        shown = scope[:MAX_SCOPE_CHARS].encode("unicode_escape").decode("ascii")
        raise PolicyError(
            f"scope {shown!r} is not usable: give 1 to {MAX_SCOPE_CHARS} printable characters without "
            "spaces, e.g. a host or project name"
        )
    return SCOPE_PREFIX + scope
