"""Which URLs named in memory text the audit may check: the hosts the operator listed, nothing else.

Memory text is written by agents and by whatever they read, so a URL in it is never trusted as a
target. `HostAllowList` maps such a URL to the one request the audit may send for it, or to None:
`scheme://host:port/`, the root of a listed host (``audit.verify_hosts``: ``host`` for any port,
``host:port`` for one). Nothing of the URL but its scheme, host and port is sent: not its path
(many servers answer HEAD with their GET handler, so ``HEAD /users/7/delete`` could act), its user
part, its query string or its fragment. Any answer means the service is there, which is all the
check asks. The host is the
one httpx itself parses from the URL, so the host that is checked against the list and the host the
request goes to cannot differ. Why: ``docs/design/hermes-audit.md``.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass

import httpx

from dreamer.config.fields import verify_host

__all__ = ["HostAllowList", "url_host"]

_DEFAULT_PORTS = {"http": 80, "https": 443}


@dataclass(frozen=True)
class HostAllowList:
    """The hosts whose URLs may be checked; empty (the default): no URL is ever requested."""

    #: (host, port); port None: any port of that host.
    entries: frozenset[tuple[str, int | None]] = frozenset()

    @classmethod
    def parse(cls, hosts: Iterable[str]) -> HostAllowList:
        """The list from ``audit.verify_hosts`` entries; ValueError naming a malformed one."""
        return cls(frozenset(verify_host(host) for host in hosts))

    def __bool__(self) -> bool:
        return bool(self.entries)

    def allows(self, host: str, port: int) -> bool:
        """Whether ``host`` (as httpx parses it) on ``port`` is listed."""
        host = _canonical_host(host)
        return (host, None) in self.entries or (host, port) in self.entries

    def request_url(self, url: str) -> str | None:
        """The URL to send for ``url``: ``scheme://host:port/`` when its host is listed, else None
        (not checked). Never its path, query string, fragment or user part."""
        try:
            parsed = httpx.URL(url)
            if parsed.scheme not in _DEFAULT_PORTS or not parsed.raw_host:
                return None
            port = parsed.port or _DEFAULT_PORTS[parsed.scheme]
            host = parsed.raw_host.decode("ascii")
            if not self.allows(host, port):
                return None
            target = httpx.URL(scheme=parsed.scheme, host=host, port=port, raw_path=b"/")
        except (httpx.InvalidURL, UnicodeError, ValueError):
            return None
        # Parsed again, as the client will: the same host and port, and nothing but the root.
        again = httpx.URL(str(target))
        if (
            again.raw_host != parsed.raw_host
            or (again.port or _DEFAULT_PORTS[again.scheme]) != port
            or again.raw_path != b"/"
            or again.query
            or again.fragment
            or again.userinfo
        ):
            return None
        return str(again)


def url_host(url: str) -> str:
    """``host:port`` of ``url`` as the allow-list reads it (for reports), or "" when it has none."""
    try:
        parsed = httpx.URL(url)
        host = parsed.raw_host.decode("ascii")
        port = parsed.port or _DEFAULT_PORTS.get(parsed.scheme)
    except (httpx.InvalidURL, UnicodeError, ValueError):
        return ""
    if not host:
        return ""
    shown = f"[{host}]" if ":" in host else host
    return f"{shown}:{port}" if port else shown


def _canonical_host(host: str) -> str:
    host = host.lower().rstrip(".")
    try:
        return ipaddress.IPv6Address(host).compressed
    except ValueError:
        return host
