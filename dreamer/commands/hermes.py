"""The body of ``dreamer hermes install``: the provider's plugin directory in a Hermes home, checked
against the settings it will read."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TextIO

from dreamer.errors import ExitCode
from dreamer.hermes_provider.entry_point import ENTRY_POINT_GROUP
from dreamer.hermes_provider.install import (
    DEFAULT_NAME,
    configured_provider,
    default_hermes_home,
    env_file_sets,
    hermes_command,
    install_plugin,
    uninstall_plugin,
)
from dreamer.hermes_provider.settings import load_settings
from dreamer.readside.policy import BankPolicy

#: What `hermes plugins list` shows for the provider, and why that is not a fault (Hermes 0.19.0).
PLUGINS_LIST_NOTE = (
    '`hermes plugins list` shows {name} as "not enabled" even while it is active: that column is '
    "plugins.enabled, which Hermes' general plugins need and memory providers do not use "
    "(memory.provider alone loads one; `hermes plugins enable` or `disable` change only that column)"
)


def hermes_install_command(
    *,
    home: Path | None,
    name: str = DEFAULT_NAME,
    uninstall: bool = False,
    config_path: Path | None = None,
    profile: str | None = None,
    out: TextIO = sys.stdout,
) -> int:
    """Install (or uninstall) the plugin. The settings it will read are validated first, so a broken
    ``hindsight/config.json`` or TOML is reported (ConfigError) and nothing is written."""
    hermes_home = home if home is not None else default_hermes_home()
    config_yaml = hermes_home / "config.yaml"
    if uninstall:
        out.write(uninstall_plugin(hermes_home, name=name).render() + "\n")
        if configured_provider(hermes_home) == name:
            later = (
                ", and later releases still load the pip-installed Dreamer through its entry point"
                if name == DEFAULT_NAME and _entry_point_installed()
                else ""
            )
            reset = hermes_command(hermes_home, "config", "set", "memory.provider", "")
            out.write(
                f"next: {config_yaml} still sets memory.provider: {name}, so Hermes 0.19.0 reports a "
                f"missing provider{later}; for Hermes' built-in memory only, run\n  {reset}\n"
                "(or name another provider there)\n"
            )
        return ExitCode.OK
    settings = load_settings(hermes_home=hermes_home, config_path=config_path, profile=profile)
    report = install_plugin(hermes_home, name=name, config_path=config_path, profile=profile)
    policy = BankPolicy(settings.config, settings.profile)
    who = f"profile {settings.profile}" if settings.profile else "no profile"
    out.write(report.render() + "\n")
    out.write(f"settings: {settings.source} ({who}; banks: {', '.join(policy.aliases) or 'none'})\n")
    if settings.auto_retain and policy.default_for("retain") is None:
        out.write(
            "warning: conversation turns will not be stored: no bank takes a retain without a name "
            f"({policy.no_default_reason('retain')})\n"
        )
    if settings.no_server is not None and not env_file_sets(
        hermes_home, ("HINDSIGHT_API_KEY", "HINDSIGHT_API_URL")
    ):
        out.write(f"warning: Hermes will find the provider unavailable: {settings.no_server}\n")
    if configured_provider(hermes_home) == name:
        out.write(f"memory.provider is already {name} in {config_yaml}\n")
    else:
        out.write(
            f"next: in {config_yaml} set\n  memory:\n    provider: {name}\n"
            f"or run\n  {hermes_command(hermes_home, 'config', 'set', 'memory.provider', name)}\n"
        )
    status = hermes_command(hermes_home, "memory", "status")
    out.write(f"check: {status}  (shows Provider: {name} and Status: available)\n")
    out.write(f"note: {PLUGINS_LIST_NOTE.format(name=name)}\n")
    out.write("(Hermes must run with a Python that can import dreamer)\n")
    return ExitCode.OK


def _entry_point_installed() -> bool:
    """Whether this Dreamer's metadata carries the entry point Hermes after 0.19.0 loads it from."""
    from importlib.metadata import entry_points

    return any(ep.name == DEFAULT_NAME for ep in entry_points().select(group=ENTRY_POINT_GROUP))
