"""The HTTP libraries' own log records, scrubbed of Dreamer's secrets inside the agent's process.

The provider runs in Hermes, whose logging Dreamer does not configure: at DEBUG, httpcore logs every
response's headers (a redirect's ``Location`` with whatever a server put in it, the key URL-quoted
among it) and httpx each request's URL. Dreamer's own daemon renders every record through its
redactor (:class:`dreamer.log.SecretRedactor`); here a filter on those libraries' loggers does the
same before any of Hermes' handlers sees the record.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable

from dreamer.log import SecretRedactor

__all__ = ["HTTP_LOGGERS", "scrub_http_logs"]

#: The loggers httpx and httpcore write to (a filter on a logger does not apply to its children).
HTTP_LOGGERS = (
    "httpx",
    "httpcore",
    "httpcore.connection",
    "httpcore.http11",
    "httpcore.http2",
    "httpcore.proxy",
    "httpcore.socks",
)


class _Scrub(logging.Filter):
    def __init__(self) -> None:
        super().__init__()
        self.secrets: set[str] = set()
        self.redactor = SecretRedactor()

    def add(self, secrets: Iterable[str]) -> None:
        self.secrets.update(s for s in secrets if s)
        self.redactor = SecretRedactor(self.secrets)

    def filter(self, record: logging.LogRecord) -> bool:
        if self.secrets:
            try:
                message = record.getMessage()
            except Exception:  # a record whose arguments do not format: left to logging itself
                return True
            record.msg, record.args = self.redactor.redact_text(message), ()
        return True


_SCRUB = _Scrub()
_LOCK = threading.Lock()


def scrub_http_logs(secrets: Iterable[str]) -> None:
    """Mask ``secrets`` (and every piece of them) in what httpx and httpcore log from now on;
    idempotent, and the secrets of every configuration loaded in the process are kept."""
    with _LOCK:
        _SCRUB.add(secrets)
        for name in HTTP_LOGGERS:
            logger = logging.getLogger(name)
            if _SCRUB not in logger.filters:
                logger.addFilter(_SCRUB)
