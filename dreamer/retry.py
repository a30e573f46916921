"""Capped exponential backoff with full jitter that honours ``Retry-After``.

Only :class:`~dreamer.errors.TransientBackendError` is retried. While sleeping, the slot lock (if the
call holds it) is released so graph extraction can use the accelerator meanwhile, then taken again.
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING, Any, Final, Protocol, TypeVar

import anyio

from dreamer.config import RetryConfig
from dreamer.errors import PermanentBackendError, RetriesExhausted, TransientBackendError
from dreamer.slot import SlotLock

if TYPE_CHECKING:
    import httpx

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How often and how long to retry. Build one from ``config.retry`` with :meth:`from_config`."""

    max_attempts: int = 5
    base_delay_s: float = 2.0
    max_delay_s: float = 120.0
    retry_after_cap_s: float = 300.0

    @classmethod
    def from_config(cls, cfg: RetryConfig) -> RetryPolicy:
        return cls(
            max_attempts=cfg.max_attempts,
            base_delay_s=cfg.base_delay_s,
            max_delay_s=cfg.max_delay_s,
            retry_after_cap_s=cfg.retry_after_cap_s,
        )


#: HTTP statuses that mean "try again later": overload (429, admission-control 503), a failed
#: upstream call (a server answers 500 after its own retries), gateway trouble, timeouts, and 499
#: (the request was dropped while queued). Every other status >= 300 will not work as sent.
TRANSIENT_STATUSES: Final = frozenset({408, 425, 429, 499, 500, 502, 503, 504})


class _Answer(Protocol):
    """What `server_detail` reads of an HTTP answer (an ``httpx.Response``)."""

    @property
    def text(self) -> str: ...

    def json(self) -> Any: ...


def server_detail(response: _Answer) -> str:
    """A server's own explanation of an error: OpenAI's ``{"error": {"message"}}``, FastAPI's
    ``detail``, or its text, whitespace collapsed."""
    try:
        body: Any = response.json()
    except ValueError:
        return " ".join(response.text.split())
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return str(error["message"])
        for key in ("error", "detail", "message"):
            if isinstance(body.get(key), str):
                return str(body[key])
    return " ".join(response.text.split())


#: How much of a server's error text is kept in an error message.
MAX_DETAIL_CHARS = 300


@dataclass(frozen=True, slots=True)
class ServerCalls:
    """How the failures of one OpenAI-compatible server Dreamer calls are told: a timeout or a
    connection error is transient, 429/5xx transient with its ``Retry-After``, any other status
    permanent with the server's message and the setting to check. Every message is redacted."""

    #: "the embeddings server", "the LLM server".
    what: str
    endpoint: str
    #: The configuration table ("embeddings", "llm") and its URL key ("url", "base_url").
    table: str
    url_key: str
    operation: str
    timeout_s: float
    #: What else to try when calls keep timing out ("lower embeddings.batch_size").
    slow_fix: str
    redact: Callable[[str], str]

    async def post(self, client: httpx.AsyncClient, body: Any) -> httpx.Response:
        """POST ``body`` to the endpoint; a transport failure raised as transient, a status >= 300
        as :meth:`refused` says."""
        import httpx  # with its client: a run that calls no server never imports it

        try:
            # httpx bounds each read, not the answer: a server trickling a byte at a time would hold
            # the call for ever. timeout_s bounds the whole request.
            with anyio.fail_after(self.timeout_s):
                response = await client.post(self.endpoint, json=body)
        except TimeoutError:
            raise TransientBackendError(
                self.redact(
                    f"{self.what} at {self.endpoint} sent no whole answer within {self.timeout_s:g}s; if "
                    f"it keeps happening, raise {self.table}.timeout_s or {self.slow_fix}"
                ),
                operation=self.operation,
            ) from None
        except httpx.TimeoutException as exc:
            raise TransientBackendError(
                self.redact(
                    f"{self.what} at {self.endpoint} timed out ({type(exc).__name__}, "
                    f"{self.timeout_s:g}s). If it keeps happening, raise "
                    f"{self.table}.timeout_s or {self.slow_fix}"
                ),
                operation=self.operation,
            ) from None
        except httpx.TransportError as exc:
            raise TransientBackendError(
                self.redact(
                    f"cannot reach {self.what} at {self.endpoint}: {type(exc).__name__}: "
                    f"{exc or 'connection failed'}; check that it runs and that "
                    f"{self.table}.{self.url_key} is right"
                ),
                operation=self.operation,
            ) from None
        if response.status_code >= 300:
            raise self.refused(response)
        return response

    def refused(self, response: httpx.Response) -> Exception:
        """The error of an answer with a status of 300 or more."""
        status = response.status_code
        # A redirect's body repeats its target, which is never shown (see redirect_origin).
        detail = "" if 300 <= status < 400 else self.redact(server_detail(response))[:MAX_DETAIL_CHARS]
        shown = f": {detail}" if detail else ""
        transient = transient_status_error(
            status,
            response.headers.get("Retry-After"),
            f"{self.what} answered HTTP {status}{shown}",
            operation=self.operation,
        )
        if transient is not None:
            return transient
        table = self.table
        if status in (401, 403):
            fix = f"check {table}.api_key_env / {table}.api_key_file"
        elif status == 404:
            fix = f"check {table}.{self.url_key} (the server's base URL) and {table}.model"
        elif 300 <= status < 400:
            fix = (
                f"set {table}.{self.url_key} to the server's final address (it points at "
                f"{redirect_origin(response.headers.get('Location'), self.redact)}): redirects are "
                "not followed"
            )
        else:
            fix = f"check {table}.model and the server's logs"
        return PermanentBackendError(
            f"{self.what} refused the request with HTTP {status}{shown}; {fix}",
            status=status,
            operation=self.operation,
            detail=detail,
        )


def redirect_origin(location: str | None, redact: Callable[[str], str]) -> str:
    """Where a redirect's ``Location`` points, told by its scheme, host and port only, redacted.

    The path, query, fragment and user part are never shown: a hostile or misconfigured server can
    put anything there, the API key in any encoding among it (``?token=Bearer%20<key>``), and an
    error message reaches the terminal, the journal, the run records and an agent's log.
    """
    import httpx

    if not location:
        return "an address it did not name"
    try:
        url = httpx.URL(location.strip())
    except (httpx.InvalidURL, ValueError, TypeError):
        return "an address that does not parse"
    if not url.host:
        return "another path on the same server"
    scheme = url.scheme if url.scheme in ("http", "https") else "?"
    port = f":{url.port}" if url.port is not None else ""
    return redact(f"{scheme}://{url.host}{port}")


def transient_status_error(
    status: int, retry_after: str | None, failed: str, *, operation: str
) -> TransientBackendError | None:
    """The retryable error for an HTTP ``status`` in :data:`TRANSIENT_STATUSES` (``failed`` says what
    failed, e.g. "the embeddings server answered HTTP 503: busy"), honouring the server's
    ``Retry-After`` header; None for any other status."""
    if status not in TRANSIENT_STATUSES:
        return None
    delay = parse_retry_after(retry_after)
    advice = f" (server asks to wait {delay:g}s)" if delay is not None else ""
    return TransientBackendError(
        f"{failed}, a transient fault{advice}", status=status, operation=operation, retry_after=delay
    )


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


def backoff_delay(
    policy: RetryPolicy, attempt: int, retry_after: float | None, rand: Callable[[], float]
) -> float:
    """Delay before retry number ``attempt`` (1-based), in seconds.

    A server's ``Retry-After`` wins, capped at ``retry_after_cap_s``; otherwise full jitter:
    uniform in [0, min(max_delay, base * 2**(attempt-1))].
    """
    if retry_after is not None and retry_after >= 0:
        return min(retry_after, policy.retry_after_cap_s)
    ceiling: float = min(policy.max_delay_s, policy.base_delay_s * 2.0 ** (attempt - 1))
    return rand() * ceiling


@dataclass
class RetryStats:
    """What the retries of one run cost; reported in the run summary."""

    attempts: dict[str, int] = field(default_factory=dict)
    slept_s: float = 0.0

    def count(self, operation: str) -> None:
        self.attempts[operation] = self.attempts.get(operation, 0) + 1


async def call_with_retry(
    operation: str,
    fn: Callable[[], Awaitable[T]],
    policy: RetryPolicy,
    *,
    slot: SlotLock | None = None,
    stats: RetryStats | None = None,
    on_retry: Callable[[int, float, TransientBackendError], None] | None = None,
    sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
    rand: Callable[[], float] = random.random,
) -> T:
    """Run ``fn``; on a transient error sleep (slot released) and try again, up to the policy's cap."""
    attempt = 0
    while True:
        attempt += 1
        if stats is not None:
            stats.count(operation)
        try:
            return await fn()
        except TransientBackendError as exc:
            if attempt >= policy.max_attempts:
                raise RetriesExhausted(operation, attempt, exc) from exc
            delay = backoff_delay(policy, attempt, exc.retry_after, rand)
            if on_retry is not None:
                on_retry(attempt, delay, exc)
            had_slot = slot is not None and slot.held
            if had_slot and slot is not None:
                slot.release()
            try:
                await sleep(delay)
            finally:
                if stats is not None:
                    stats.slept_s += delay
            if had_slot and slot is not None:
                await slot.acquire()


RetryHook = Callable[[int, float, TransientBackendError], None]


def backoff_logger(operation: str, logger: Any) -> RetryHook:
    """An ``on_retry`` hook that logs one warning per backoff of ``operation`` on ``logger``."""

    def on_retry(attempt: int, delay: float, exc: TransientBackendError) -> None:
        logger.warning(
            "backend busy, backing off",
            operation=operation,
            attempt=attempt,
            delay_s=round(delay, 2),
            status=exc.status,
            retry_after=exc.retry_after,
            error=str(exc),
        )

    return on_retry


async def call_holding_slot(
    operation: str,
    fn: Callable[[], Awaitable[T]],
    policy: RetryPolicy,
    slot: SlotLock,
    *,
    stats: RetryStats | None = None,
    on_retry: RetryHook | None = None,
    on_acquired: Callable[[], None] | None = None,
) -> T:
    """Run an LLM-backed call under the slot lock with the retry rules, always releasing the slot.

    The slot is taken first (:class:`~dreamer.errors.SlotBusyError` when that times out), released
    during every backoff sleep and taken again before the next attempt (:func:`call_with_retry`).
    ``on_acquired`` runs once the slot is first held.
    """
    await slot.acquire()
    if on_acquired is not None:
        on_acquired()
    try:
        return await call_with_retry(operation, fn, policy, slot=slot, stats=stats, on_retry=on_retry)
    finally:
        slot.release()
