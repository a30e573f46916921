"""The one table from an error to a run outcome and an exit code."""

from __future__ import annotations

import pytest

from dreamer.errors import (
    ConfigError,
    ExitCode,
    ForbiddenRequestError,
    PermanentBackendError,
    PolicyError,
    ProtocolError,
    RetriesExhausted,
    SlotBusyError,
    TransientBackendError,
    UnknownAgentError,
    UsageError,
)
from dreamer.outcomes import Outcome, classify, describe, exit_code


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
