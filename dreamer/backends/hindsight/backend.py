"""The Hindsight backend: :class:`~dreamer.backends.base.MemoryBackend` over Hindsight's HTTP API.

Every request leaves through the client's :class:`~dreamer.backends.hindsight.allowlist.AllowListTransport`
(nothing may delete, patch or replace memory); answers are parsed by the strict models of
:mod:`dreamer.backends.hindsight.models` and turned into the contract's values, as request bodies
are made, by :mod:`dreamer.backends.hindsight.convert`; failures become the typed errors of
:mod:`dreamer.backends.hindsight.statuses`. Retain relies on content-derived document ids and never
sends ``update_mode``; the unit listing walks ``updated_at``, reported as ``MemoryUnit.created_at``.
Why, and what was learnt about the 1.1.0 API: ``docs/design/hindsight.md``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import anyio
import httpx

from dreamer.backends.base import (
    BankActivity,
    Budget,
    MemoryUnit,
    RecallItem,
    ReflectResult,
    RetainItem,
    RetainResult,
    TagsMatch,
)
from dreamer.backends.hindsight.allowlist import AllowListTransport
from dreamer.backends.hindsight.convert import (
    bank_path,
    iso,
    recall_body,
    recall_item,
    reflect_body,
    reflect_result,
    retain_body,
    unit_from_row,
    utc,
)
from dreamer.backends.hindsight.models import (
    BankPage,
    ConsolidateAnswer,
    RecallAnswer,
    ReflectAnswer,
    RetainAnswer,
    UnitCount,
    UnitPage,
    parse_response,
    protocol_error,
)
from dreamer.backends.hindsight.statuses import is_bank_not_found, status_error
from dreamer.config import HindsightBackendConfig, is_header_safe_key
from dreamer.errors import ConfigError, PermanentBackendError, ProtocolError, TransientBackendError
from dreamer.log import SecretRedactor

__all__ = ["HindsightBackend"]

log = logging.getLogger(__name__)


class HindsightBackend:
    """Dreamer's memory backend on a Hindsight server; ``transport`` replaces the network (tests)."""

    name = "hindsight"
    reflect_uses_llm = True

    def __init__(
        self, config: HindsightBackendConfig, *, transport: httpx.AsyncBaseTransport | None = None
    ) -> None:
        self._config = config
        self._timeout = httpx.Timeout(config.read_timeout_s, connect=config.connect_timeout_s)
        self._reflect_timeout = httpx.Timeout(config.reflect_timeout_s, connect=config.connect_timeout_s)
        headers = {"Accept": "application/json", "User-Agent": "dreamer"}
        secret = config.api_key.get_secret_value() if config.api_key is not None else ""
        self._redactor = SecretRedactor([secret])
        if secret:
            if not is_header_safe_key(secret):
                # The HTTP library would print the header, key and all, in its own error.
                raise ConfigError(
                    "backend.hindsight: the API key holds a space, a control character or a non-ASCII "
                    "character, which an HTTP header cannot carry"
                )
            headers["Authorization"] = f"Bearer {secret}"
        self._client = httpx.AsyncClient(
            base_url=config.url,
            headers=headers,
            timeout=self._timeout,
            transport=AllowListTransport(config.url, transport or httpx.AsyncHTTPTransport(trust_env=False)),
            follow_redirects=False,
            trust_env=False,
        )

    def __repr__(self) -> str:
        return f"HindsightBackend(url={self._config.url!r})"

    __str__ = __repr__

    # --- the one way out ------------------------------------------------------------------

    async def _request(
        self,
        method: str,
        path: str,
        *,
        operation: str,
        params: Mapping[str, str | int] | None = None,
        json: Any = None,
        timeout: httpx.Timeout | None = None,
    ) -> Any:
        """Send one request and return its decoded JSON body, or raise a typed error.

        A request outside the allow-list raises :class:`~dreamer.errors.ForbiddenRequestError`
        from the client's transport, before anything is sent.
        """
        request = self._client.build_request(
            method, path, params=params, json=json, timeout=timeout or self._timeout
        )
        started = time.monotonic()
        limits = timeout or self._timeout
        # httpx bounds each read, not the answer: a server trickling a byte a second would hold the
        # call for ever. The whole request gets connect + read seconds.
        deadline = (limits.connect or 0.0) + (limits.read or 0.0)
        try:
            with anyio.fail_after(deadline if deadline > 0 else None):
                response = await self._client.send(request)
        except TimeoutError:
            raise TransientBackendError(
                self._redact(
                    f"Hindsight {operation} at {self._config.url} sent no whole answer within "
                    f"{deadline:g}s (connect {limits.connect}s + read {limits.read}s); if it keeps "
                    "happening, raise backend.hindsight.read_timeout_s (reflect: reflect_timeout_s)"
                ),
                operation=operation,
            ) from None
        except httpx.TimeoutException as exc:
            raise TransientBackendError(
                self._redact(
                    f"Hindsight {operation} timed out ({type(exc).__name__}; connect {limits.connect}s, "
                    f"read {limits.read}s) at "
                    f"{self._config.url}. If it keeps happening, raise "
                    "backend.hindsight.read_timeout_s (reflect: reflect_timeout_s)"
                ),
                operation=operation,
            ) from None
        except httpx.TransportError as exc:
            raise TransientBackendError(
                self._redact(
                    f"cannot reach Hindsight at {self._config.url} for {operation}: "
                    f"{type(exc).__name__}: {exc or 'connection failed'}; check that the server runs "
                    "and that backend.hindsight.url is right"
                ),
                operation=operation,
            ) from None
        elapsed_ms = (time.monotonic() - started) * 1000
        log.debug(
            "hindsight %s %s -> %s in %.0f ms", method, request.url.path, response.status_code, elapsed_ms
        )
        if response.status_code >= 300:
            raise status_error(response, operation, redact=self._redact, key_advice=self._key_advice)
        try:
            return response.json()
        except ValueError:
            raise ProtocolError(
                f"Hindsight answered {operation} with HTTP {response.status_code} but the body is not "
                f"JSON ({len(response.content)} bytes); check that backend.hindsight.url points at a "
                "Hindsight API server",
                status=response.status_code,
                operation=operation,
            ) from None

    def _redact(self, text: str) -> str:
        """Server text with the API key masked in every form it can take (whole, escaped, in pieces)."""
        return self._redactor.redact_text(text)

    def _key_advice(self) -> str:
        cfg = self._config
        if cfg.api_key is None:
            return (
                "no API key is configured: set backend.hindsight.api_key_env (an environment variable "
                "holding the key) or backend.hindsight.api_key_file"
            )
        if cfg.api_key_file is not None:
            return f"check the API key in backend.hindsight.api_key_file ({cfg.api_key_file})"
        return (
            f"check the API key in the environment variable named by backend.hindsight.api_key_env "
            f"({cfg.api_key_env}), or use backend.hindsight.api_key_file"
        )

    # --- MemoryBackend --------------------------------------------------------------------

    async def activity(self, bank_ids: Sequence[str]) -> dict[str, BankActivity]:
        """One walk over ``GET /v1/default/banks`` for every bank asked about."""
        wanted = list(dict.fromkeys(bank_ids))
        if not wanted:
            return {}
        seen: dict[str, BankActivity] = {}
        # The list is ordered by last write, so a bank written during the walk can jump from a
        # page not yet read to one already read. That shows up as a repeated bank id or a moved
        # total; walk again (a few times at most) before calling a wanted bank unknown.
        for _attempt in range(3):
            shifted = await self._walk_banks(seen)
            if not shifted or all(b in seen for b in wanted):
                break
        return {
            b: seen.get(b, BankActivity(bank_id=b, unit_count=0, last_write_at=None, exists=False))
            for b in wanted
        }

    async def _walk_banks(self, seen: dict[str, BankActivity]) -> bool:
        page_size = self._config.page_size
        offset = 0
        first_total: int | None = None
        shifted = False
        this_walk: set[str] = set()
        while True:
            data = await self._request(
                "GET",
                "/v1/default/banks",
                operation="list banks",
                params={"limit": page_size, "offset": offset},
            )
            page = parse_response(BankPage, data, "list banks")
            banks, total = page.banks, page.total
            first_total = total if first_total is None else first_total
            shifted = shifted or total != first_total
            for bank in banks:
                shifted = shifted or bank.bank_id in this_walk
                this_walk.add(bank.bank_id)
                seen[bank.bank_id] = BankActivity(
                    bank_id=bank.bank_id, unit_count=bank.fact_count, last_write_at=bank.last_write_at
                )
            offset += len(banks)
            if len(banks) < page_size or offset >= total:
                return shifted

    async def list_units_since(
        self,
        bank_id: str,
        since: datetime | None,
        *,
        exclude_tags: Sequence[str] = (),
        fact_types: Sequence[str] | None = None,
    ) -> list[MemoryUnit]:
        """Units written at or after ``since`` (by ``updated_at``), oldest first."""
        types: list[str | None] = [None] if fact_types is None else list(dict.fromkeys(fact_types))
        snapshot = datetime.now(UTC)
        if since is not None and utc(since) >= snapshot:
            return []
        excluded = set(exclude_tags)
        units: dict[str, MemoryUnit] = {}
        try:
            for fact_type in types:
                for unit in await self._walk_units(bank_id, since, snapshot, fact_type):
                    units.setdefault(unit.id, unit)
        except PermanentBackendError as exc:
            if is_bank_not_found(exc):
                return []
            raise
        kept = [u for u in units.values() if excluded.isdisjoint(u.tags)]
        return sorted(kept, key=lambda u: (u.created_at, u.id))

    async def _walk_units(
        self, bank_id: str, since: datetime | None, snapshot: datetime, fact_type: str | None
    ) -> list[MemoryUnit]:
        """Walk ``memories/list`` newest first with a moving upper bound (keyset paging; offsets
        only step through rows sharing the boundary timestamp). Why: docs/design/hindsight.md."""
        path = f"{bank_path(bank_id)}/memories/list"
        page_size = self._config.page_size
        upper = snapshot
        skip = 0
        found: list[MemoryUnit] = []
        seen_ids: set[str] = set()
        while True:
            params: dict[str, str | int] = {
                "time_field": "updated_at",
                "end_date": iso(upper),
                "limit": page_size,
                "offset": skip,
            }
            if since is not None:
                params["start_date"] = iso(since)
            if fact_type is not None:
                params["type"] = fact_type
            data = await self._request("GET", path, operation="list memory units", params=params)
            rows = parse_response(UnitPage, data, "list memory units").items
            page = [unit_from_row(row, bank_id) for row in rows]
            new = [u for u in page if u.id not in seen_ids]
            if page and not new:
                raise protocol_error(
                    "list memory units", "response.items", "paging did not advance (the same units came back)"
                )
            seen_ids.update(u.id for u in new)
            found.extend(new)
            if len(page) < page_size:
                return found
            boundary = page[-1].created_at
            ties = sum(1 for u in page if u.created_at == boundary)
            next_upper = boundary + timedelta(microseconds=1)
            skip = skip + ties if next_upper == upper else ties
            upper = next_upper

    async def recall(
        self,
        bank_id: str,
        query: str,
        *,
        budget: Budget = "mid",
        max_tokens: int = 4096,
        types: Sequence[str] | None = None,
        tags: Sequence[str] | None = None,
        tags_match: TagsMatch = "any",
        limit: int | None = None,
    ) -> list[RecallItem]:
        """``POST .../memories/recall``; an unknown bank recalls nothing."""
        body = recall_body(
            query, budget=budget, max_tokens=max_tokens, types=types, tags=tags, tags_match=tags_match
        )
        try:
            data = await self._request(
                "POST", f"{bank_path(bank_id)}/memories/recall", operation="recall", json=body
            )
        except PermanentBackendError as exc:
            if is_bank_not_found(exc):
                return []
            raise
        hits = parse_response(RecallAnswer, data, "recall").results
        items = [recall_item(hit, bank_id) for hit in hits]
        return items if limit is None else items[: max(0, limit)]

    async def reflect(
        self,
        bank_id: str,
        query: str,
        *,
        budget: Budget = "low",
        response_schema: Mapping[str, Any] | None = None,
        tags: Sequence[str] | None = None,
        tags_match: TagsMatch = "any",
    ) -> ReflectResult:
        """``POST .../reflect`` with the facts it used; an unknown or empty bank gives an empty answer
        without a reflect (which would create the bank and spend LLM tokens): a unit count goes first."""
        if await self._unit_total(bank_id) == 0:
            return ReflectResult(text="", used_llm=False)
        body = reflect_body(
            query, budget=budget, response_schema=response_schema, tags=tags, tags_match=tags_match
        )
        data = await self._request(
            "POST",
            f"{bank_path(bank_id)}/reflect",
            operation="reflect",
            json=body,
            timeout=self._reflect_timeout,
        )
        return reflect_result(parse_response(ReflectAnswer, data, "reflect"), query)

    async def _unit_total(self, bank_id: str) -> int:
        """How many units ``bank_id`` holds; 0 for an unknown bank. Reads nothing but a count."""
        try:
            data = await self._request(
                "GET",
                f"{bank_path(bank_id)}/memories/list",
                operation="count memory units",
                params={"limit": 0},
            )
        except PermanentBackendError as exc:
            if is_bank_not_found(exc):
                return 0
            raise
        return parse_response(UnitCount, data, "count memory units").total

    async def retain(self, bank_id: str, items: Sequence[RetainItem]) -> RetainResult:
        """Synchronous ``POST .../memories``; the server creates the bank on first write."""
        if not items:
            return RetainResult(bank_id=bank_id, items_count=0)
        payload = [retain_body(i, item) for i, item in enumerate(items)]
        data = await self._request(
            "POST",
            f"{bank_path(bank_id)}/memories",
            operation="retain",
            json={"items": payload, "async": False},
        )
        answer = parse_response(RetainAnswer, data, "retain")
        if not answer.success:
            raise protocol_error("retain", "response.success", "the server reported success=false")
        return RetainResult(bank_id=answer.bank_id, items_count=answer.items_count)

    async def consolidate(self, bank_id: str) -> None:
        """``POST .../consolidate``: queues a consolidation; an unknown bank has nothing to do."""
        try:
            data = await self._request("POST", f"{bank_path(bank_id)}/consolidate", operation="consolidate")
        except PermanentBackendError as exc:
            if is_bank_not_found(exc):
                return
            raise
        parse_response(ConsolidateAnswer, data, "consolidate")

    async def aclose(self) -> None:
        await self._client.aclose()
