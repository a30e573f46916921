"""The one table from an error to a run outcome and an exit code."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from pathlib import Path

import pytest

import dreamer.hermes
from dreamer.errors import (
    AuditError,
    ConfigError,
    DreamerError,
    ExitCode,
    ForbiddenRequestError,
    MemoryFileError,
    MemoryTextError,
    PermanentBackendError,
    PolicyError,
    ProtocolError,
    RetriesExhausted,
    SlotBusyError,
    TransientBackendError,
    UnknownAgentError,
    UsageError,
)
from dreamer.hermes.audit.compress_reflect import CompressionUnusable
from dreamer.hermes.audit.config_yaml import ConfigYamlError
from dreamer.hermes.audit.ledger import LedgerReadError
from dreamer.hermes.audit.rotation import RotationRefusedError
from dreamer.hermes.audit.settings import InvalidAuditSettingsError
from dreamer.hermes.audit.skills import SkillWriteError
from dreamer.hermes.audit.soul_file import SoulWriteError
from dreamer.hermes.audit.state import AuditStateError
from dreamer.hermes.audit.trigger import NaiveTimestampError
from dreamer.hermes.audit.writers import WriterRegistryError
from dreamer.hermes.memory.disk import ForeignFileError, MemoryFileTooLargeError
from dreamer.hermes.memory.limits import MemoryLimitsError
from dreamer.hermes.memory.locking import SymlinkRefusedError
from dreamer.hermes.memory.results import Usage
from dreamer.hermes.memory.store import (
    AmbiguousMatchError,
    BatchError,
    BlockedContentError,
    EmptyContentError,
    EntryDelimiterError,
    ExternalEditError,
    MemoryStoreError,
    NoMatchError,
    OverBudgetError,
    StoreReadError,
    StoreWriteError,
)
from dreamer.outcomes import Outcome, classify, describe, ending, exit_code


class TestClassify:
    @pytest.mark.parametrize(
        ("error", "expected"),
        [
            (ConfigError("c.toml: x: bad"), (Outcome.FAILED, ExitCode.CONFIG)),
            (UsageError("--since: bad"), (Outcome.FAILED, ExitCode.USAGE)),
            (PolicyError("bank 'x' is read-only"), (Outcome.FAILED, ExitCode.USAGE)),
            (UnknownAgentError("unknown agent 'x'"), (Outcome.FAILED, ExitCode.USAGE)),
            (SlotBusyError("held"), (Outcome.SLOT_BUSY, ExitCode.TEMPFAIL)),
            (TransientBackendError("503", status=503), (Outcome.DEFERRED, ExitCode.TEMPFAIL)),
            (RetriesExhausted("list", 3, TransientBackendError("5")), (Outcome.DEFERRED, ExitCode.TEMPFAIL)),
            (PermanentBackendError("404", status=404), (Outcome.FAILED, ExitCode.FAILED)),
            (ProtocolError("not JSON"), (Outcome.FAILED, ExitCode.FAILED)),
            (ForbiddenRequestError("DELETE refused"), (Outcome.FAILED, ExitCode.FAILED)),
        ],
    )
    def test_every_error_of_the_tree_has_its_row(
        self, error: Exception, expected: tuple[Outcome, ExitCode]
    ) -> None:
        assert classify(error) == expected

    def test_an_error_dreamer_did_not_raise_is_a_bug_not_an_outcome(self) -> None:
        """A KeyError has no row: the caller reports it with its traceback."""
        assert classify(KeyError("x")) is None

    def test_describe_adds_the_servers_detail_once(self) -> None:
        assert describe(PermanentBackendError("400 from retain", detail="bad id")) == "400 from retain bad id"
        assert describe(PermanentBackendError("400: bad id", detail="bad id")) == "400: bad id"


FAILED = (Outcome.FAILED, ExitCode.FAILED)
BAD_USAGE = (Outcome.FAILED, ExitCode.USAGE)


class TestHermesRows:
    """The Hermes errors' rows: the exit codes ``dreamer memory`` and ``dreamer audit`` gave them
    before they joined the tree (a limit in config.yaml 78, text that cannot be stored 2, any other
    refusal 1), and the ``OSError`` / ``ValueError`` their catchers still catch them by."""

    @pytest.mark.parametrize(
        ("error", "expected"),
        [
            (
                MemoryLimitsError("config.yaml: memory.user_char_limit: bad"),
                (Outcome.FAILED, ExitCode.CONFIG),
            ),
            (MemoryTextError("bad text"), BAD_USAGE),
            (EntryDelimiterError(), BAD_USAGE),
            (BlockedContentError("Blocked: injection"), BAD_USAGE),
            (MemoryFileError("refused"), FAILED),
            (MemoryStoreError("--old is required for this action"), FAILED),
            (EmptyContentError("Content cannot be empty."), FAILED),
            (OverBudgetError("over", current_entries=["a"], usage=Usage(10, 5)), FAILED),
            (NoMatchError("none", old_text="x", current_entries=["a"]), FAILED),
            (AmbiguousMatchError("two", old_text="a", matches=["ab", "ac"]), FAILED),
            (BatchError("op 1", index=1, current_entries=(), usage=None), FAILED),
            (ExternalEditError(Path("MEMORY.md"), None), FAILED),
            (StoreReadError("cannot read"), FAILED),
            (StoreWriteError("cannot write"), FAILED),
            (SymlinkRefusedError(Path("MEMORY.md.lock")), FAILED),
            (ForeignFileError(Path("MEMORY.md"), "owned by uid 0"), FAILED),
            (MemoryFileTooLargeError(Path("MEMORY.md"), 1 << 21), FAILED),
            (AuditError("audit failed"), FAILED),
            (RotationRefusedError("no canary line"), FAILED),
            (LedgerReadError("cannot read the ledger"), FAILED),
            (WriterRegistryError("cannot read"), FAILED),
            (SkillWriteError("cannot write"), FAILED),
            (SoulWriteError("cannot change"), FAILED),
            (AuditStateError("malformed"), FAILED),
            (ConfigYamlError("no model"), FAILED),
            (InvalidAuditSettingsError("stale_days must be at least 1"), FAILED),
            (NaiveTimestampError("now must carry a time zone"), FAILED),
            (CompressionUnusable("not a list", None), FAILED),
        ],
        ids=lambda value: type(value).__name__ if isinstance(value, Exception) else "",
    )
    def test_each_has_the_row_it_had(self, error: Exception, expected: tuple[Outcome, ExitCode]) -> None:
        assert classify(error) == expected
        assert ending(error) == expected

    @pytest.mark.parametrize(
        ("cls", "also"),
        [
            (MemoryLimitsError, ValueError),
            (EmptyContentError, ValueError),
            (EntryDelimiterError, ValueError),
            (BlockedContentError, ValueError),
            (SymlinkRefusedError, OSError),
            (ForeignFileError, OSError),
            (MemoryFileTooLargeError, OSError),
            (RotationRefusedError, OSError),
            (LedgerReadError, OSError),
            (WriterRegistryError, OSError),
            (SkillWriteError, OSError),
            (SoulWriteError, OSError),
            (AuditStateError, ValueError),
            (ConfigYamlError, ValueError),
            (InvalidAuditSettingsError, ValueError),
            (NaiveTimestampError, ValueError),
        ],
    )
    def test_each_is_still_caught_by_its_builtin_base(
        self, cls: type[Exception], also: type[Exception]
    ) -> None:
        assert issubclass(cls, also)

    def test_an_oserror_keeps_its_errno_and_message(self) -> None:
        error = SymlinkRefusedError(Path("MEMORY.md.lock"))
        assert error.errno is not None and error.filename == "MEMORY.md.lock"
        assert str(error).startswith("refusing to write MEMORY.md.lock: it is a symbolic link")

    def test_every_public_hermes_error_is_in_the_tree(self) -> None:
        """A new exception in dreamer/hermes/ gets a parent under DreamerError (and so a row)."""
        outside: list[str] = []
        for info in pkgutil.walk_packages(dreamer.hermes.__path__, "dreamer.hermes."):
            module = importlib.import_module(info.name)
            for name, value in inspect.getmembers(module, inspect.isclass):
                if value.__module__ != info.name or name.startswith("_"):
                    continue
                if issubclass(value, BaseException) and not issubclass(value, DreamerError):
                    outside.append(f"{info.name}.{name}")
        assert outside == []

    def test_an_error_without_a_row_ends_a_command_as_failed(self) -> None:
        assert ending(OSError(5, "I/O error")) == FAILED


class TestExitCode:
    @pytest.mark.parametrize(
        ("outcomes", "code"),
        [
            ([], ExitCode.OK),
            (["promoted", "idle", "dry_run"], ExitCode.OK),
            (["promoted", "deferred"], ExitCode.TEMPFAIL),
            (["slot_busy"], ExitCode.TEMPFAIL),
            (["timeout"], ExitCode.TEMPFAIL),
            (["deferred", "failed", "promoted"], ExitCode.FAILED),
        ],
    )
    def test_failed_beats_try_again_later_beats_ok(self, outcomes: list[str], code: ExitCode) -> None:
        assert exit_code(outcomes) == code
