"""The checks that span tables of the configuration: every alias a table names is a bank defined
under ``[banks]``, no bank id is used twice, a profile's own bank is neither its upstream nor the
shared bank.

A single table cannot see the others, so these run once the whole file is read (as
:class:`~dreamer.config.Config`'s validator) and return every problem together: an operator fixes
a file in one pass instead of one error per check-config run.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dreamer.config.models import Config

__all__ = ["cross_reference_problems"]


def cross_reference_problems(cfg: Config) -> list[tuple[str, str]]:
    """Every cross-table problem of ``cfg`` as (key path, message), topology and banks first, then
    the audit and the profiles; empty when there is none."""
    problems: list[tuple[str, str]] = []
    known = sorted(cfg.banks)
    known_text = ", ".join(known) if known else "none defined under [banks]"

    def check_alias(key: str, alias: str | None) -> None:
        if alias is not None and alias not in cfg.banks:
            problems.append((key, f"unknown bank alias {alias!r} (known: {known_text})"))

    if cfg.banks or cfg.profiles:  # an audit-only install needs no banks at all
        check_alias("topology.global", cfg.topology.global_bank)
        check_alias("topology.shared", cfg.topology.shared)
        check_alias("topology.default_bank", cfg.topology.default_bank)
    seen: dict[str, str] = {}
    for alias, bank in cfg.banks.items():
        if bank.bank_id in seen:
            problems.append(
                (
                    f"banks.{alias}.bank_id",
                    f"bank id {bank.bank_id!r} is already used by banks.{seen[bank.bank_id]}; "
                    "each bank id may appear once",
                )
            )
        seen.setdefault(bank.bank_id, alias)
    check_alias("audit.compress_bank", cfg.audit.compress_bank)
    for name, profile in cfg.profiles.items():
        check_alias(f"profiles.{name}.bank", profile.bank)
        check_alias(f"profiles.{name}.upstream", profile.upstream)
        for i, alias in enumerate(profile.read_union or ()):
            check_alias(f"profiles.{name}.read_union[{i}]", alias)
        upstream = profile.upstream or cfg.topology.global_bank
        if profile.bank == upstream:
            problems.append(
                (
                    f"profiles.{name}.upstream",
                    f"the profile's own bank {profile.bank!r} cannot also be its upstream bank",
                )
            )
        if profile.bank == cfg.topology.shared:
            problems.append((f"profiles.{name}.bank", "the shared bank cannot be a profile bank"))
    return problems
