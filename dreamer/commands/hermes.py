"""The body of ``dreamer hermes install``: the provider's plugin directory in a Hermes home, checked
against the settings it will read."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TextIO

from dreamer.errors import ExitCode
from dreamer.hermes_provider.install import (
    DEFAULT_NAME,
    configured_provider,
    default_hermes_home,
    install_plugin,
    uninstall_plugin,
)
from dreamer.hermes_provider.settings import load_settings
from dreamer.readside.policy import BankPolicy


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
            out.write(
                f"next: {config_yaml} still sets memory.provider: {name}, so Hermes will report a "
                f"missing provider; run `hermes config set memory.provider ''` (Hermes' built-in "
                "memory only) or name another provider there\n"
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
    if configured_provider(hermes_home) == name:
        out.write(f"memory.provider is already {name} in {config_yaml}\n")
    else:
        out.write(f"next: in {config_yaml} set\n  memory:\n    provider: {name}\n")
    out.write("(Hermes must run with a Python that can import dreamer)\n")
    return ExitCode.OK
