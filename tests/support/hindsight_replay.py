"""A Hindsight client over a replaying transport: the bodies a real 1.1.0 server sent, by name.

The recorded exchanges are ``tests/fixtures/hindsight_responses.json``; :func:`backend_with` builds a
:class:`HindsightBackend` whose transport answers with them (or with any handler) and records every
request it was sent.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
from pydantic import SecretStr

from dreamer.backends.hindsight.backend import HindsightBackend
from dreamer.config import HindsightBackendConfig

FIXTURES: dict[str, Any] = json.loads(
    (Path(__file__).parent.parent / "fixtures" / "hindsight_responses.json").read_text(encoding="utf-8")
)
KEY = "hs-test-key-9f8e7d6c5b4a"
URL = "http://127.0.0.1:8888"
BANK = "dreamer-stub2"

Handler = Callable[[httpx.Request], httpx.Response]


def recorded(name: str) -> dict[str, Any]:
    """A deep copy of one recorded exchange (so tests may edit it freely)."""
    return copy.deepcopy(FIXTURES[name])


def answer(name: str, *, headers: dict[str, str] | None = None) -> httpx.Response:
    """The recorded response ``name`` as an httpx response."""
    entry = recorded(name)
    extra = dict(headers or {})
    if entry.get("retry_after") is not None:
        extra.setdefault("Retry-After", str(entry["retry_after"]))
    return httpx.Response(entry["status"], json=entry["body"], headers=extra)


class Recorder:
    """A MockTransport handler that logs every request it sees and delegates the answer."""

    def __init__(self, respond: Handler) -> None:
        self.respond = respond
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        return self.respond(request)


def backend_with(
    respond: Handler, *, page_size: int = 100, api_key: str | None = KEY, **settings: Any
) -> tuple[HindsightBackend, Recorder]:
    recorder = Recorder(respond)
    config = HindsightBackendConfig(
        url=URL,
        page_size=page_size,
        api_key=SecretStr(api_key) if api_key is not None else None,
        **settings,
    )
    return HindsightBackend(config, transport=httpx.MockTransport(recorder)), recorder


def route_recorded(request: httpx.Request) -> httpx.Response:
    """Answer every allowed route with the matching recorded 1.1.0 body."""
    path, method = request.url.path, request.method
    if path == "/v1/default/banks":
        return answer("banks_list_four")
    if path.endswith("/memories/list"):
        return answer("memories_list_document")
    if path.endswith("/memories/recall"):
        return answer("recall_basic")
    if path.endswith("/reflect"):
        return answer("reflect_with_facts")
    if path.endswith("/consolidate"):
        return answer("consolidate")
    if method == "POST" and path.endswith("/memories"):
        return answer("retain_sync_single")
    return httpx.Response(404, json={"detail": "Not Found"})


def with_stored_units(respond: Handler) -> Handler:
    """``respond`` for everything but the unit count reflect asks for first (a recorded bank of 2)."""

    def handler(request: httpx.Request) -> httpx.Response:
        if request.method == "GET" and request.url.path.endswith("/memories/list"):
            return answer("memories_list_document")
        return respond(request)

    return handler


def no_network(request: httpx.Request) -> httpx.Response:
    raise AssertionError(f"nothing should have been sent, got {request.method} {request.url}")
