"""The Hindsight backend: :class:`~dreamer.backends.base.MemoryBackend` over Hindsight's HTTP API.

Append-only below the interface
-------------------------------
Every request leaves through one method, :meth:`HindsightBackend._request`, which builds the
``httpx.Request`` and checks its method and exact path against :data:`ALLOWED_REQUESTS` *before*
anything is sent. Reads are ``GET`` on a handful of read paths; writes are ``POST`` on retain,
recall, reflect and consolidate only. ``DELETE``, ``PATCH`` and ``PUT`` (bank delete, memory patch,
bank replace) and a ``POST`` anywhere else raise :class:`~dreamer.errors.ForbiddenRequestError`.
Bank ids are URL-quoted into one path segment; a segment that decodes to ``/``, ``.`` or ``..``
is refused as well, so no bank id can steer a request onto another route.

Retain sends no ``update_mode``: Hindsight's default (replace) with a content-derived
``document_id`` makes a resent card a no-op (same content, same units). ``append`` is never used
because it rewrites the tags and metadata of every unit of the document it appends to.

What the listing can and cannot tell
------------------------------------
Hindsight 1.1.0's ``GET .../memories/list`` items carry ``updated_at`` (the row's write watermark)
but no ``created_at``. So :meth:`HindsightBackend.list_units_since` filters and orders on
``time_field=updated_at`` and reports that value as :attr:`MemoryUnit.created_at`: the window the
server applies and the timestamp the caller sees are the same axis, so a watermark taken from the
returned units never skips a row. For a fact that was never rewritten it is its creation time; a
unit whose labels were rewritten, or an observation that consolidation updated, is listed again
(callers deduplicate by content).
"""

from __future__ import annotations

import logging
import math
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime
from typing import Any, Final
from urllib.parse import quote, unquote

import httpx

from dreamer.backends.base import (
    BankActivity,
    BasedOn,
    Budget,
    MemoryUnit,
    RecallItem,
    ReflectResult,
    RetainItem,
    RetainResult,
    TagsMatch,
)
from dreamer.config import HindsightBackendConfig
from dreamer.errors import (
    BackendError,
    ForbiddenRequestError,
    PermanentBackendError,
    ProtocolError,
    TransientBackendError,
)

__all__ = [
    "ALLOWED_REQUESTS",
    "AllowedRequest",
    "HindsightBackend",
    "check_request_allowed",
    "parse_retry_after",
]

log = logging.getLogger(__name__)

# --- the append-only allow-list ---------------------------------------------------------------

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


# --- Retry-After ------------------------------------------------------------------------------


def parse_retry_after(value: str | None, *, now: datetime | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (delay-seconds or an HTTP-date), else None.

    A date in the past gives 0. Anything unparseable gives None (no advice), never an error.
    """
    if value is None:
        return None
    text = value.strip()
    if re.fullmatch(r"\d+(?:\.\d+)?", text):
        seconds = float(text)
        return seconds if math.isfinite(seconds) else None
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    reference = now if now is not None else datetime.now(UTC)
    return max(0.0, (when - reference).total_seconds())


# --- strict response parsing ------------------------------------------------------------------


class _Parser:
    """Typed accessors over decoded JSON; every mismatch is a :class:`ProtocolError`."""

    def __init__(self, operation: str) -> None:
        self.operation = operation

    def fail(self, where: str, problem: str) -> ProtocolError:
        return ProtocolError(
            f"Hindsight answered {self.operation} with an unexpected shape: {where}: {problem}; "
            "check that backend.hindsight.url points at a Hindsight 1.1 API server",
            operation=self.operation,
        )

    def obj(self, value: Any, where: str) -> Mapping[str, Any]:
        if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
            raise self.fail(where, f"expected an object, got {type(value).__name__}")
        return value

    def array(self, value: Any, where: str) -> list[Any]:
        if not isinstance(value, list):
            raise self.fail(where, f"expected a list, got {type(value).__name__}")
        return value

    def string(self, data: Mapping[str, Any], key: str, where: str) -> str:
        value = data.get(key)
        if not isinstance(value, str):
            raise self.fail(f"{where}.{key}", f"expected a string, got {_kind(value)}")
        return value

    def opt_string(self, data: Mapping[str, Any], key: str, where: str) -> str | None:
        value = data.get(key)
        if value is None:
            return None
        if not isinstance(value, str):
            raise self.fail(f"{where}.{key}", f"expected a string or null, got {_kind(value)}")
        return value

    def integer(self, data: Mapping[str, Any], key: str, where: str) -> int:
        value = data.get(key)
        if not isinstance(value, int) or isinstance(value, bool):
            raise self.fail(f"{where}.{key}", f"expected an integer, got {_kind(value)}")
        return value

    def boolean(self, data: Mapping[str, Any], key: str, where: str) -> bool:
        value = data.get(key)
        if not isinstance(value, bool):
            raise self.fail(f"{where}.{key}", f"expected true/false, got {_kind(value)}")
        return value

    def opt_float(self, data: Mapping[str, Any], key: str, where: str) -> float | None:
        value = data.get(key)
        if value is None:
            return None
        if not isinstance(value, int | float) or isinstance(value, bool) or not math.isfinite(value):
            raise self.fail(f"{where}.{key}", f"expected a number or null, got {_kind(value)}")
        return float(value)

    def timestamp(self, data: Mapping[str, Any], key: str, where: str) -> datetime:
        value = self.opt_timestamp(data, key, where)
        if value is None:
            raise self.fail(f"{where}.{key}", "expected a timestamp, got nothing")
        return value

    def opt_timestamp(self, data: Mapping[str, Any], key: str, where: str) -> datetime | None:
        # Hindsight writes "" for an unknown date in some places and null in others.
        raw = self.opt_string(data, key, where)
        if raw is None or raw == "":
            return None
        try:
            parsed = datetime.fromisoformat(raw[:-1] + "+00:00" if raw.endswith("Z") else raw)
        except ValueError:
            raise self.fail(f"{where}.{key}", f"not an ISO-8601 timestamp: {raw!r}") from None
        return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)

    def str_tuple(self, data: Mapping[str, Any], key: str, where: str) -> tuple[str, ...]:
        value = data.get(key)
        if value is None:
            return ()
        items = self.array(value, f"{where}.{key}")
        if not all(isinstance(v, str) for v in items):
            raise self.fail(f"{where}.{key}", "expected a list of strings")
        return tuple(items)

    def metadata(self, data: Mapping[str, Any], key: str, where: str) -> dict[str, str]:
        value = data.get(key)
        if value is None:
            return {}
        meta = self.obj(value, f"{where}.{key}")
        for name, item in meta.items():
            if not isinstance(item, str):
                raise self.fail(
                    f"{where}.{key}.{name}", f"metadata values must be strings, got {_kind(item)}"
                )
        return dict(meta)


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _clamp01(value: float) -> float:
    # Hindsight's fused final score can exceed 1 (recorded: 1.0999...) and a cosine similarity can
    # be negative; the contract promises [0, 1]. Clamping keeps the server's order, which ranks.
    return min(1.0, max(0.0, value))


# --- error classification ---------------------------------------------------------------------

#: Statuses that mean "try again later": overload (429, admission-control 503), a failed upstream
#: LLM call (Hindsight answers 500 after its own retries), gateway trouble, timeouts, and 499
#: (the request was dropped while queued). Every other status >= 300 will not work as sent.
TRANSIENT_STATUSES: Final = frozenset({408, 425, 429, 499, 500, 502, 503, 504})

_BANK_NOT_FOUND = re.compile(r"^Bank '.*' not found$", re.DOTALL)


def _flatten_detail(body: Any) -> str:
    """The server's ``detail`` as one line; FastAPI's 422 list form becomes ``loc: msg; ...``."""
    detail = body.get("detail") if isinstance(body, dict) else None
    if isinstance(detail, str):
        return detail
    if isinstance(detail, list):
        parts = []
        for entry in detail:
            if isinstance(entry, dict):
                loc = ".".join(str(p) for p in entry.get("loc", ()) if p != "body")
                msg = str(entry.get("msg", entry))
                parts.append(f"{loc}: {msg}" if loc else msg)
            else:
                parts.append(str(entry))
        return "; ".join(parts)
    if detail is not None:
        return str(detail)
    return ""


def _is_bank_not_found(exc: PermanentBackendError) -> bool:
    # Only Hindsight's own "Bank 'x' not found" means an empty bank. A bare 404 ("Not Found")
    # means the URL is wrong, which must not read as "nothing new".
    return exc.status == 404 and _BANK_NOT_FOUND.match(exc.detail) is not None


def _utc(moment: datetime) -> datetime:
    """``moment`` in UTC; a naive datetime is read as UTC, as Hindsight itself reads one."""
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def _iso(moment: datetime) -> str:
    """ISO-8601 in UTC with microseconds and a ``Z``."""
    return _utc(moment).isoformat(timespec="microseconds").replace("+00:00", "Z")


def _bank_path(bank_id: str) -> str:
    return f"/v1/default/banks/{quote(bank_id, safe='')}"


# --- the backend ------------------------------------------------------------------------------


class HindsightBackend:
    """Dreamer's memory backend on a Hindsight server. See the module docstring for the rules."""

    name = "hindsight"
    reflect_uses_llm = True

    def __init__(
        self, config: HindsightBackendConfig, *, transport: httpx.AsyncBaseTransport | None = None
    ) -> None:
        self._config = config
        self._base = httpx.URL(config.url)
        self._base_path = self._base.raw_path.decode("ascii").split("?")[0].rstrip("/")
        self._timeout = httpx.Timeout(config.read_timeout_s, connect=config.connect_timeout_s)
        self._reflect_timeout = httpx.Timeout(config.reflect_timeout_s, connect=config.connect_timeout_s)
        headers = {"Accept": "application/json", "User-Agent": "dreamer"}
        if config.api_key is not None:
            headers["Authorization"] = f"Bearer {config.api_key.get_secret_value()}"
        self._client = httpx.AsyncClient(
            base_url=config.url,
            headers=headers,
            timeout=self._timeout,
            transport=transport,
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
        """Send one allowed request and return its decoded JSON body, or raise a typed error."""
        request = self._client.build_request(
            method, path, params=params, json=json, timeout=timeout or self._timeout
        )
        self._check_outgoing(request)
        started = time.monotonic()
        try:
            response = await self._client.send(request)
        except httpx.TimeoutException as exc:
            limits = timeout or self._timeout
            raise TransientBackendError(
                self._redact(
                    f"Hindsight {operation} timed out ({type(exc).__name__}; connect {limits.connect}s, "
                    f"read {limits.read}s) at "
                    f"{self._config.url}; it will be retried. If it keeps happening, raise "
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
            raise self._status_error(response, operation)
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

    def _check_outgoing(self, request: httpx.Request) -> None:
        url = request.url
        if (url.scheme, url.host, url.port) != (self._base.scheme, self._base.host, self._base.port):
            raise ForbiddenRequestError(f"refused {request.method} to another host: {url.host}")
        raw_path = url.raw_path.decode("ascii").split("?")[0]
        if not raw_path.startswith(self._base_path + "/"):
            raise ForbiddenRequestError(f"refused {request.method} {raw_path}: outside the API base")
        check_request_allowed(request.method, raw_path[len(self._base_path) :])

    def _redact(self, text: str) -> str:
        key = self._config.api_key
        secret = key.get_secret_value() if key is not None else ""
        return text.replace(secret, "[redacted]") if secret else text

    def _status_error(self, response: httpx.Response, operation: str) -> BackendError:
        status = response.status_code
        try:
            body: Any = response.json()
        except ValueError:
            body = None
        detail = self._redact(_flatten_detail(body) or response.text[:500].strip())
        shown = f": {detail}" if detail else ""
        if status in TRANSIENT_STATUSES:
            retry_after = parse_retry_after(response.headers.get("Retry-After"))
            advice = f" (server asks to wait {retry_after:g}s)" if retry_after is not None else ""
            return TransientBackendError(
                f"Hindsight {operation} failed with HTTP {status}{shown}; it will be retried{advice}",
                status=status,
                operation=operation,
                retry_after=retry_after,
            )
        if status in (401, 403):
            return PermanentBackendError(
                f"Hindsight refused {operation} with HTTP {status}{shown}; {self._key_advice()}",
                status=status,
                operation=operation,
                detail=detail,
            )
        if 300 <= status < 400:
            where = response.headers.get("Location", "?")
            return PermanentBackendError(
                f"Hindsight answered {operation} with a redirect (HTTP {status} to {where}); set "
                "backend.hindsight.url to the server's final address",
                status=status,
                operation=operation,
                detail=detail,
            )
        return PermanentBackendError(
            f"Hindsight rejected {operation} with HTTP {status}{shown}",
            status=status,
            operation=operation,
            detail=detail,
        )

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
        parse = _Parser("list banks")
        page_size = self._config.page_size
        offset = 0
        first_total: int | None = None
        shifted = False
        this_walk: set[str] = set()
        while True:
            data = parse.obj(
                await self._request(
                    "GET",
                    "/v1/default/banks",
                    operation="list banks",
                    params={"limit": page_size, "offset": offset},
                ),
                "response",
            )
            banks = parse.array(data.get("banks"), "response.banks")
            total = parse.integer(data, "total", "response")
            first_total = total if first_total is None else first_total
            shifted = shifted or total != first_total
            for i, raw in enumerate(banks):
                where = f"banks[{offset + i}]"
                item = parse.obj(raw, where)
                bank_id = parse.string(item, "bank_id", where)
                shifted = shifted or bank_id in this_walk
                this_walk.add(bank_id)
                seen[bank_id] = BankActivity(
                    bank_id=bank_id,
                    unit_count=parse.integer(item, "fact_count", where),
                    last_write_at=parse.opt_timestamp(item, "last_write_at", where),
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
        """Units written at or after ``since`` (see the module docstring), oldest first."""
        types: list[str | None] = [None] if fact_types is None else list(dict.fromkeys(fact_types))
        snapshot = datetime.now(UTC)
        if since is not None and _utc(since) >= snapshot:
            return []
        excluded = set(exclude_tags)
        units: dict[str, MemoryUnit] = {}
        try:
            for fact_type in types:
                for unit in await self._walk_units(bank_id, since, snapshot, fact_type):
                    units.setdefault(unit.id, unit)
        except PermanentBackendError as exc:
            if _is_bank_not_found(exc):
                return []
            raise
        kept = [u for u in units.values() if excluded.isdisjoint(u.tags)]
        return sorted(kept, key=lambda u: (u.created_at, u.id))

    async def _walk_units(
        self, bank_id: str, since: datetime | None, snapshot: datetime, fact_type: str | None
    ) -> list[MemoryUnit]:
        """Walk ``memories/list`` newest first with a moving upper bound (keyset paging).

        Offsets alone would skip a row whenever one above the cursor is rewritten mid-walk
        (it leaves the window and everything below moves up a slot). Each page therefore asks
        for rows strictly older than the page before, and uses an offset only to step through
        rows that share the boundary timestamp (Hindsight stamps a whole batch with one time).
        """
        parse = _Parser("list memory units")
        path = f"{_bank_path(bank_id)}/memories/list"
        page_size = self._config.page_size
        upper = snapshot
        skip = 0
        found: list[MemoryUnit] = []
        seen_ids: set[str] = set()
        while True:
            params: dict[str, str | int] = {
                "time_field": "updated_at",
                "end_date": _iso(upper),
                "limit": page_size,
                "offset": skip,
            }
            if since is not None:
                params["start_date"] = _iso(since)
            if fact_type is not None:
                params["type"] = fact_type
            data = parse.obj(
                await self._request("GET", path, operation="list memory units", params=params), "response"
            )
            page = [
                self._unit(parse, parse.obj(raw, f"items[{i}]"), bank_id, f"items[{i}]")
                for i, raw in enumerate(parse.array(data.get("items"), "response.items"))
            ]
            new = [u for u in page if u.id not in seen_ids]
            if page and not new:
                raise parse.fail("response.items", "paging did not advance (the same units came back)")
            seen_ids.update(u.id for u in new)
            found.extend(new)
            if len(page) < page_size:
                return found
            boundary = page[-1].created_at
            ties = sum(1 for u in page if u.created_at == boundary)
            next_upper = boundary + timedelta(microseconds=1)
            skip = skip + ties if next_upper == upper else ties
            upper = next_upper

    @staticmethod
    def _unit(parse: _Parser, item: Mapping[str, Any], bank_id: str, where: str) -> MemoryUnit:
        proof = item.get("proof_count", 1)
        if not isinstance(proof, int) or isinstance(proof, bool):
            raise parse.fail(f"{where}.proof_count", f"expected an integer, got {_kind(proof)}")
        return MemoryUnit(
            id=parse.string(item, "id", where),
            bank_id=bank_id,
            text=parse.string(item, "text", where),
            fact_type=parse.string(item, "fact_type", where),
            created_at=parse.timestamp(item, "updated_at", where),
            mentioned_at=parse.opt_timestamp(item, "mentioned_at", where),
            document_id=parse.opt_string(item, "document_id", where),
            context=parse.opt_string(item, "context", where) or None,
            tags=parse.str_tuple(item, "tags", where),
            metadata=parse.metadata(item, "metadata", where),
            proof_count=proof,
            source_memory_ids=parse.str_tuple(item, "source_memory_ids", where),
        )

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
        body: dict[str, Any] = {
            "query": query,
            "budget": budget,
            "max_tokens": max_tokens,
            "include": {"entities": None},
        }
        if types is not None:
            body["types"] = list(types)
        if tags is not None:
            body["tags"] = list(tags)
        if tags is not None or tags_match != "any":
            body["tags_match"] = tags_match
        try:
            data = await self._request(
                "POST", f"{_bank_path(bank_id)}/memories/recall", operation="recall", json=body
            )
        except PermanentBackendError as exc:
            if _is_bank_not_found(exc):
                return []
            raise
        parse = _Parser("recall")
        results = parse.array(parse.obj(data, "response").get("results"), "response.results")
        items = [self._recall_item(parse, raw, bank_id, f"results[{i}]") for i, raw in enumerate(results)]
        return items if limit is None else items[: max(0, limit)]

    @staticmethod
    def _recall_item(parse: _Parser, raw: Any, bank_id: str, where: str) -> RecallItem:
        item = parse.obj(raw, where)
        scores = parse.obj(item.get("scores"), f"{where}.scores")
        final = parse.opt_float(scores, "final", f"{where}.scores")
        if final is None:
            raise parse.fail(f"{where}.scores.final", "expected a number, got null")
        semantic = parse.opt_float(scores, "semantic", f"{where}.scores")
        return RecallItem(
            id=parse.string(item, "id", where),
            bank_id=bank_id,
            text=parse.string(item, "text", where),
            fact_type=parse.string(item, "type", where),
            score=_clamp01(final),
            semantic=None if semantic is None else _clamp01(semantic),
            document_id=parse.opt_string(item, "document_id", where),
            tags=parse.str_tuple(item, "tags", where),
            metadata=parse.metadata(item, "metadata", where),
            mentioned_at=parse.opt_timestamp(item, "mentioned_at", where),
        )

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
        """``POST .../reflect`` with the facts it used; an unknown or empty bank gives an empty answer.

        Hindsight's reflect on an unknown bank *creates* that bank (and still spends LLM tokens to
        say it found nothing), so a cheap count through ``memories/list?limit=0`` goes first.
        """
        if await self._unit_total(bank_id) == 0:
            return ReflectResult(text="", used_llm=False)
        body: dict[str, Any] = {"query": query, "budget": budget, "include": {"facts": {}}}
        if response_schema is not None:
            body["response_schema"] = dict(response_schema)
        if tags is not None:
            body["tags"] = list(tags)
        if tags is not None or tags_match != "any":
            body["tags_match"] = tags_match
        data = await self._request(
            "POST",
            f"{_bank_path(bank_id)}/reflect",
            operation="reflect",
            json=body,
            timeout=self._reflect_timeout,
        )
        parse = _Parser("reflect")
        response = parse.obj(data, "response")
        structured_raw = response.get("structured_output")
        structured = (
            None if structured_raw is None else parse.obj(structured_raw, "response.structured_output")
        )
        based_on: list[BasedOn] = []
        if response.get("based_on") is not None:
            sources = parse.obj(response["based_on"], "response.based_on")
            for i, raw in enumerate(parse.array(sources.get("memories", []), "response.based_on.memories")):
                where = f"based_on.memories[{i}]"
                fact = parse.obj(raw, where)
                fact_id = parse.opt_string(fact, "id", where)
                if fact_id is None:  # allowed by the server's schema, useless as provenance
                    continue
                based_on.append(
                    BasedOn(
                        id=fact_id,
                        text=parse.string(fact, "text", where),
                        document_id=parse.opt_string(fact, "document_id", where),
                        fact_type=parse.opt_string(fact, "type", where) or "",
                    )
                )
        return ReflectResult(
            text=parse.string(response, "text", "response"),
            structured=structured,
            structured_error=parse.opt_string(response, "structured_output_error", "response"),
            based_on=tuple(based_on),
            used_llm=True,
        )

    async def _unit_total(self, bank_id: str) -> int:
        """How many units ``bank_id`` holds; 0 for an unknown bank. Reads nothing but a count."""
        try:
            data = await self._request(
                "GET",
                f"{_bank_path(bank_id)}/memories/list",
                operation="count memory units",
                params={"limit": 0},
            )
        except PermanentBackendError as exc:
            if _is_bank_not_found(exc):
                return 0
            raise
        parse = _Parser("count memory units")
        return parse.integer(parse.obj(data, "response"), "total", "response")

    async def retain(self, bank_id: str, items: Sequence[RetainItem]) -> RetainResult:
        """Synchronous ``POST .../memories``; the server creates the bank on first write."""
        if not items:
            return RetainResult(bank_id=bank_id, items_count=0)
        payload = [self._retain_item(i, item) for i, item in enumerate(items)]
        data = await self._request(
            "POST",
            f"{_bank_path(bank_id)}/memories",
            operation="retain",
            json={"items": payload, "async": False},
        )
        parse = _Parser("retain")
        response = parse.obj(data, "response")
        if not parse.boolean(response, "success", "response"):
            raise parse.fail("response.success", "the server reported success=false")
        return RetainResult(
            bank_id=parse.string(response, "bank_id", "response"),
            items_count=parse.integer(response, "items_count", "response"),
        )

    @staticmethod
    def _retain_item(index: int, item: RetainItem) -> dict[str, Any]:
        bad = {k: v for k, v in item.metadata.items() if not isinstance(k, str) or not isinstance(v, str)}
        if bad:
            shown = ", ".join(f"{k!r}: {type(v).__name__}" for k, v in bad.items())
            raise PermanentBackendError(
                f"retain item {index}: metadata values must be strings ({shown}); convert them with str()",
                operation="retain",
                detail="metadata values must be strings",
            )
        body: dict[str, Any] = {
            "content": item.content,
            "metadata": dict(item.metadata),
            "tags": list(item.tags),
            "observation_scopes": item.observation_scope,
        }
        if item.context is not None:
            body["context"] = item.context
        if item.timestamp is not None:
            body["timestamp"] = _iso(item.timestamp)
        if item.document_id is not None:
            body["document_id"] = item.document_id
        return body

    async def consolidate(self, bank_id: str) -> None:
        """``POST .../consolidate``: queues a consolidation; an unknown bank has nothing to do."""
        try:
            data = await self._request("POST", f"{_bank_path(bank_id)}/consolidate", operation="consolidate")
        except PermanentBackendError as exc:
            if _is_bank_not_found(exc):
                return
            raise
        parse = _Parser("consolidate")
        parse.string(parse.obj(data, "response"), "operation_id", "response")

    async def aclose(self) -> None:
        await self._client.aclose()
