"""Dreamer's JSON log records caught in memory for a test, the logging set back as it was after."""

from __future__ import annotations

import contextlib
import io
import logging
from collections.abc import Iterator

import structlog

from dreamer.log import configure_logging


@contextlib.contextmanager
def json_logs() -> Iterator[io.StringIO]:
    """Log as the daemon does under the journal (JSON, one record a line) into a string buffer."""
    out = io.StringIO()
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    configure_logging(log_format="json", stream=out, environ={})
    try:
        yield out
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
        structlog.reset_defaults()
