"""The guard on the Hindsight client: only the allow-listed requests, to the configured server, ever
leave the process.

Responses replayed here are the bodies recorded from a real Hindsight 1.1.0 server
(``tests/fixtures/hindsight_responses.json``, through :mod:`tests.support.hindsight_replay`).
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from dreamer.backends.base import RetainItem
from dreamer.backends.hindsight.allowlist import ALLOWED_REQUESTS, check_request_allowed
from dreamer.backends.hindsight.backend import HindsightBackend
from dreamer.errors import ForbiddenRequestError
from tests.support.hindsight_replay import BANK, backend_with, no_network, route_recorded


async def exercise_every_method(backend: HindsightBackend) -> None:
    """Call each MemoryBackend method once with ordinary arguments."""
    await backend.activity([BANK, "other"])
    await backend.list_units_since(
        BANK, datetime(2024, 1, 1, tzinfo=UTC), fact_types=["world", "observation"]
    )
    await backend.recall(BANK, "What does Alice prefer?", tags=["user:alice"], tags_match="any_strict")
    await backend.reflect(BANK, "Summarise", response_schema={"type": "object"})
    await backend.retain(BANK, [RetainItem(content="Alice likes tea.", document_id="card-1")])
    await backend.consolidate(BANK)


# --------------------------------------------------------------------------------- the guard


class TestAllowList:
    async def test_every_backend_method_sends_only_allowed_requests(self) -> None:
        """Each MemoryBackend method's requests, as they reach the transport, are on the allow-list."""
        backend, recorder = backend_with(route_recorded)
        await exercise_every_method(backend)
        sent = {(r.method, r.url.raw_path.decode().split("?")[0]) for r in recorder.requests}
        for method, path in sent:
            check_request_allowed(method, path)
        purposes = {
            rule.purpose for rule in ALLOWED_REQUESTS for method, path in sent if rule.matches(method, path)
        }
        assert {
            "list banks (activity)",
            "list memory units",
            "recall",
            "reflect",
            "retain",
            "consolidate",
        } <= (purposes)

    def test_allow_list_has_no_destructive_method(self) -> None:
        """Only GET and POST appear, and POST only on retain, recall, reflect and consolidate."""
        assert {rule.method for rule in ALLOWED_REQUESTS} == {"GET", "POST"}
        assert sorted(rule.purpose for rule in ALLOWED_REQUESTS if rule.method == "POST") == [
            "consolidate",
            "recall",
            "reflect",
            "retain",
        ]

    @pytest.mark.parametrize(
        ("method", "path"),
        [
            ("DELETE", f"/v1/default/banks/{BANK}"),
            ("DELETE", f"/v1/default/banks/{BANK}/memories"),
            ("DELETE", f"/v1/default/banks/{BANK}/documents/card-c3"),
            ("PATCH", f"/v1/default/banks/{BANK}/memories/641eed31-ed08-477d-84bf-4e892593b202"),
            ("PATCH", f"/v1/default/banks/{BANK}"),
            ("PUT", f"/v1/default/banks/{BANK}"),
            ("POST", f"/v1/default/banks/{BANK}/documents"),
            ("POST", f"/v1/default/banks/{BANK}/mental-models"),
            ("POST", f"/v1/default/banks/{BANK}/memories/clear"),
            ("GET", f"/v1/default/banks/{BANK}"),
            ("GET", f"/v1/default/banks/{BANK}/memories/list/../../../{BANK}"),
            ("POST", "/v1/default/banks/a%2Fb/memories"),
            ("POST", "/v1/default/banks/../memories"),
            ("POST", "/v1/default/banks/%2E%2E/memories"),
            ("HEAD", "/health"),
        ],
    )
    async def test_forbidden_requests_raise_before_the_transport_sees_anything(
        self, method: str, path: str
    ) -> None:
        """Deletes, patches, replaces and POSTs elsewhere raise ForbiddenRequestError unsent."""
        backend, recorder = backend_with(no_network)
        with pytest.raises(ForbiddenRequestError):
            await backend._request(method, path, operation="probe")
        assert recorder.requests == []

    async def test_absolute_url_to_another_host_is_refused(self) -> None:
        """A request cannot be pointed away from the configured server."""
        backend, recorder = backend_with(no_network)
        with pytest.raises(ForbiddenRequestError):
            await backend._request("GET", "http://127.0.0.2:8888/health", operation="probe")
        assert recorder.requests == []

    @pytest.mark.parametrize(
        ("method", "url"),
        [
            ("DELETE", f"/v1/default/banks/{BANK}"),
            ("PATCH", f"/v1/default/banks/{BANK}/memories/641eed31-ed08-477d-84bf-4e892593b202"),
            ("PUT", f"/v1/default/banks/{BANK}"),
            ("POST", "http://127.0.0.2:8888/v1/default/banks/x/memories"),
        ],
    )
    async def test_requests_made_directly_on_the_client_are_refused(self, method: str, url: str) -> None:
        """The guard sits in the client's transport: code that bypasses the backend's methods and
        calls its httpx client directly is refused too, before the network sees anything."""
        backend, recorder = backend_with(no_network)
        with pytest.raises(ForbiddenRequestError):
            await backend._client.request(method, url)
        assert recorder.requests == []

    @pytest.mark.parametrize("bank_id", ["a/b", "..", ".", "x/../y"])
    async def test_bank_ids_that_would_change_the_route_are_refused(self, bank_id: str) -> None:
        """A bank id that decodes to a slash or a dot segment never leaves the process."""
        backend, recorder = backend_with(no_network)
        with pytest.raises(ForbiddenRequestError):
            await backend.retain(bank_id, [RetainItem(content="x y z")])
        assert recorder.requests == []
