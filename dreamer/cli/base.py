"""What every subcommand shares: the global options, loading ``--config`` with its log setup, and
turning an error into one line on stderr and its exit code."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from dreamer.config import Config, default_config_path, load_config
from dreamer.errors import ConfigError, DreamerError, ExitCode, TransientBackendError, UnknownAgentError
from dreamer.log import LOG_FORMATS, LOG_LEVELS, LogFormat, LogLevel, configure_logging


def add_global_options(parser: argparse.ArgumentParser, *, top_level: bool) -> None:
    """``--config``, ``--log-format`` and ``--log-level``, on the top parser and every subcommand's."""

    # On subcommand parsers the defaults are suppressed, so an option given before the subcommand
    # is not overwritten by the subparser's default: `dreamer --config F run` == `dreamer run --config F`.
    def default(value: Any) -> Any:
        return value if top_level else argparse.SUPPRESS

    group = parser.add_argument_group("global options")
    group.add_argument(
        "--config",
        type=Path,
        metavar="FILE",
        default=default(default_config_path()),
        help=f"configuration file (default: {default_config_path()})",
    )
    group.add_argument(
        "--log-format",
        choices=LOG_FORMATS,
        default=default("auto"),
        help="auto: JSON lines under systemd or in a pipe, readable on a terminal (default: auto)",
    )
    group.add_argument(
        "--log-level",
        choices=LOG_LEVELS,
        default=default(None),
        help="log level (default: warning for commands; log.level from the configuration for run)",
    )


def config_path(args: argparse.Namespace) -> Path:
    path: Path = args.config
    return path


def log_format(args: argparse.Namespace) -> LogFormat:
    fmt: LogFormat = args.log_format
    return fmt


def log_level(args: argparse.Namespace) -> LogLevel | None:
    level: LogLevel | None = args.log_level
    return level


def load_command_config(args: argparse.Namespace) -> Config:
    """Load ``--config`` and set up logging with its secrets; raises :class:`ConfigError`.

    Commands print their own report on stdout, so they log only warnings and errors to stderr
    unless ``--log-level`` asks for more (``log.level`` is the daemon's level).
    """
    config = load_config(config_path(args))
    configure_logging(
        log_format=log_format(args),
        level=log_level(args) or "warning",
        secrets=config.secrets(),
        stream=sys.stderr,
    )
    return config


def print_problems(exc: ConfigError) -> int:
    """One line per configuration problem on stderr; the exit code for a bad configuration."""
    for problem in exc.problems:
        print(problem, file=sys.stderr)
    return ExitCode.CONFIG


def report_error(args: argparse.Namespace, exc: DreamerError) -> int:
    """One line on stderr naming the command; the exit code :func:`dreamer.outcomes.classify` gives."""
    from dreamer.outcomes import classify, describe

    option = "--agent: " if isinstance(exc, UnknownAgentError) else ""
    # A retrying caller wraps what it gave up on in RetriesExhausted; a bare transient error
    # reached a one-shot command, which does not retry.
    again = (
        "; this command does not retry: run it again later" if isinstance(exc, TransientBackendError) else ""
    )
    print(f"dreamer {args.command}: {option}{describe(exc)}{again}", file=sys.stderr)
    _outcome, code = classify(exc) or (None, ExitCode.FAILED)
    return int(code)


def run_sync(args: argparse.Namespace, body: Callable[[Config], int]) -> int:
    """Load the config and run a command body; errors as in :func:`run_async`."""
    try:
        config = load_command_config(args)
    except ConfigError as exc:
        return print_problems(exc)
    try:
        return body(config)
    except DreamerError as exc:
        return report_error(args, exc)


def run_async(args: argparse.Namespace, body: Callable[[Config], Coroutine[Any, Any, int]]) -> int:
    """Load the config and run an async command body. An error Dreamer reports is one line on
    stderr and its exit code (:func:`dreamer.outcomes.classify`): 2 bad usage or a refused bank,
    75 try again later, 1 failed, 78 bad configuration."""
    try:
        config = load_command_config(args)
    except ConfigError as exc:
        return print_problems(exc)
    try:
        return asyncio.run(body(config))
    except ConfigError as exc:
        return print_problems(exc)
    except DreamerError as exc:
        return report_error(args, exc)
