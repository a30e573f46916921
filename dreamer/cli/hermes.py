"""The subcommands that connect Dreamer to Hermes agents: ``hermes install`` puts the memory
provider into a Hermes home."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from dreamer.cli.base import config_path, print_problems, report_error
from dreamer.cli.registry import CommandGroup
from dreamer.errors import ConfigError, DreamerError

COMMANDS = CommandGroup()


def _hermes_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=["install"])
    parser.add_argument(
        "--home", type=Path, metavar="DIR", help="the Hermes home (default: $HERMES_HOME, else ~/.hermes)"
    )
    parser.add_argument(
        "--uninstall", action="store_true", help="remove what the install wrote, nothing else"
    )
    parser.add_argument(
        "--name", default="dreamer", help="the plugin's name, for memory.provider (default: dreamer)"
    )
    parser.add_argument(
        "--use-config",
        action="store_true",
        help="make the provider read the Dreamer configuration (--config) instead of Hermes' "
        "hindsight/config.json",
    )
    parser.add_argument(
        "--profile", metavar="P", help="with --use-config: the Dreamer profile the agent acts as"
    )


@COMMANDS.subcommand(
    "hermes",
    help="install Dreamer as a Hermes memory provider",
    description=(
        "Write a plugin directory into $HERMES_HOME/plugins/NAME/ that loads Dreamer's memory provider: "
        "the hindsight_retain / hindsight_recall / hindsight_reflect tools over named banks, with the "
        "bank policy, labelled multi-bank recall, the prelude and the peer card. It reads Hermes' "
        "hindsight/config.json (banks, bank_id, read_banks, write_banks), or the Dreamer configuration "
        "with --use-config. Running it again changes nothing; --uninstall removes only what it wrote. "
        "Hermes releases after 0.19.0 also find a pip-installed Dreamer without it, through the "
        "hermes_agent.memory_providers entry point."
    ),
    arguments=_hermes_arguments,
    examples=[
        "dreamer hermes install",
        "dreamer hermes install --home ~/.hermes/profiles/coder --use-config --profile coder",
        "dreamer hermes install --uninstall",
    ],
)
def _hermes(args: argparse.Namespace) -> int:
    from dreamer.commands.hermes import hermes_install_command

    if args.profile and not args.use_config:
        print(
            "dreamer hermes: --profile needs --use-config (Hermes' config.json has no profiles)",
            file=sys.stderr,
        )
        return 2
    try:
        return hermes_install_command(
            home=args.home.expanduser() if args.home else None,
            name=args.name,
            uninstall=args.uninstall,
            config_path=config_path(args) if args.use_config else None,
            profile=args.profile,
        )
    except ConfigError as exc:
        return print_problems(exc)
    except DreamerError as exc:
        return report_error(args, exc)
