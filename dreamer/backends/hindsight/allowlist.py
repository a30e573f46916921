"""The append-only allow-list: every request the Hindsight backend may ever send.

:class:`AllowListTransport` wraps the httpx transport of the backend's client, so each request,
however it was made, is checked here before a byte leaves the process: same scheme, host and port
as the configured server, a path under its API base, and a method and path that match one
:class:`AllowedRequest`. Anything else raises :class:`~dreamer.errors.ForbiddenRequestError`.

Why the list is append-only and why the check sits in the transport: ``docs/design/hindsight.md``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final
from urllib.parse import unquote

import httpx

from dreamer.errors import ForbiddenRequestError

__all__ = ["ALLOWED_REQUESTS", "AllowListTransport", "AllowedRequest", "check_request_allowed"]

#: One URL-quoted path segment (what ``quote(value, safe="")`` produces).
_SEGMENT: Final = r"(?:[A-Za-z0-9_.~-]|%[0-9A-Fa-f]{2})+"
_BANK: Final = rf"/v1/default/banks/{_SEGMENT}"


@dataclass(frozen=True, slots=True)
class AllowedRequest:
    """One permitted request shape: an HTTP method and a regex the whole path must match."""

    method: str
    path_pattern: str
    purpose: str

    def matches(self, method: str, path: str) -> bool:
        return method == self.method and re.fullmatch(self.path_pattern, path) is not None


#: Everything this backend may ever send. Nothing here deletes, patches or replaces memory.
ALLOWED_REQUESTS: Final[tuple[AllowedRequest, ...]] = (
    AllowedRequest("GET", r"/health", "health"),
    AllowedRequest("GET", r"/version", "server version"),
    AllowedRequest("GET", r"/v1/default/banks", "list banks (activity)"),
    AllowedRequest("GET", rf"{_BANK}/memories/list", "list memory units"),
    AllowedRequest("GET", rf"{_BANK}/stats", "bank statistics"),
    AllowedRequest("GET", rf"{_BANK}/documents", "list documents"),
    AllowedRequest("GET", rf"{_BANK}/documents/{_SEGMENT}", "one document"),
    AllowedRequest("GET", rf"{_BANK}/operations", "list operations"),
    AllowedRequest("GET", rf"{_BANK}/operations/{_SEGMENT}", "one operation"),
    AllowedRequest("POST", rf"{_BANK}/memories", "retain"),
    AllowedRequest("POST", rf"{_BANK}/memories/recall", "recall"),
    AllowedRequest("POST", rf"{_BANK}/reflect", "reflect"),
    AllowedRequest("POST", rf"{_BANK}/consolidate", "consolidate"),
)


def check_request_allowed(method: str, path: str) -> None:
    """Raise :class:`ForbiddenRequestError` unless ``method path`` is on :data:`ALLOWED_REQUESTS`.

    ``path`` is the raw (percent-encoded) path relative to the API base, without a query string.
    A segment that decodes to ``/``, ``.`` or ``..`` (or is empty) is refused whatever it matches.
    """
    segments = path.split("/")[1:]
    decoded = [unquote(s) for s in segments]
    sneaky = any(s in ("", ".", "..") or "/" in s for s in decoded)
    if not sneaky and any(rule.matches(method, path) for rule in ALLOWED_REQUESTS):
        return
    raise ForbiddenRequestError(
        f"refused {method} {path}: Dreamer only appends to memory and never sends a request "
        "outside its allow-list (GET on read paths; POST on retain, recall, reflect, consolidate)"
    )


class AllowListTransport(httpx.AsyncBaseTransport):
    """An httpx transport that sends only allowed requests to one server, through ``inner``."""

    def __init__(self, base_url: str, inner: httpx.AsyncBaseTransport) -> None:
        self._base = httpx.URL(base_url)
        self._base_path = self._base.raw_path.decode("ascii").split("?")[0].rstrip("/")
        self._inner = inner

    def check(self, request: httpx.Request) -> None:
        """Raise :class:`ForbiddenRequestError` unless ``request`` may be sent."""
        url = request.url
        if (url.scheme, url.host, url.port) != (self._base.scheme, self._base.host, self._base.port):
            raise ForbiddenRequestError(f"refused {request.method} to another host: {url.host}")
        raw_path = url.raw_path.decode("ascii").split("?")[0]
        if not raw_path.startswith(self._base_path + "/"):
            raise ForbiddenRequestError(f"refused {request.method} {raw_path}: outside the API base")
        check_request_allowed(request.method, raw_path[len(self._base_path) :])

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.check(request)
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self._inner.aclose()
