"""The error tree: every failure Dreamer reports is one of these.

::

    DreamerError
    ├── ConfigError                 the configuration is wrong: fix the file (exit 78)
    ├── BackendError                the memory backend did not do what was asked
    │   ├── TransientBackendError   try again later (timeouts, connection errors, 429, 5xx);
    │   │                           ``retry_after`` carries the server's suggested delay, if any
    │   ├── PermanentBackendError   will never work as sent (400/401/403/404/422); ``detail`` is
    │   │                           the server's own message
    │   └── ProtocolError           the server answered something that does not parse
    ├── RetriesExhausted            every attempt failed with a transient error (exit 75)
    ├── ForbiddenRequestError       a request outside the append-only allow-list was about to be
    │                               sent; raised before any byte leaves the process
    ├── StateFileError              the state file is damaged, foreign, from a newer Dreamer or
    │                               cannot be written (disk full); the message names the file
    ├── RunBusyError                another run of the same profile is running or committed first
    │                               (exit 75)
    ├── LockFileError               a lock file cannot be opened (a symbolic link where none may be,
    │                               a missing permission)
    ├── UsageError                  a command-line value cannot be used (exit 2)
    │   ├── PolicyError             a bank alias is unknown, disabled, or not allowed for the operation
    │   └── UnknownAgentError       an agent name that is not under ``[agents]``
    ├── SlotBusyError               the accelerator-slot lock could not be taken in time (exit 75)
    ├── MemoryFileError             an agent's MEMORY.md or USER.md (or a file Dreamer keeps in the
    │   │                           agent's folders) cannot be read or changed as asked; the file is
    │   │                           unchanged (exit 1)
    │   └── MemoryTextError         the text offered for a memory file cannot be stored as written
    │                               (exit 2)
    └── AuditError                  the memory audit cannot use one of the agent's other files (the
                                    ledger, its state, SOUL.md, the rules skill, the writer registry,
                                    config.yaml), refused a canary rotation, or got unusable settings
                                    (exit 1)

The Hermes classes live beside the code that raises them (``dreamer/hermes/``) and hang from three
of these. Those marked ``OSError`` or ``ValueError`` are one of those as well, so code that catches
them by it still does::

    ConfigError
    └── MemoryLimitsError           memory/limits.py, ValueError: config.yaml sets a bad memory limit
    MemoryFileError
    ├── MemoryStoreError            memory/refusals.py: a store call was refused
    │   ├── EmptyContentError       ValueError
    │   ├── EntryDelimiterError     ValueError; also a MemoryTextError
    │   ├── BlockedContentError     ValueError; also a MemoryTextError
    │   └── OverBudgetError, NoMatchError, AmbiguousMatchError, BatchError, ExternalEditError,
    │       StoreReadError, StoreWriteError
    ├── SymlinkRefusedError         memory/locking.py, OSError
    ├── ForeignFileError            memory/disk.py, OSError
    └── MemoryFileTooLargeError     memory/disk.py, OSError
    AuditError
    ├── LedgerReadError             audit/ledger.py, OSError
    ├── WriterRegistryError         audit/writers.py, OSError
    ├── SkillWriteError             audit/skills.py, OSError
    ├── SoulWriteError              audit/soul_file.py, OSError
    ├── RotationRefusedError        audit/rotation.py, OSError
    ├── AuditStateError             audit/state.py, ValueError
    ├── ConfigYamlError             audit/config_yaml.py, ValueError
    ├── InvalidAuditSettingsError   audit/settings.py, ValueError
    ├── NaiveTimestampError         audit/trigger.py, ValueError
    └── CompressionUnusable         audit/compress_reflect.py

Outside the tree on purpose: ``UnknownJobKind`` (service/runner.py, a ``RuntimeError``), a job
planned with no runner for its kind. That is a bug in Dreamer, so its run is ``failed`` and logged
with the traceback, as every error that is not a ``DreamerError`` is.

Catch ``TransientBackendError`` to retry, ``PermanentBackendError`` to give up with the server's
message, ``ConfigError`` to tell the operator which key to fix. :mod:`dreamer.outcomes` maps each
error to a run outcome and an exit code, in one table.
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    """Exit statuses of the ``dreamer`` command and the daemon (sysexits.h where one fits)."""

    OK = 0
    FAILED = 1
    USAGE = 2
    SOFTWARE = 70  # the daemon crashed on a bug
    CANTCREAT = 73  # the daemon could not open its state file
    TEMPFAIL = 75  # deferred, busy or unreachable: try again later
    CONFIG = 78  # the configuration is wrong
    INTERRUPTED = 130
    BROKEN_PIPE = 141


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


class RetriesExhausted(DreamerError):
    """Every attempt failed with a transient error; ``last`` is the final one."""

    def __init__(self, operation: str, attempts: int, last: TransientBackendError) -> None:
        self.operation = operation
        self.attempts = attempts
        self.last = last
        super().__init__(f"{operation}: gave up after {attempts} attempts: {last}")


class StateFileError(DreamerError):
    """Dreamer's state file cannot be used as it is; the message names the file and what to do.
    Never answered by starting a new file: that would forget every watermark and card."""


class RunBusyError(DreamerError):
    """Another run of the same profile holds its run lock, or committed first; try again later."""


class LeaseLostError(RunBusyError):
    """This host no longer holds the lease of what it ran (it expired, or another host took it
    over): nothing was committed, and the holder runs it."""


class LockFileError(DreamerError):
    """A lock file could not be opened; the message names it and why."""


class ForbiddenRequestError(DreamerError):
    """A request that could delete, patch or replace memory was refused before it was sent."""


class UsageError(DreamerError):
    """A command-line value that cannot be used; the message says what is expected."""


class PolicyError(UsageError):
    """A bank alias was unknown, disabled, or not allowed for the requested operation."""


class UnknownAgentError(UsageError):
    """An agent name that is not under ``[agents]``; the message lists the known ones."""


class SlotBusyError(DreamerError):
    """The accelerator-slot lock was held by someone else for longer than the acquire timeout."""


class MemoryFileError(DreamerError):
    """An agent's MEMORY.md or USER.md, or another file Dreamer keeps in the agent's folders (a lock
    file, say), could not be read or changed as asked; the message says why and the file is
    unchanged. Catch it to report a refused read or write of an agent's memory (exit 1); the Hermes
    store's refusals (``MemoryStoreError``) are its subclasses."""


class MemoryTextError(MemoryFileError):
    """The text offered for a memory file cannot be stored as written (a line holding only "§", a
    phrase Hermes' threat scan blocks); the message says what to change. Catch it to report the
    input as bad usage (exit 2)."""


class AuditError(DreamerError):
    """The memory audit could not use one of the agent's files besides MEMORY.md and USER.md (the
    ledger, the audit state, SOUL.md, the rules skill, the writer registry, config.yaml), refused to
    rotate the canaries, or was given unusable settings. Catch it to report that agent's audit, or
    its rotation, as failed (exit 1)."""
