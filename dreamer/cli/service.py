"""The service subcommands: ``check-config`` validates and prints the configuration, ``run`` is the
daemon systemd starts."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from dreamer.cli.base import config_path, load_command_config, log_format, log_level, print_problems
from dreamer.cli.registry import CommandGroup
from dreamer.errors import ConfigError, ExitCode

COMMANDS = CommandGroup()


def flatten(data: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """``{"a": {"b": 1}}`` -> ``("a.b", 1)``; empty tables are kept as ``{}``."""
    if isinstance(data, dict) and data:
        for key, value in data.items():
            yield from flatten(value, f"{prefix}.{key}" if prefix else str(key))
    else:
        yield prefix, data


def _check_config_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "file", nargs="?", type=Path, help="the file to check (the same as --config FILE, and wins over it)"
    )
    parser.add_argument("--json", action="store_true", help="print the configuration as one JSON document")


@COMMANDS.subcommand(
    "check-config",
    help="validate the configuration and print it normalised, secrets redacted",
    description=(
        "Read and validate the configuration file. On success print every setting, with defaults "
        "filled in, paths resolved and secrets redacted, then to stderr the dedup's embedder as "
        "dreamer status names it (what provider \"auto\" resolved to, and why), and exit 0. On "
        "failure print one line per problem (file: key: what is wrong) to stderr and exit "
        f"{ExitCode.CONFIG:d}."
    ),
    arguments=_check_config_arguments,
    examples=[
        "dreamer check-config /etc/dreamer/config.toml",
        "dreamer check-config --config /etc/dreamer/config.toml",
        "dreamer check-config --json | jq .profiles",
    ],
)
def _check_config(args: argparse.Namespace) -> int:
    from dreamer.embeddings.factory import check_embeddings, choice_lines

    if args.file is not None:
        args.config = args.file
    try:
        config = load_command_config(args)
        choice = check_embeddings(config, str(config_path(args)), load=True)
    except ConfigError as exc:
        return print_problems(exc)
    data = config.redacted()
    if args.json:
        print(json.dumps(data, indent=2))
    else:
        for key, value in flatten(data):
            print(f"{key} = {json.dumps(value)}")
    # What [embeddings] comes to, as dreamer status says it: on stderr, so stdout stays the settings.
    for line in choice_lines(config, choice):
        print(line, file=sys.stderr)
    return 0


# --- run -------------------------------------------------------------------------------------------


@COMMANDS.subcommand(
    "run",
    help="run the scheduling daemon (what systemd starts)",
    description=(
        "Run the daemon in the foreground: one scheduled job per enabled profile. It talks to "
        "systemd (READY, STATUS, WATCHDOG), reloads its configuration on SIGHUP (keeping the old one "
        "if the new file is invalid), and on SIGTERM lets running jobs finish before it exits. "
        f"An invalid configuration at start exits {ExitCode.CONFIG:d}."
    ),
    examples=[
        "dreamer run --config ./config.toml --log-format console",
        "kill -HUP $(pidof -s dreamer)    # reload the configuration",
    ],
)
def _run(args: argparse.Namespace) -> int:
    from dreamer.service.start import run_daemon

    return run_daemon(config_path(args), log_format=log_format(args), log_level=log_level(args))
