"""The error tree: every failure Dreamer reports is one of these.

::

    DreamerError
    ├── ConfigError                 the configuration is wrong: fix the file (exit 78, EX_CONFIG)
    ├── BackendError                the memory backend did not do what was asked
    │   ├── TransientBackendError   try again later (timeouts, connection errors, 429, 5xx);
    │   │                           ``retry_after`` carries the server's suggested delay, if any
    │   ├── PermanentBackendError   will never work as sent (400/401/403/404/422); ``detail`` is
    │   │                           the server's own message
    │   └── ProtocolError           the server answered something that does not parse
    ├── ForbiddenRequestError       a request outside the append-only allow-list was about to be
    │                               sent; raised before any byte leaves the process
    ├── PolicyError                 a bank alias is unknown, disabled, or not allowed for the operation
    └── SlotBusyError               the accelerator-slot lock could not be taken in time

Catch ``TransientBackendError`` to retry, ``PermanentBackendError`` to give up with the server's
message, ``ConfigError`` to tell the operator which key to fix.
"""

from __future__ import annotations


class DreamerError(Exception):
    """Base class of every error Dreamer raises on purpose."""


class ConfigError(DreamerError):
    """The configuration cannot be used.

    ``problems`` holds one line per problem, each already in the form
    ``<file>: <key.path>: <what is wrong and what is allowed>``.
    """

    def __init__(self, problems: list[str] | str) -> None:
        self.problems = [problems] if isinstance(problems, str) else list(problems)
        super().__init__("\n".join(self.problems))


class BackendError(DreamerError):
    """The memory backend failed; see the subclasses for what to do about it."""

    def __init__(self, message: str, *, status: int | None = None, operation: str = "") -> None:
        self.status = status
        self.operation = operation
        super().__init__(message)


class TransientBackendError(BackendError):
    """Try again later. ``retry_after`` is the server's suggested delay in seconds, if it sent one."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        operation: str = "",
        retry_after: float | None = None,
    ) -> None:
        self.retry_after = retry_after
        super().__init__(message, status=status, operation=operation)


class PermanentBackendError(BackendError):
    """The request will never succeed as sent. ``detail`` is the server's explanation."""

    def __init__(
        self, message: str, *, status: int | None = None, operation: str = "", detail: str = ""
    ) -> None:
        self.detail = detail
        super().__init__(message, status=status, operation=operation)


class ProtocolError(BackendError):
    """The server's answer could not be understood (bad JSON, missing fields, wrong types)."""


class ForbiddenRequestError(DreamerError):
    """A request that could delete, patch or replace memory was refused before it was sent."""


class PolicyError(DreamerError):
    """A bank alias was unknown, disabled, or not allowed for the requested operation."""


class SlotBusyError(DreamerError):
    """The accelerator-slot lock was held by someone else for longer than the acquire timeout."""
