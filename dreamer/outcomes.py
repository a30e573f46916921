"""How a run or a command ends: the outcome words, and one table from an error to an outcome and
an exit code.

Every run record, STATUS line, log summary and exit status takes its words from here, so "the
backend is down" is ``deferred`` / exit 75 wherever it is noticed: in the gate's activity call, in
the pipeline, or in a command.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from enum import StrEnum

from dreamer.errors import (
    AuditError,
    BackendError,
    ConfigError,
    DreamerError,
    ExitCode,
    MemoryFileError,
    MemoryTextError,
    PermanentBackendError,
    RetriesExhausted,
    RunBusyError,
    SlotBusyError,
    TransientBackendError,
    UsageError,
)


class Outcome(StrEnum):
    """How one run of a job ended (roll-up words; an audit adds its report status)."""

    IDLE = "idle"  # the gate saw no write since the watermark
    WAITING = "waiting"  # too few new units yet (min_new_units / max_quiet_hours)
    NOTHING_NEW = "nothing_new"  # read, but nothing to promote or reinforce
    PROMOTED = "promoted"
    REINFORCED = "reinforced"
    DRY_RUN = "dry_run"
    SLOT_BUSY = "slot_busy"  # the accelerator slot stayed taken
    BUSY = "busy"  # another run of the same profile was running
    DEFERRED = "deferred"  # a transient failure: the watermark is unchanged, the next cycle retries
    FAILED = "failed"
    TIMEOUT = "timeout"  # cancelled after schedule.job_timeout_s
    CANCELLED = "cancelled"  # the daemon stopped first
    NOT_DUE = "not_due"  # an audit that was not due


#: Outcomes whose run moved the watermark in the same transaction as its run record.
COMMITTED: frozenset[str] = frozenset({Outcome.NOTHING_NEW, Outcome.PROMOTED, Outcome.REINFORCED})

#: Outcomes worth a warning in the logs and the STATUS line.
TROUBLE: frozenset[str] = frozenset(
    {
        Outcome.DEFERRED,
        Outcome.FAILED,
        Outcome.SLOT_BUSY,
        Outcome.BUSY,
        Outcome.TIMEOUT,
        Outcome.CANCELLED,
    }
)

_EXIT_CODES: Mapping[str, ExitCode] = {
    Outcome.FAILED: ExitCode.FAILED,
    Outcome.DEFERRED: ExitCode.TEMPFAIL,
    Outcome.SLOT_BUSY: ExitCode.TEMPFAIL,
    Outcome.BUSY: ExitCode.TEMPFAIL,
    Outcome.TIMEOUT: ExitCode.TEMPFAIL,
    Outcome.CANCELLED: ExitCode.TEMPFAIL,
}

# The table: the first row whose class matches an error decides. Specific classes come first.
_BY_ERROR: tuple[tuple[type[DreamerError], Outcome, ExitCode], ...] = (
    (ConfigError, Outcome.FAILED, ExitCode.CONFIG),
    (UsageError, Outcome.FAILED, ExitCode.USAGE),
    (MemoryTextError, Outcome.FAILED, ExitCode.USAGE),  # before MemoryFileError, its parent
    (SlotBusyError, Outcome.SLOT_BUSY, ExitCode.TEMPFAIL),
    (RunBusyError, Outcome.BUSY, ExitCode.TEMPFAIL),
    (RetriesExhausted, Outcome.DEFERRED, ExitCode.TEMPFAIL),
    (TransientBackendError, Outcome.DEFERRED, ExitCode.TEMPFAIL),
    (BackendError, Outcome.FAILED, ExitCode.FAILED),
    (MemoryFileError, Outcome.FAILED, ExitCode.FAILED),
    (AuditError, Outcome.FAILED, ExitCode.FAILED),
    (DreamerError, Outcome.FAILED, ExitCode.FAILED),
)


def classify(exc: BaseException) -> tuple[Outcome, ExitCode] | None:
    """The outcome and exit code an error stands for; None for an error Dreamer did not raise on
    purpose (a bug: report it with its traceback)."""
    for cls, outcome, code in _BY_ERROR:
        if isinstance(exc, cls):
            return outcome, code
    return None


def ending(exc: BaseException) -> tuple[Outcome, ExitCode]:
    """How a command that stopped on `exc` ends: its row of the table, or failed / exit 1 for an
    error without one (an ``OSError`` no command checked, a bug), as the command line reports it."""
    return classify(exc) or (Outcome.FAILED, ExitCode.FAILED)


def describe(exc: BaseException) -> str:
    """One line for people: the error's message, with the server's own detail when it sent one."""
    text = str(exc)
    if isinstance(exc, PermanentBackendError) and exc.detail and exc.detail not in text:
        text = f"{text} {exc.detail}"
    return text


def exit_code(outcomes: Iterable[str]) -> ExitCode:
    """The exit status of a command that ran these outcomes: failed beats try-again-later beats 0."""
    codes = {_EXIT_CODES.get(o, ExitCode.OK) for o in outcomes}
    for code in (ExitCode.FAILED, ExitCode.TEMPFAIL):
        if code in codes:
            return code
    return ExitCode.OK
