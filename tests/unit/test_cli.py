"""The ``dreamer`` parser: which commands it lists, in which order, and what importing it costs."""

from __future__ import annotations

import argparse

import pytest

from dreamer.cli import build_parser
from tests.support.imports import JOB_BODIES, loaded_after


def _command_names(parser: argparse.ArgumentParser) -> list[str]:
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return list(subparsers.choices)


class TestParser:
    def test_help_lists_commands_group_by_group(self) -> None:
        """`dreamer --help` lists service, roll-up, read-side, agent, Hermes, then state commands, each
        group as defined."""
        assert _command_names(build_parser()) == [
            "check-config",
            "run",
            "rollup",
            "status",
            "explain",
            "demo",
            "banks",
            "recall",
            "reflect",
            "retain",
            "tool-schemas",
            "prelude",
            "card",
            "audit",
            "memory",
            "hermes",
            "state",
        ]


class TestImports:
    def test_importing_the_cli_leaves_command_bodies_unimported(self) -> None:
        """`import dreamer.cli` loads no pipeline, backend, Hermes store, command body or httpx."""
        heavy = [*JOB_BODIES, "dreamer.service.daemon", "dreamer.service.start"]
        assert loaded_after("import dreamer.cli", heavy) == []


class TestLastResort:
    def test_an_os_error_no_command_checked_is_one_line_not_a_traceback(
        self, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """A file-system error no command turned into its own message (here a name too long,
        injected into the `status` handler because every known path now has its own check) is
        one line naming the path, exit 1."""
        import errno

        import dreamer.cli as cli

        def failing(args: argparse.Namespace) -> int:
            raise OSError(errno.ENAMETOOLONG, "File name too long", "/tmp/" + "x" * 300)

        parser = build_parser()
        original = parser.parse_known_args

        def parse(argv: list[str] | None = None) -> tuple[argparse.Namespace, list[str]]:
            args, extras = original(argv)
            args.handler = failing
            return args, extras

        monkeypatch.setattr(parser, "parse_known_args", parse)
        monkeypatch.setattr(cli, "build_parser", lambda: parser)
        assert cli.main(["status"]) == 1
        (line,) = capsys.readouterr().err.strip().splitlines()
        assert line.startswith("dreamer status: /tmp/xxx") and "File name too long" in line
