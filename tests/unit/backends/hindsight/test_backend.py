"""The Hindsight HTTP client below the MemoryBackend interface: requests, errors, parsing, paging.

Responses replayed here are the bodies recorded from a real Hindsight 1.1.0 server
(``tests/fixtures/hindsight_responses.json``, through :mod:`tests.support.hindsight_replay`). A
hand-written transport answer appears only where a real server cannot be made to produce the case on
demand; each such test says so.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta, timezone
from email.utils import format_datetime
from typing import Any
from urllib.parse import parse_qs

import httpx
import pytest

from dreamer.backends.base import MemoryBackend, RetainItem
from dreamer.backends.hindsight.backend import HindsightBackend
from dreamer.backends.hindsight.statuses import parse_retry_after
from dreamer.errors import PermanentBackendError, ProtocolError, TransientBackendError
from dreamer.llm.usage import TokenUsage
from tests.support.hindsight_replay import (
    BANK,
    KEY,
    URL,
    Handler,
    answer,
    backend_with,
    no_network,
    recorded,
    route_recorded,
    with_stored_units,
)

CALL_FOR_FIXTURE: dict[str, Callable[[HindsightBackend], Any]] = {
    "recall_basic": lambda b: b.recall(BANK, "tea"),
    "memories_list_all": lambda b: b.list_units_since(BANK, None),
    "banks_list_four": lambda b: b.activity([BANK]),
    "reflect_with_facts": lambda b: b.reflect(BANK, "Summarise", response_schema={"type": "object"}),
    "retain_sync_single": lambda b: b.retain(BANK, [RetainItem(content="Alice likes tea.")]),
    "consolidate": lambda b: b.consolidate(BANK),
}


class TestRequests:
    async def test_bank_ids_are_quoted_into_one_segment(self) -> None:
        """Characters outside the unreserved set are percent-encoded in the path."""
        backend, recorder = backend_with(route_recorded)
        await backend.recall("private:hermes research", "tea")
        assert (
            recorder.requests[0].url.raw_path
            == b"/v1/default/banks/private%3Ahermes%20research/memories/recall"
        )

    async def test_retain_never_sends_update_mode(self) -> None:
        """Retain relies on replace-by-default with content-derived ids; append is never requested."""
        backend, recorder = backend_with(route_recorded)
        await backend.retain(BANK, [RetainItem(content="a b c", document_id="d1"), RetainItem(content="d e")])
        body = json.loads(recorder.requests[0].content)
        assert body["async"] is False
        assert all("update_mode" not in item for item in body["items"])

    def test_backend_satisfies_the_protocol(self) -> None:
        """HindsightBackend is a MemoryBackend with the advertised name and an LLM-backed reflect."""
        backend, _ = backend_with(no_network)
        assert isinstance(backend, MemoryBackend)
        assert (backend.name, backend.reflect_uses_llm) == ("hindsight", True)


# ------------------------------------------------------------------------- error classification


class TestErrorClassification:
    @pytest.mark.parametrize(
        ("fixture", "status"),
        [
            ("retain_llm_500", 500),
            ("retain_llm_429_as_500", 500),
            ("admission_503", 503),
        ],
    )
    async def test_recorded_server_failures_are_transient(self, fixture: str, status: int) -> None:
        """A recorded 500 (failed LLM call) or admission 503 becomes TransientBackendError."""
        backend, _ = backend_with(lambda r: answer(fixture))
        with pytest.raises(TransientBackendError) as caught:
            await backend.retain(BANK, [RetainItem(content="Ivy runs marathons in Berlin.")])
        assert caught.value.status == status
        assert recorded(fixture)["body"]["detail"] in str(caught.value)

    @pytest.mark.parametrize("status", [429, 500, 502, 503, 504])
    async def test_retryable_statuses_are_transient(self, status: int) -> None:
        """429 and 500/502/503/504 are TransientBackendError (a transport fake: gateways and rate
        limiters in front of Hindsight produce some of these, the server itself cannot be made to)."""
        backend, _ = backend_with(lambda r: httpx.Response(status, json={"detail": "busy"}))
        with pytest.raises(TransientBackendError) as caught:
            await backend.recall(BANK, "tea")
        assert (caught.value.status, caught.value.operation) == (status, "recall")

    @pytest.mark.parametrize(
        ("fixture", "call", "expected_detail"),
        [
            ("retain_duplicate_document_ids_400", "retain", "Batch contains duplicate document_ids"),
            (
                "retain_metadata_non_string_422",
                "retain",
                "items.0.metadata.n: Input should be a valid string",
            ),
            ("retain_invalid_timestamp_422", "retain", "items.0.timestamp: Value error, Invalid timestamp"),
            ("recall_empty_query_422", "recall", "query: Value error, query must contain"),
            ("get_bank_405", "recall", "Method Not Allowed"),
        ],
    )
    async def test_recorded_client_errors_are_permanent_with_the_server_detail(
        self, fixture: str, call: str, expected_detail: str
    ) -> None:
        """4xx answers become PermanentBackendError carrying ``detail`` (422 lists flattened)."""
        backend, _ = backend_with(lambda r: answer(fixture))
        with pytest.raises(PermanentBackendError) as caught:
            if call == "retain":
                await backend.retain(BANK, [RetainItem(content="x y z")])
            else:
                await backend.recall(BANK, "x")
        assert caught.value.detail.startswith(expected_detail)
        assert caught.value.status == recorded(fixture)["status"]

    @pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
    async def test_client_error_statuses_are_permanent(self, status: int) -> None:
        """400/401/403/404/422 never retry (transport fake: covers the whole status table at once)."""
        backend, _ = backend_with(lambda r: httpx.Response(status, json={"detail": "nope"}))
        with pytest.raises(PermanentBackendError) as caught:
            await backend.retain(BANK, [RetainItem(content="x")])
        assert (caught.value.status, caught.value.detail) == (status, "nope")

    async def test_unauthorized_names_the_setting_to_fix(self) -> None:
        """A 401 tells the operator to fix backend.hindsight.api_key_env or api_key_file."""
        backend, _ = backend_with(lambda r: answer("auth_invalid_key_401"))
        with pytest.raises(PermanentBackendError) as caught:
            await backend.activity([BANK])
        message = str(caught.value)
        assert "Invalid API key" in message
        assert "backend.hindsight.api_key_env" in message and "api_key_file" in message

    async def test_unauthorized_without_a_key_says_none_is_configured(self) -> None:
        """With no key configured the 401 message says so and names both settings."""
        backend, recorder = backend_with(lambda r: answer("auth_invalid_key_401"), api_key=None)
        with pytest.raises(PermanentBackendError, match="no API key is configured"):
            await backend.activity([BANK])
        assert "authorization" not in recorder.requests[0].headers

    async def test_bare_404_is_a_wrong_url_not_an_empty_bank(self) -> None:
        """Only Hindsight's "Bank '...' not found" reads as empty; a route 404 is an error."""
        backend, _ = backend_with(lambda r: httpx.Response(404, json={"detail": "Not Found"}))
        with pytest.raises(PermanentBackendError):
            await backend.list_units_since(BANK, None)

    @pytest.mark.parametrize(
        "failure",
        [
            httpx.ConnectError("connection refused"),
            httpx.ConnectTimeout("connect timed out"),
            httpx.ReadTimeout("read timed out"),
            httpx.RemoteProtocolError("server disconnected"),
        ],
    )
    async def test_transport_failures_are_transient(self, failure: Exception) -> None:
        """Timeouts and connection errors are TransientBackendError (transport fake: a network fault)."""

        def fail(request: httpx.Request) -> httpx.Response:
            raise failure

        backend, _ = backend_with(fail)
        with pytest.raises(TransientBackendError) as caught:
            await backend.recall(BANK, "tea")
        assert caught.value.retry_after is None
        assert URL in str(caught.value)

    async def test_reflect_uses_the_reflect_timeout(self) -> None:
        """Reflect waits reflect_timeout_s; the other calls wait read_timeout_s."""
        backend, recorder = backend_with(route_recorded, read_timeout_s=7.0, reflect_timeout_s=321.0)
        await backend.reflect(BANK, "Summarise")
        await backend.recall(BANK, "tea")
        reads = {r.url.path.rsplit("/", 1)[-1]: r.extensions["timeout"]["read"] for r in recorder.requests}
        assert reads == {"list": 7.0, "reflect": 321.0, "recall": 7.0}

    async def test_non_json_success_is_a_protocol_error(self) -> None:
        """A 200 whose body is not JSON is a ProtocolError (transport fake: e.g. a proxy's HTML page)."""
        backend, _ = backend_with(lambda r: httpx.Response(200, text="<html>hello</html>"))
        with pytest.raises(ProtocolError):
            await backend.recall(BANK, "tea")

    @pytest.mark.parametrize(
        ("fixture", "mutate"),
        [
            ("recall_basic", lambda b: b["results"][0].pop("id")),
            ("recall_basic", lambda b: b["results"][0].update(scores=None)),
            ("recall_basic", lambda b: b["results"][0]["metadata"].update(rev=2)),
            ("recall_basic", lambda b: b.update(results={"a": 1})),
            ("memories_list_all", lambda b: b["items"][0].pop("updated_at")),
            ("memories_list_all", lambda b: b["items"][0].update(updated_at="yesterday")),
            ("memories_list_all", lambda b: b["items"][1]["metadata"].update(card_id=["c2"])),
            ("memories_list_all", lambda b: b["items"][0].update(tags="user:bob")),
            ("memories_list_all", lambda b: b["items"][0].update(proof_count="1")),
            ("banks_list_four", lambda b: b["banks"][0].update(fact_count=None)),
            ("banks_list_four", lambda b: b.pop("total")),
            ("reflect_with_facts", lambda b: b.update(structured_output=["not", "an", "object"])),
            ("reflect_with_facts", lambda b: b["based_on"]["memories"][0].pop("text")),
            ("retain_sync_single", lambda b: b.pop("items_count")),
            ("retain_sync_single", lambda b: b.update(success=False)),
            ("consolidate", lambda b: b.pop("operation_id")),
        ],
    )
    async def test_malformed_recorded_bodies_are_protocol_errors(
        self, fixture: str, mutate: Callable[[dict[str, Any]], Any]
    ) -> None:
        """A recorded body with a field removed or mistyped is a ProtocolError, never a dict leak
        (transport fake: a real 1.1.0 server always sends these fields well-typed)."""
        body = recorded(fixture)["body"]
        mutate(body)
        respond: Handler = lambda r: httpx.Response(200, json=body)  # noqa: E731
        if fixture == "reflect_with_facts":
            respond = with_stored_units(respond)
        backend, _ = backend_with(respond)
        with pytest.raises(ProtocolError):
            await CALL_FOR_FIXTURE[fixture](backend)

    async def test_protocol_error_names_the_operation_and_the_field(self) -> None:
        """The message says which answer and which field was wrong, not the whole validation dump."""
        body = recorded("recall_basic")["body"]
        body["results"][0]["scores"]["final"] = "high"
        backend, _ = backend_with(lambda r: httpx.Response(200, json=body))
        with pytest.raises(ProtocolError) as caught:
            await backend.recall(BANK, "tea")
        message = str(caught.value)
        assert "Hindsight answered recall" in message and "response.results[0].scores.final" in message
        assert caught.value.operation == "recall" and "high" not in message

    async def test_newer_fields_from_the_server_are_ignored(self) -> None:
        """Fields Dreamer does not read (a newer server's additions) do not break parsing."""
        body = recorded("recall_basic")["body"]
        body["brand_new"] = {"x": 1}
        body["results"][0]["also_new"] = [1, 2]
        backend, _ = backend_with(lambda r: httpx.Response(200, json=body))
        assert len(await backend.recall(BANK, "tea")) == len(body["results"])


# ------------------------------------------------------------------------------- Retry-After


class TestRetryAfter:
    NOW = datetime(2026, 11, 30, 14, 0, 0, tzinfo=UTC)

    @pytest.mark.parametrize(
        ("header", "seconds"),
        [("1", 1.0), ("120", 120.0), (" 7 ", 7.0), ("1.5", 1.5), ("0", 0.0)],
    )
    def test_delay_seconds(self, header: str, seconds: float) -> None:
        """A delay-seconds value is that many seconds."""
        assert parse_retry_after(header, now=self.NOW) == seconds

    def test_http_date_in_the_future(self) -> None:
        """An HTTP-date is the time left until it."""
        header = format_datetime(self.NOW + timedelta(seconds=90), usegmt=True)
        assert parse_retry_after(header, now=self.NOW) == 90.0

    def test_http_date_in_the_past_is_zero(self) -> None:
        """A date already gone means "retry now"."""
        header = format_datetime(self.NOW - timedelta(hours=1), usegmt=True)
        assert parse_retry_after(header, now=self.NOW) == 0.0

    @pytest.mark.parametrize("header", [None, "", "soon", "-1", "1e3", "Mon, 99 Foo 2026"])
    def test_unparseable_means_no_advice(self, header: str | None) -> None:
        """Garbage gives None, never an exception."""
        assert parse_retry_after(header, now=self.NOW) is None

    async def test_transient_error_carries_retry_after_seconds(self) -> None:
        """The recorded admission-control 503 with ``Retry-After: 1`` gives retry_after == 1."""
        backend, _ = backend_with(lambda r: answer("admission_503"))
        with pytest.raises(TransientBackendError) as caught:
            await backend.retain(BANK, [RetainItem(content="x y z")])
        assert caught.value.retry_after == 1.0

    async def test_transient_error_carries_retry_after_date(self) -> None:
        """An HTTP-date Retry-After on a 429 becomes a positive delay (transport fake: rate limiter)."""
        when = format_datetime(datetime.now(UTC) + timedelta(hours=1), usegmt=True)
        backend, _ = backend_with(lambda r: httpx.Response(429, headers={"Retry-After": when}))
        with pytest.raises(TransientBackendError) as caught:
            await backend.recall(BANK, "tea")
        assert caught.value.retry_after is not None and 3000 < caught.value.retry_after <= 3600


# --------------------------------------------------------------------------------- redaction


class TestRedaction:
    def test_repr_shows_the_url_never_the_key(self) -> None:
        """repr() and str() name the server and hide the key."""
        backend, _ = backend_with(no_network)
        assert repr(backend) == f"HindsightBackend(url='{URL}')"
        assert KEY not in repr(backend) and KEY not in str(backend)

    async def test_key_is_sent_as_bearer_header(self) -> None:
        """The key travels only in ``Authorization: Bearer``."""
        backend, recorder = backend_with(route_recorded)
        await backend.activity([BANK])
        request = recorder.requests[0]
        assert request.headers["authorization"] == f"Bearer {KEY}"
        assert KEY not in str(request.url)

    async def test_key_echoed_by_the_server_is_redacted(self, caplog: pytest.LogCaptureFixture) -> None:
        """Even a server that echoes the key back cannot put it in an exception or a log line
        (transport fake: Hindsight itself never echoes the key)."""
        caplog.set_level(logging.DEBUG)
        backend, _ = backend_with(
            lambda r: httpx.Response(401, json={"detail": f"bad key {r.headers['authorization']}"})
        )
        with pytest.raises(PermanentBackendError) as caught:
            await backend.recall(BANK, "tea")
        assert KEY not in str(caught.value) and KEY not in caught.value.detail
        assert KEY not in repr(caught.value)
        assert KEY not in caplog.text

    async def test_key_absent_from_connection_errors_and_logs(self, caplog: pytest.LogCaptureFixture) -> None:
        """A connection failure message and the debug log never contain the key."""
        caplog.set_level(logging.DEBUG)

        def fail(request: httpx.Request) -> httpx.Response:
            raise httpx.ConnectError(f"refused while sending {dict(request.headers)}")

        backend, _ = backend_with(fail)
        with pytest.raises(TransientBackendError) as caught:
            await backend.recall(BANK, "tea")
        assert KEY not in str(caught.value)
        assert caught.value.__cause__ is None and caught.value.__suppress_context__
        assert KEY not in caplog.text


# -------------------------------------------------------------------------------- parsing


class TestParsing:
    async def test_activity_maps_the_bank_list(self) -> None:
        """fact_count and last_write_at come from the bank list; unlisted banks do not exist."""
        backend, recorder = backend_with(lambda r: answer("banks_list_four"))
        result = await backend.activity(["dreamer-stub2", "auto-created-bank", "nope"])
        assert result["dreamer-stub2"].unit_count == 10
        assert result["dreamer-stub2"].last_write_at == datetime(2026, 11, 30, 14, 11, 31, 794542, tzinfo=UTC)
        assert result["auto-created-bank"].exists
        assert not result["nope"].exists and result["nope"].unit_count == 0
        assert result["nope"].last_write_at is None
        assert len(recorder.requests) == 1

    async def test_activity_walks_pages_once_for_all_banks(self) -> None:
        """With page_size=2 the four recorded banks take two requests, not one per bank."""
        banks = recorded("banks_list_four")["body"]["banks"]

        def page(request: httpx.Request) -> httpx.Response:
            limit, offset = int(request.url.params["limit"]), int(request.url.params["offset"])
            return httpx.Response(
                200,
                json={"banks": banks[offset : offset + limit], "total": 4, "limit": limit, "offset": offset},
            )

        backend, recorder = backend_with(page, page_size=2)
        result = await backend.activity(["dreamer-test", "dreamer-stub", "auto-created-bank"])
        assert all(a.exists for a in result.values())
        assert [r.url.params["offset"] for r in recorder.requests] == ["0", "2"]

    async def test_activity_walks_again_when_the_order_moved(self) -> None:
        """A bank written mid-walk jumps to the front; the walk repeats before calling it unknown
        (transport fake: the reordering between two page requests cannot be timed on a real server)."""
        banks = recorded("banks_list_four")["body"]["banks"]
        calls = {"n": 0}

        def page(request: httpx.Request) -> httpx.Response:
            calls["n"] += 1
            offset = int(request.url.params["offset"])
            # After the first page, the last bank is written and jumps to the front.
            order = banks if calls["n"] == 1 else [banks[3], *banks[:3]]
            return httpx.Response(200, json={"banks": order[offset : offset + 2], "total": 4})

        backend, _ = backend_with(page, page_size=2)
        result = await backend.activity(["dreamer-test"])
        assert result["dreamer-test"].exists

    async def test_list_parses_recorded_units(self) -> None:
        """List items become MemoryUnits; ``updated_at`` is reported as created_at."""
        backend, recorder = backend_with(lambda r: answer("memories_list_all"))
        units = await backend.list_units_since(BANK, None)
        raw = recorded("memories_list_all")["body"]["items"]
        assert sorted(u.id for u in units) == sorted(i["id"] for i in raw)
        by_id = {u.id: u for u in units}
        bob = by_id["15dd2776-6580-4ac6-ac71-b969232c3ae0"]
        assert bob.created_at == datetime(2026, 11, 30, 14, 11, 31, 33609, tzinfo=UTC)
        assert (bob.fact_type, bob.document_id, bob.tags) == ("world", "card-c2", ("user:bob",))
        assert dict(bob.metadata) == {"card_id": "c2"} and bob.context is None
        observation = by_id["641eed31-ed08-477d-84bf-4e892593b202"]
        assert observation.source_memory_ids == ("b5acf9a9-b8df-4e5a-9dbc-73c8f3aeb064",)
        undated = by_id["8cea2262-ccf8-4789-9071-9363fb1e26cf"]
        assert undated.mentioned_at is None
        assert [(u.created_at, u.id) for u in units] == sorted((u.created_at, u.id) for u in units)
        params = recorder.requests[0].url.params
        assert params["time_field"] == "updated_at" and "start_date" not in params

    async def test_list_unknown_bank_is_empty(self) -> None:
        """The recorded 404 "Bank ... not found" reads as an empty bank."""
        backend, _ = backend_with(lambda r: answer("memories_list_unknown_bank_404"))
        assert await backend.list_units_since("does-not-exist", None) == []

    async def test_recall_maps_scores(self) -> None:
        """score is scores.final clamped to [0, 1]; semantic is kept (None when absent)."""
        backend, recorder = backend_with(lambda r: answer("recall_final_above_one"))
        items = await backend.recall(BANK, "Ivy marathon")
        assert [i.score for i in items] == [1.0, pytest.approx(0.10999999948250251)]
        assert items[0].semantic == pytest.approx(0.5163978049992207) and items[1].semantic is None
        assert (items[0].fact_type, items[1].document_id) == ("observation", "e3")
        body = json.loads(recorder.requests[0].content)
        assert body["budget"] == "mid" and "tags" not in body and "tags_match" not in body

    async def test_recall_null_metadata_and_limit(self) -> None:
        """A null metadata object is empty; ``limit`` truncates client-side."""
        backend, recorder = backend_with(lambda r: answer("recall_tags_any_strict"))
        items = await backend.recall(BANK, "Python", tags=["user:alice"], tags_match="any_strict", limit=2)
        assert len(items) == 2 and items[1].metadata == {}
        assert items[0].metadata == {"rev": "2", "source": "dreamer", "card_id": "c1"}
        body = json.loads(recorder.requests[0].content)
        assert (body["tags"], body["tags_match"]) == (["user:alice"], "any_strict")
        assert "limit" not in body

    async def test_recall_unknown_bank_is_empty(self) -> None:
        """The recorded 404 on recall reads as no hits."""
        backend, _ = backend_with(lambda r: answer("recall_unknown_bank_404"))
        assert await backend.recall("does-not-exist", "hello") == []

    async def test_reflect_parses_based_on(self) -> None:
        """based_on memories become BasedOn records with ids, document ids and fact types."""
        backend, recorder = backend_with(with_stored_units(lambda r: answer("reflect_with_facts")))
        schema = {"type": "object", "properties": {"summary": {"type": "string"}}}
        result = await backend.reflect(BANK, "What do you know about Alice?", response_schema=schema)
        assert result.text == "Stub answer based on memory." and result.used_llm
        assert [b.fact_type for b in result.based_on] == ["world", "world", "observation", "observation"]
        assert result.based_on[0].id == "f78d3249-309a-4fb7-8844-25e3ef56186d"
        assert result.based_on[0].document_id == "card-c1"
        body = json.loads(recorder.requests[-1].content)
        assert body["include"] == {"facts": {}} and body["response_schema"] == schema

    async def test_reflect_structured_output(self) -> None:
        """structured_output is returned as the structured mapping."""
        body = recorded("reflect_response_schema")["body"]
        body["structured_output"] = {"summary": "Alice prefers Python."}
        body["structured_output_error"] = None
        backend, _ = backend_with(with_stored_units(lambda r: httpx.Response(200, json=body)))
        result = await backend.reflect(BANK, "Summarise Alice", response_schema={"type": "object"})
        assert result.structured == {"summary": "Alice prefers Python."}
        assert result.based_on == () and result.structured_error is None

    async def test_reflect_on_an_unknown_bank_sends_no_reflect(self) -> None:
        """An unknown bank (recorded 404 on the unit count) answers empty without POSTing reflect,
        which on Hindsight would create the bank and spend LLM tokens."""
        backend, recorder = backend_with(lambda r: answer("memories_list_unknown_bank_404"))
        result = await backend.reflect("does-not-exist", "What do you know?")
        assert (result.text, result.based_on, result.used_llm) == ("", (), False)
        assert [r.method for r in recorder.requests] == ["GET"]
        assert recorder.requests[0].url.params["limit"] == "0"

    async def test_reflect_on_an_empty_bank_sends_no_reflect(self) -> None:
        """A bank with no units answers empty without an LLM call (transport fake: a total of 0)."""
        backend, recorder = backend_with(
            lambda r: httpx.Response(200, json={"items": [], "total": 0, "limit": 0, "offset": 0})
        )
        result = await backend.reflect(BANK, "What do you know?")
        assert result.based_on == () and not result.used_llm
        assert [r.method for r in recorder.requests] == ["GET"]

    async def test_retain_sends_iso_utc_and_string_metadata(self) -> None:
        """Retain sends one synchronous batch with UTC ``Z`` timestamps and the item fields."""
        backend, recorder = backend_with(lambda r: answer("retain_sync_batch"))
        from_plus_two = datetime(2024, 1, 15, 14, 30, tzinfo=timezone(timedelta(hours=2)))
        result = await backend.retain(
            BANK,
            [
                RetainItem(
                    content="Bob went hiking.",
                    context="chat",
                    timestamp=from_plus_two,
                    metadata={"card_id": "c2"},
                    tags=("user:bob",),
                    document_id="card-c2",
                ),
                RetainItem(content="Carol is learning Rust.", observation_scope="shared"),
            ],
        )
        assert (result.bank_id, result.items_count) == (BANK, 2)
        first, second = json.loads(recorder.requests[0].content)["items"]
        assert first == {
            "content": "Bob went hiking.",
            "context": "chat",
            "timestamp": "2024-01-15T12:30:00.000000Z",
            "metadata": {"card_id": "c2"},
            "tags": ["user:bob"],
            "document_id": "card-c2",
            "observation_scopes": "combined",
        }
        assert second["observation_scopes"] == "shared" and "document_id" not in second

    async def test_non_string_metadata_is_refused_before_sending(self) -> None:
        """Metadata values must be strings; a number is refused locally, like the recorded 422."""
        backend, recorder = backend_with(no_network)
        with pytest.raises(PermanentBackendError, match="metadata values must be strings"):
            await backend.retain(BANK, [RetainItem(content="x y z w", metadata={"n": 1})])  # type: ignore[dict-item]
        assert recorder.requests == []

    async def test_empty_retain_sends_nothing(self) -> None:
        backend, recorder = backend_with(no_network)
        assert (await backend.retain(BANK, [])).items_count == 0
        assert recorder.requests == []

    async def test_consolidate_posts_and_reads_the_operation(self) -> None:
        """consolidate POSTs once and accepts the recorded operation answer."""
        backend, recorder = backend_with(lambda r: answer("consolidate"))
        await backend.consolidate(BANK)
        assert [(r.method, r.url.path) for r in recorder.requests] == [
            ("POST", f"/v1/default/banks/{BANK}/consolidate")
        ]


# ------------------------------------------------------------------------------ list paging


class FakeList:
    """``GET .../memories/list`` as Hindsight 1.1.0 implements it for ``time_field=updated_at``:
    rows with ``start_date <= updated_at < end_date``, ordered ``updated_at DESC, id``, then
    ``OFFSET``/``LIMIT`` (engine/memories/pg/curation.py and engine/time_filter.py).

    A transport-level fake because the tests below need ties straddling page boundaries and a row
    rewritten between two particular page requests, which a real server cannot be timed to do.
    """

    def __init__(self, rows: list[dict[str, Any]]) -> None:
        self.rows = rows
        self.pages = 0
        self.between_pages: Callable[[int], None] = lambda page: None

    def __call__(self, request: httpx.Request) -> httpx.Response:
        query = parse_qs(request.url.query.decode())
        assert query["time_field"] == ["updated_at"]
        start = _parse(query["start_date"][0]) if "start_date" in query else None
        end = _parse(query["end_date"][0])
        kind = query.get("type", [None])[0]
        chosen = [
            r
            for r in self.rows
            if (start is None or _parse(r["updated_at"]) >= start)
            and _parse(r["updated_at"]) < end
            and (kind is None or r["fact_type"] == kind)
        ]
        chosen.sort(key=lambda r: r["id"])
        chosen.sort(key=lambda r: _parse(r["updated_at"]), reverse=True)
        offset, limit = int(query["offset"][0]), int(query["limit"][0])
        page = chosen[offset : offset + limit]
        self.pages += 1
        self.between_pages(self.pages)
        return httpx.Response(
            200, json={"items": page, "total": len(chosen), "limit": limit, "offset": offset}
        )


def _parse(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def rows_at(stamps: list[str], *, tags: Iterator[list[str]] | None = None) -> list[dict[str, Any]]:
    """Recorded list items re-stamped: one row per timestamp, ids sortable by position."""
    template = recorded("memories_list_all")["body"]["items"][1]
    rows = []
    for i, stamp in enumerate(stamps):
        row = dict(template, id=f"00000000-0000-0000-0000-{i:012d}", text=f"fact {i}", updated_at=stamp)
        row["tags"] = next(tags) if tags else ["user:bob"]
        rows.append(row)
    return rows


T0 = "2026-11-30T14:00:00.000000+00:00"
T1 = "2026-11-30T14:00:01.000000+00:00"
T2 = "2026-11-30T14:00:02.000000+00:00"
T3 = "2026-11-30T14:00:02.000001+00:00"


class TestListPaging:
    async def test_walks_every_page_with_ties_across_boundaries(self) -> None:
        """Page size 2 over 3+4+1 tied rows returns each row once, oldest first by (time, id)."""
        rows = rows_at([T1, T1, T1, T2, T2, T2, T2, T3])
        fake = FakeList(rows)
        backend, _ = backend_with(fake, page_size=2)
        units = await backend.list_units_since(BANK, None)
        assert [u.id for u in units] == [r["id"] for r in rows]
        assert fake.pages >= 4

    async def test_since_is_inclusive(self) -> None:
        """A unit stamped exactly ``since`` is returned; older ones are not."""
        rows = rows_at([T0, T1, T1, T2])
        backend, _ = backend_with(FakeList(rows), page_size=2)
        units = await backend.list_units_since(BANK, _parse(T1))
        assert [u.id for u in units] == [r["id"] for r in rows[1:]]

    async def test_more_ties_than_a_page(self) -> None:
        """Five rows sharing one timestamp (one retain batch) come back whole with page size 2."""
        rows = rows_at([T1] * 5 + [T0])
        backend, _ = backend_with(FakeList(rows), page_size=2)
        units = await backend.list_units_since(BANK, None)
        assert sorted(u.id for u in units) == sorted(r["id"] for r in rows)

    async def test_a_row_rewritten_mid_walk_does_not_hide_another(self) -> None:
        """A newer row rewritten between pages (its updated_at jumps past the snapshot) costs no other row."""
        rows = rows_at([T0, T1, T1, T2, T2, T3])
        fake = FakeList(rows)

        def rewrite(page: int) -> None:
            if page == 1:
                rows[5]["updated_at"] = "2100-01-01T00:00:00+00:00"

        fake.between_pages = rewrite
        backend, _ = backend_with(fake, page_size=2)
        units = await backend.list_units_since(BANK, None)
        assert {r["id"] for r in rows[:5]} <= {u.id for u in units}

    async def test_exclude_tags_and_fact_types(self) -> None:
        """exclude_tags drops tagged units client-side; each fact type is asked for by ``type``."""
        rows = rows_at([T0, T1, T2], tags=iter([["rollup"], ["user:bob"], []]))
        rows[2]["fact_type"] = "observation"
        fake = FakeList(rows)
        backend, recorder = backend_with(fake, page_size=2)
        units = await backend.list_units_since(
            BANK, None, exclude_tags=["rollup"], fact_types=["world", "observation"]
        )
        assert [u.id for u in units] == [rows[1]["id"], rows[2]["id"]]
        assert {r.url.params["type"] for r in recorder.requests} == {"world", "observation"}

    async def test_end_date_freezes_the_window(self) -> None:
        """Every page of one call carries the same snapshot end_date, taken before the first page."""
        before = datetime.now(UTC)
        fake = FakeList(rows_at([T0, T1, T2, T3]))
        backend, recorder = backend_with(fake, page_size=3)
        await backend.list_units_since(BANK, _parse(T0))
        first_end = _parse(recorder.requests[0].url.params["end_date"])
        assert before <= first_end <= datetime.now(UTC)
        assert all(r.url.params["start_date"] == "2026-11-30T14:00:00.000000Z" for r in recorder.requests)

    async def test_since_in_the_future_asks_nothing(self) -> None:
        """A watermark ahead of the clock means there is nothing to list yet."""
        backend, recorder = backend_with(no_network)
        assert await backend.list_units_since(BANK, datetime.now(UTC) + timedelta(days=1)) == []
        assert recorder.requests == []

    async def test_a_server_that_ignores_paging_is_a_protocol_error(self) -> None:
        """A server returning the same full page forever cannot hang the walk (transport fake)."""
        rows = rows_at([T0, T1])
        backend, _ = backend_with(
            lambda r: httpx.Response(200, json={"items": rows, "total": 9, "limit": 2, "offset": 0}),
            page_size=2,
        )
        with pytest.raises(ProtocolError, match="did not advance"):
            await backend.list_units_since(BANK, None)


class TestReflectUsage:
    async def test_the_recorded_usage_is_read_and_a_missing_one_estimated(self) -> None:
        """A reflect's tokens are Hindsight's own count (recorded 1.1.0 answer: 40 in, 20 out); an
        answer with ``usage: null`` is estimated from the query and the answer, and says so."""
        backend, _ = backend_with(with_stored_units(route_recorded))
        try:
            result = await backend.reflect(BANK, "Summarise")
        finally:
            await backend.aclose()
        assert result.usage == TokenUsage(40, 20)

        def without_usage(request: httpx.Request) -> httpx.Response:
            if request.url.path.endswith("/reflect"):
                body = {**recorded("reflect_with_facts")["body"], "usage": None}
                return httpx.Response(200, json=body)
            return route_recorded(request)

        backend, _ = backend_with(with_stored_units(without_usage))
        try:
            result = await backend.reflect(BANK, "Summarise")
        finally:
            await backend.aclose()
        assert result.usage is not None and result.usage.estimated and result.usage.total > 0
