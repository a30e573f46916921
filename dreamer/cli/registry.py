"""What a subcommand is and how a module declares its subcommands.

A module of subcommands makes one :class:`CommandGroup` and decorates a handler per command::

    COMMANDS = CommandGroup()

    def _status_arguments(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--json", action="store_true", help="print the status as JSON")

    @COMMANDS.subcommand("status", help="what ran, what happened, what is next", arguments=_status_arguments)
    def _status(args: argparse.Namespace) -> int:
        from dreamer.commands.status import status_command  # heavy imports stay inside the command

        return run_async(args, lambda config: status_command(config, as_json=args.json))

The handler gets the parsed arguments and returns the exit status (:mod:`dreamer.cli.base` has
the helpers). :func:`dreamer.cli.build_parser` lists the groups, and so the order of ``--help``.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

Handler = Callable[[argparse.Namespace], int]
ArgumentAdder = Callable[[argparse.ArgumentParser], None]


@dataclass(frozen=True, slots=True)
class Subcommand:
    name: str
    help: str
    description: str
    handler: Handler
    arguments: ArgumentAdder | None = None
    examples: tuple[str, ...] = ()


class CommandGroup:
    """The subcommands one module defines, in the order it defines them."""

    def __init__(self) -> None:
        self._commands: list[Subcommand] = []

    def __iter__(self) -> Iterator[Subcommand]:
        return iter(self._commands)

    def subcommand(
        self,
        name: str,
        *,
        help: str,
        description: str = "",
        arguments: ArgumentAdder | None = None,
        examples: Sequence[str] = (),
    ) -> Callable[[Handler], Handler]:
        """Register ``handler`` as ``dreamer NAME``. ``description`` defaults to ``help``."""

        def register(handler: Handler) -> Handler:
            self._commands.append(
                Subcommand(
                    name=name,
                    help=help,
                    description=description or help,
                    handler=handler,
                    arguments=arguments,
                    examples=tuple(examples),
                )
            )
            return handler

        return register


def in_order(*groups: CommandGroup) -> list[Subcommand]:
    """Every subcommand of ``groups``, group by group; a name registered twice is an error."""
    commands: dict[str, Subcommand] = {}
    for group in groups:
        for command in group:
            if command.name in commands:
                raise ValueError(f"subcommand {command.name!r} is registered twice")
            commands[command.name] = command
    return list(commands.values())
