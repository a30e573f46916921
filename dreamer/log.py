"""Structured logs that read well in the journal and on a terminal, and never carry a secret.

Under systemd (the output stream is the journal named by ``$JOURNAL_STREAM``): one JSON object per
line, prefixed with its sd-daemon priority (``<3>`` ... ``<7>``) so ``journalctl -p warning`` works.
On a terminal: structlog's console format; anywhere else: JSON lines without the prefix.
``--log-format json|console`` forces either. Records of the standard ``logging`` module go through
the same chain. Secrets are redacted by key name and by value, in the event and in the rendered line.
"""

from __future__ import annotations

import json
import logging
import os
import re
import sys
import urllib.parse
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, TextIO

import structlog
from structlog.types import EventDict, Processor, WrappedLogger

LogFormat = Literal["auto", "json", "console"]
LogLevel = Literal["debug", "info", "warning", "error"]
LOG_FORMATS: tuple[LogFormat, ...] = ("auto", "json", "console")
LOG_LEVELS: tuple[LogLevel, ...] = ("debug", "info", "warning", "error")

REDACTED = "**********"

# sd-daemon(3) priorities, by structlog level name.
SYSLOG_PRIORITY: Mapping[str, int] = {
    "critical": 2,
    "exception": 3,
    "error": 3,
    "warning": 4,
    "warn": 4,
    "notice": 5,
    "info": 6,
    "debug": 7,
}

# "token" but not "tokens": ``access_token`` is a secret, ``llm_prompt_tokens`` a count of an LLM's.
SENSITIVE_KEY = re.compile(
    r"api[_-]?key|apikey|token(?!s)|secret|passw(or)?d|passphrase|authori[sz]ation|credential|cookie",
    re.IGNORECASE,
)

# A secret shorter than this is only redacted where a whole value equals it: replacing every
# occurrence of a 2-letter string would shred the logs without protecting anything real.
MIN_SUBSTRING_SECRET = 4
# Any piece of a secret this long is masked too: a server that echoes the key in a long error body
# cut to a prefix, a key split across two log fields, must not leak it a piece at a time.
SECRET_PIECE = 8


def _escaped_forms(secret: str) -> list[str]:
    """The secret as it can appear in text: itself, JSON-escaped, URL-encoded (longest first)."""
    forms = {secret, json.dumps(secret)[1:-1], urllib.parse.quote(secret, safe=""), repr(secret)[1:-1]}
    return sorted(forms, key=len, reverse=True)


def _mask_pieces(text: str, secret: str) -> str:
    """Mask every run of ``text`` made of :data:`SECRET_PIECE`-character pieces of ``secret``."""
    if len(text) < SECRET_PIECE:
        return text
    pieces = {secret[i : i + SECRET_PIECE] for i in range(len(secret) - SECRET_PIECE + 1)}
    hidden = [False] * len(text)
    for i in range(len(text) - SECRET_PIECE + 1):
        if text[i : i + SECRET_PIECE] in pieces:
            hidden[i : i + SECRET_PIECE] = [True] * SECRET_PIECE
    if not any(hidden):
        return text
    out: list[str] = []
    for i, ch in enumerate(text):
        if not hidden[i]:
            out.append(ch)
        elif i == 0 or not hidden[i - 1]:
            out.append(REDACTED)
    return "".join(out)


class SecretRedactor:
    """A structlog processor that masks secrets in an event, plus the same masking for plain text."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        unique = {s for s in secrets if s}
        # Longest first, so a secret that contains another is masked whole.
        self.secrets: tuple[str, ...] = tuple(sorted(unique, key=len, reverse=True))

    def redact_text(self, text: str) -> str:
        """``text`` with every secret masked: whole, in its JSON- or URL-escaped forms, and any piece of
        it of :data:`SECRET_PIECE` characters or more (a prefix left by truncation, a split key)."""
        for secret in self.secrets:
            if text == secret:
                return REDACTED
            if len(secret) < MIN_SUBSTRING_SECRET:
                continue
            for form in _escaped_forms(secret):
                text = text.replace(form, REDACTED)
            if len(secret) >= SECRET_PIECE:
                text = _mask_pieces(text, secret)
        return text

    def redact_value(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.redact_text(value)
        if isinstance(value, Mapping):
            return {k: self._redact_item(k, v) for k, v in value.items()}
        if isinstance(value, list | tuple | set | frozenset):
            return [self.redact_value(v) for v in value]
        return value

    def _redact_item(self, key: object, value: Any) -> Any:
        if isinstance(key, str) and value is not None and SENSITIVE_KEY.search(key):
            return REDACTED
        return self.redact_value(value)

    def __call__(self, logger: WrappedLogger, method_name: str, event_dict: EventDict) -> EventDict:
        return {k: self._redact_item(k, v) for k, v in event_dict.items()}


class LineRenderer:
    """Render with ``inner``, scrub secrets from the text, and add the journal priority prefix."""

    def __init__(
        self,
        inner: Processor,
        *,
        redactor: SecretRedactor,
        journal_prefix: bool,
    ) -> None:
        self.inner = inner
        self.redactor = redactor
        self.journal_prefix = journal_prefix

    def __call__(self, logger: WrappedLogger, method_name: str, event_dict: EventDict) -> str:
        level = str(event_dict.get("level", method_name)).lower()
        rendered = self.inner(logger, method_name, event_dict)
        line = self.redactor.redact_text(str(rendered))
        if self.journal_prefix:
            return f"<{SYSLOG_PRIORITY.get(level, 6)}>{line}"
        return line


def is_journal_stream(stream: TextIO, environ: Mapping[str, str] | None = None) -> bool:
    """True when ``stream`` is the journal connection systemd announced in ``$JOURNAL_STREAM``."""
    env = os.environ if environ is None else environ
    announced = env.get("JOURNAL_STREAM", "")
    dev, sep, ino = announced.partition(":")
    if not sep:
        return False
    try:
        st = os.fstat(stream.fileno())
        return st.st_dev == int(dev) and st.st_ino == int(ino)
    except (OSError, ValueError, AttributeError):
        # Not a real file (e.g. captured by a test runner) or a malformed variable.
        return False


@dataclass(frozen=True, slots=True)
class LogSetup:
    """What :func:`configure_logging` decided: the format in use and whether the journal prefix is on."""

    format: Literal["json", "console"]
    journal: bool
    level: LogLevel


def resolve_format(
    requested: LogFormat, stream: TextIO, environ: Mapping[str, str] | None = None
) -> tuple[Literal["json", "console"], bool]:
    """The concrete format for ``requested`` on ``stream``, and whether stdout is the journal."""
    journal = is_journal_stream(stream, environ)
    if requested == "json":
        return "json", journal
    if requested == "console":
        return "console", journal
    if journal:
        return "json", True
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError):
        tty = False
    return ("console" if tty else "json"), False


_LEADING_KEYS = ("timestamp", "level", "logger", "event")


def _lead_with_common_keys(logger: WrappedLogger, method_name: str, event_dict: EventDict) -> EventDict:
    """Put timestamp, level, logger and event first, so ``journalctl -o cat`` reads left to right."""
    ordered = {k: event_dict[k] for k in _LEADING_KEYS if k in event_dict}
    ordered.update((k, v) for k, v in event_dict.items() if k not in ordered)
    return ordered


def _shared_processors() -> list[Processor]:
    return [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True, key="timestamp"),
    ]


def configure_logging(
    *,
    log_format: LogFormat = "auto",
    level: LogLevel = "info",
    secrets: Iterable[str] = (),
    stream: TextIO | None = None,
    environ: Mapping[str, str] | None = None,
) -> LogSetup:
    """Route structlog and the standard ``logging`` module to ``stream`` (default: stdout).

    Safe to call again (for example after a reload with a new API key): the previous handler is
    replaced. ``secrets`` are the literal secret values to mask wherever they appear.
    """
    out = sys.stdout if stream is None else stream
    fmt, journal = resolve_format(log_format, out, environ)
    redactor = SecretRedactor(secrets)

    inner: Processor
    final: list[Processor] = [structlog.stdlib.ProcessorFormatter.remove_processors_meta]
    if fmt == "json":
        final.append(
            structlog.processors.ExceptionRenderer(
                # Locals would bloat every line and could hold request headers.
                structlog.tracebacks.ExceptionDictTransformer(show_locals=False)
            )
        )
        final.append(_lead_with_common_keys)
        inner = structlog.processors.JSONRenderer(sort_keys=False)
    else:
        inner = structlog.dev.ConsoleRenderer(
            colors=_wants_color(out, environ),
            # Plain tracebacks: the same output whether or not `rich` happens to be installed.
            exception_formatter=structlog.dev.plain_traceback,
        )
    final.append(redactor)
    final.append(LineRenderer(inner, redactor=redactor, journal_prefix=journal))

    formatter = structlog.stdlib.ProcessorFormatter(
        processors=final,
        foreign_pre_chain=[*_shared_processors(), structlog.stdlib.ExtraAdder()],
    )
    handler = logging.StreamHandler(out)
    handler.setFormatter(formatter)
    handler.set_name("dreamer")

    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(getattr(logging, level.upper()))
    logging.captureWarnings(True)

    structlog.configure(
        processors=[
            structlog.stdlib.filter_by_level,
            *_shared_processors(),
            structlog.stdlib.PositionalArgumentsFormatter(),
            structlog.processors.StackInfoRenderer(),
            structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
        ],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=False,
    )
    return LogSetup(format=fmt, journal=journal, level=level)


def _wants_color(stream: TextIO, environ: Mapping[str, str] | None) -> bool:
    env = os.environ if environ is None else environ
    if env.get("NO_COLOR"):
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def get_logger(name: str) -> structlog.stdlib.BoundLogger:
    """A logger named ``name`` (shown as ``logger`` in each record)."""
    logger: structlog.stdlib.BoundLogger = structlog.stdlib.get_logger(name)
    return logger
