"""Checking whether the URLs named in technical-config entries still answer.

This is the audit's only network I/O, kept behind the `UrlProbe` protocol so the planner stays
pure: it receives a mapping URL → answered, holding only the URLs that were checked. A URL is
checked only when its host is on the audit's allow-list (``audit.verify_hosts``, default: none,
:mod:`~.hosts`), with one HEAD to the root of its host and port: never its path, query string,
fragment or user part, no body. "Answered" means any HTTP response at all, an error status included (the
service is there); a refused connection, a DNS failure or a timeout means it did not. Requests go
straight to the host (proxy variables are ignored, so a proxy that is up cannot vouch for a service
that is down) and never follow redirects. A URL that was not checked is neither dead nor alive:
the planner leaves its entry as it is.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

import httpx

from dreamer.hermes.audit.hosts import HostAllowList, url_host

__all__ = ["HttpUrlProbe", "UrlChecks", "UrlProbe", "extract_urls", "probe_urls"]

_URL = re.compile(r"https?://[^\s<>\"'`]+", re.IGNORECASE)
_TRAILING = ".,;:!?)]}"


class UrlProbe(Protocol):
    """Tells whether a URL answers."""

    def __call__(self, url: str) -> bool | None:
        """True if `url` gave any HTTP response, False if not, None when it was not checked."""
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
    """A `UrlProbe` sending one HEAD per URL of a listed host, with a short timeout; any other URL
    is not checked (None), whoever calls it."""

    def __init__(self, timeout_s: float, allowed: HostAllowList) -> None:
        self._timeout = httpx.Timeout(timeout_s)
        self._allowed = allowed

    def __call__(self, url: str) -> bool | None:
        target = self._allowed.request_url(url)
        if target is None:
            return None
        try:
            with httpx.Client(timeout=self._timeout, follow_redirects=False, trust_env=False) as client:
                response = client.head(target)
                return response.status_code > 0
        except (httpx.HTTPError, httpx.InvalidURL, ValueError):
            return False


@dataclass(frozen=True)
class UrlChecks:
    """What the URL checks found: answers of the URLs checked, and the hosts not checked."""

    answers: Mapping[str, bool]
    #: ``host:port`` of each URL not checked, each once, in the order met.
    not_checked: tuple[str, ...] = ()


def probe_urls(urls: Iterable[str], probe: UrlProbe, allowed: HostAllowList) -> UrlChecks:
    """Each distinct URL of `urls` whose host `allowed` lists probed once; the others never reach
    `probe` and are counted as not checked."""
    answers: dict[str, bool] = {}
    skipped: dict[str, None] = {}
    for url in dict.fromkeys(urls):
        answer = probe(url) if allowed.request_url(url) is not None else None
        if answer is None:
            skipped.setdefault(url_host(url) or "a URL without a host", None)
        else:
            answers[url] = answer
    return UrlChecks(answers, tuple(skipped))
