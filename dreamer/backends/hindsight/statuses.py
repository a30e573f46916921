"""How a Hindsight HTTP answer that is not a success maps onto Dreamer's error tree.

:func:`status_error` turns a status of 300 or more into a
:class:`~dreamer.errors.TransientBackendError` (retry, with the server's ``Retry-After`` read by
:func:`parse_retry_after`) or a :class:`~dreamer.errors.PermanentBackendError` carrying the
server's ``detail``; :func:`is_bank_not_found` tells Hindsight's "unknown bank" 404 from a wrong
URL. Why these statuses: ``docs/design/hindsight.md``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import httpx

from dreamer.errors import BackendError, PermanentBackendError
from dreamer.retry import (
    TRANSIENT_STATUSES,
    parse_retry_after,
    redirect_origin,
    transient_status_error,
)

__all__ = ["TRANSIENT_STATUSES", "is_bank_not_found", "parse_retry_after", "status_error"]

_BANK_NOT_FOUND = re.compile(r"^Bank '.*' not found$", re.DOTALL)


#: How much of a server's error text is kept in an error message.
MAX_DETAIL_CHARS = 500


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


def is_bank_not_found(exc: PermanentBackendError) -> bool:
    """Whether ``exc`` is Hindsight's own "Bank 'x' not found" (an empty bank, not a wrong URL)."""
    return exc.status == 404 and _BANK_NOT_FOUND.match(exc.detail) is not None


def status_error(
    response: httpx.Response,
    operation: str,
    *,
    redact: Callable[[str], str],
    key_advice: Callable[[], str],
) -> BackendError:
    """The typed error for ``response`` (status >= 300) to ``operation``.

    ``redact`` scrubs the API key from server text; ``key_advice`` says which setting to fix on 401/403.
    """
    status = response.status_code
    try:
        body: Any = response.json()
    except ValueError:
        body = None
    # Redact before cutting: a cut made first could leave a prefix of an echoed key unmasked.
    detail = redact(_flatten_detail(body) or response.text.strip())[:MAX_DETAIL_CHARS]
    if 300 <= status < 400:
        # A redirect's body repeats its target, which is never shown (see redirect_origin).
        detail = ""
    shown = f": {detail}" if detail else ""
    transient = transient_status_error(
        status,
        response.headers.get("Retry-After"),
        f"Hindsight {operation} failed with HTTP {status}{shown}",
        operation=operation,
    )
    if transient is not None:
        return transient
    if status in (401, 403):
        return PermanentBackendError(
            f"Hindsight refused {operation} with HTTP {status}{shown}; {key_advice()}",
            status=status,
            operation=operation,
            detail=detail,
        )
    if 300 <= status < 400:
        where = redirect_origin(response.headers.get("Location"), redact)
        return PermanentBackendError(
            f"Hindsight answered {operation} with a redirect (HTTP {status}, to {where}); set "
            "backend.hindsight.url to the server's final address: redirects are not followed",
            status=status,
            operation=operation,
        )
    return PermanentBackendError(
        f"Hindsight rejected {operation} with HTTP {status}{shown}",
        status=status,
        operation=operation,
        detail=detail,
    )
