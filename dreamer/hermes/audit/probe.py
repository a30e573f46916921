"""Checking whether the URLs named in technical-config entries still answer.

This is the audit's only network I/O, kept behind the `UrlProbe` protocol so the planner stays
pure: it receives a mapping URL → answered. "Answered" means any HTTP response at all, an error
status included (the service is there); a refused connection, a DNS failure or a timeout means it
did not. Requests go straight to the host (proxy variables are ignored, so a proxy that is up
cannot vouch for a service that is down) and never follow redirects.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Protocol

import httpx

__all__ = ["HttpUrlProbe", "UrlProbe", "extract_urls", "probe_urls"]

_URL = re.compile(r"https?://[^\s<>\"'`]+", re.IGNORECASE)
_TRAILING = ".,;:!?)]}"


class UrlProbe(Protocol):
    """Tells whether a URL answers."""

    def __call__(self, url: str) -> bool:
        """True if `url` gave any HTTP response."""
        ...


def extract_urls(text: str) -> tuple[str, ...]:
    """The http(s) URLs in `text`, in order, without trailing punctuation, each once."""
    found: dict[str, None] = {}
    for match in _URL.finditer(text):
        url = match.group(0)
        while url and url[-1] in _TRAILING:
            url = url[:-1]
        if "://" in url and url.split("://", 1)[1]:
            found.setdefault(url, None)
    return tuple(found)


class HttpUrlProbe:
    """A `UrlProbe` doing one GET per URL with a short timeout."""

    def __init__(self, timeout_s: float) -> None:
        self._timeout = httpx.Timeout(timeout_s)

    def __call__(self, url: str) -> bool:
        try:
            with (
                httpx.Client(timeout=self._timeout, follow_redirects=False, trust_env=False) as client,
                client.stream("GET", url) as response,
            ):
                # Headers arrived: the service answered. The body is not needed.
                return response.status_code > 0
        except (httpx.HTTPError, httpx.InvalidURL, ValueError):
            return False


def probe_urls(urls: Iterable[str], probe: UrlProbe) -> Mapping[str, bool]:
    """Each distinct URL of `urls` probed once."""
    results: dict[str, bool] = {}
    for url in urls:
        if url not in results:
            results[url] = probe(url)
    return results
