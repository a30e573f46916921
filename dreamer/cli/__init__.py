"""The ``dreamer`` command: one entry point, one subcommand per task.

The subcommands live in one module per group, named as the module of :mod:`dreamer.commands` that
does the work (``cli/status.py`` parses what ``commands/status.py`` does): :mod:`~dreamer.cli.rollup`,
:mod:`~dreamer.cli.status`, :mod:`~dreamer.cli.explain`, :mod:`~dreamer.cli.demo`,
:mod:`~dreamer.cli.banks`, :mod:`~dreamer.cli.card`, :mod:`~dreamer.cli.audit`,
:mod:`~dreamer.cli.hermes`, :mod:`~dreamer.cli.state`; :mod:`~dreamer.cli.service` parses ``run``
and ``check-config``, whose work is the daemon's (:mod:`dreamer.service`) and the configuration's.
:mod:`~dreamer.cli.registry` says how to add one.
Their handlers import the modules doing the work inside the function, so ``dreamer --help`` and
``dreamer run`` load neither the roll-up pipeline nor a backend.
"""

from __future__ import annotations

import argparse
import os
import sys
import textwrap
from collections.abc import Sequence

import structlog

from dreamer import __version__
from dreamer.cli import audit, banks, card, demo, explain, hermes, rollup, service, state, status
from dreamer.cli.base import add_global_options, log_format, log_level
from dreamer.cli.registry import Handler, in_order
from dreamer.embeddings.threads import pin_blas_threads
from dreamer.errors import ExitCode
from dreamer.log import configure_logging
from dreamer.sqlitestats import stop_memory_statistics

__all__ = ["build_parser", "main"]

# The order of the commands in `dreamer --help`.
_GROUPS = (
    service.COMMANDS,
    rollup.COMMANDS,
    status.COMMANDS,
    explain.COMMANDS,
    demo.COMMANDS,
    banks.COMMANDS,
    card.COMMANDS,
    audit.COMMANDS,
    hermes.COMMANDS,
    state.COMMANDS,
)

_DESCRIPTION = """\
Dreamer consolidates agent memory: on a schedule it rolls up what is new in each profile's memory
bank into one global bank, as deduplicated summary cards with provenance, append-only.
"""

_EPILOG_HEAD = """\
examples:
  dreamer check-config                 validate the configuration file
  dreamer demo                         see a roll-up on a throwaway embedded store
  dreamer run --log-format console     run the daemon in the foreground, readable logs
  dreamer rollup --dry-run             what the next roll-up would promote, and why
  dreamer status                       watermarks, last runs, pending units
  dreamer COMMAND --help               options and examples of one command

configuration: --config, else $DREAMER_CONFIG, else $CONFIGURATION_DIRECTORY/config.toml,
else /etc/dreamer/config.toml. Exit status 78 means the configuration is wrong.
"""


_HELP_WIDTH = 100


def build_parser() -> argparse.ArgumentParser:
    """The ``dreamer`` parser with every subcommand, in the order of ``_GROUPS``."""
    parser = argparse.ArgumentParser(
        prog="dreamer",
        description=_DESCRIPTION,
        epilog=_EPILOG_HEAD,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"dreamer {__version__}")
    add_global_options(parser, top_level=True)
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", title="commands")
    for command in in_order(*_GROUPS):
        epilog = None
        if command.examples:
            epilog = "examples:\n" + "\n".join(f"  {line}" for line in command.examples)
        sub = subparsers.add_parser(
            command.name,
            help=command.help,
            description=textwrap.fill(command.description, width=_HELP_WIDTH),
            epilog=epilog,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        if command.arguments is not None:
            command.arguments(sub)
        add_global_options(sub, top_level=False)
        sub.set_defaults(handler=command.handler)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``dreamer`` console script and ``python -m dreamer``."""
    parser = build_parser()
    args, extras = parser.parse_known_args(argv)
    if extras:
        # argparse fills an optional positional only from the first run of positionals, so in
        # `memory add --agent A TEXT` the text would be "unrecognized": a command names such a
        # positional (``late_positional``) and a single leftover word fills it wherever it stood.
        # After "--" the word is text even when it starts with a dash (`memory add -- "-5 C offset"`).
        late = getattr(args, "late_positional", None)
        words = extras[1:] if extras[0] == "--" else extras
        literal = words is not extras
        fits = len(words) == 1 and (literal or not words[0].startswith("-"))
        if late and getattr(args, late) is None and fits:
            setattr(args, late, words[0])
        else:
            parser.error("unrecognized arguments: " + " ".join(extras))
    handler: Handler | None = getattr(args, "handler", None)
    if handler is None:
        parser.print_help(sys.stderr)
        return 2
    # Before numpy is imported (at the first run or embedding): one BLAS thread unless set.
    pin_blas_threads()
    # Commands log to stderr so their stdout stays clean output; the daemon moves its logs to stdout.
    configure_logging(log_format=log_format(args), level=log_level(args) or "info", stream=sys.stderr)
    # Before the first connection: two connections in two threads read at once (dreamer.sqlitestats).
    structlog.get_logger("dreamer").debug("SQLite's memory statistics", statistics=stop_memory_statistics())
    try:
        return handler(args)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # `dreamer check-config | head`: the reader left; stop quietly, as other tools do.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141
    except OSError as exc:
        # The last resort for a path no command checked (a name too long, a loop of links, a
        # vanished disk): one line naming the path and the reason, not a traceback.
        where = f"{exc.filename}: " if exc.filename else ""
        print(
            f"dreamer {args.command}: {where}{exc.strerror or exc}; check the path and run again",
            file=sys.stderr,
        )
        return ExitCode.FAILED
