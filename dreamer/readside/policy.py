"""Which banks a profile may use, and how: the access policy of the read side.

:class:`BankPolicy` turns the configuration (and optionally the profile asking) into answers: which
bank a name means, whether an operation may address it, what the default bank and the read-union
are, and what a listing shows. It is pure: no backend, no I/O. Every refusal is a
:class:`~dreamer.errors.PolicyError` whose message says what to do instead.

The router enforces it; the tool schemas and the prelude are generated from it, so they never offer
what the router would refuse. Why roll-up banks are read-only and how raw bank ids are treated:
``docs/design/readside.md``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from dreamer.backends.base import Budget
from dreamer.config import Access, Config
from dreamer.errors import PolicyError
from dreamer.threats import withhold_lines

__all__ = [
    "OPERATIONS",
    "BankInfo",
    "BankPolicy",
    "BankTarget",
    "Operation",
    "render_banks",
]

Operation = Literal["recall", "reflect", "retain"]
OPERATIONS: tuple[Operation, ...] = ("recall", "reflect", "retain")

#: Recall budget of a raw bank id, which has no configuration of its own.
RAW_BANK_BUDGET: Budget = "mid"


@dataclass(frozen=True, slots=True)
class BankTarget:
    """A bank an operation was allowed to address. ``alias`` is the label results carry.

    For a raw bank id (``raw=True``) the alias is the bank id itself.
    """

    alias: str
    bank_id: str
    access: Access
    budget: Budget
    description: str = ""
    raw: bool = False


@dataclass(frozen=True, slots=True)
class BankInfo:
    """One configured bank as a listing shows it, with what the asking profile may do with it."""

    alias: str
    bank_id: str
    description: str
    access: Access
    budget: Budget
    enabled: bool
    roles: tuple[str, ...]
    readable: bool
    writable: bool
    retain_refusal: str | None

    def to_json(self) -> dict[str, Any]:
        return {
            "alias": self.alias,
            "bank_id": self.bank_id,
            "description": self.description,
            "access": self.access,
            "budget": self.budget,
            "enabled": self.enabled,
            "roles": list(self.roles),
            "readable": self.readable,
            "writable": self.writable,
            "retain_refusal": self.retain_refusal,
        }


class BankPolicy:
    """What a name means and what may be done with it, for one configuration and one profile.

    ::

        policy = BankPolicy(config, profile="research")
        policy.resolve("ops", "recall").bank_id    # the bank id of alias "ops"
        policy.resolve("global", "retain")         # PolicyError: ... a roll-up bank ...
        policy.aliases_for("retain")               # what a tool schema offers for retain
    """

    def __init__(self, config: Config, profile: str | None = None) -> None:
        if profile is not None and profile not in config.profiles:
            known = ", ".join(sorted(config.profiles)) or "none defined under [profiles]"
            raise PolicyError(f"unknown profile {profile!r} (known: {known})")
        self.config = config
        self.profile = profile
        self._visible = {alias: bank for alias, bank in config.banks.items() if bank.enabled}
        self._by_bank_id = {bank.bank_id: alias for alias, bank in self._visible.items()}
        # Every bank the roll-up appends to: the global bank and each profile's upstream.
        self._rollup_banks = frozenset(
            [config.topology.global_bank, *(config.upstream_alias(name) for name in config.profiles)]
        )

    # --- views ---------------------------------------------------------------------------

    @property
    def aliases(self) -> tuple[str, ...]:
        """Every visible (enabled) alias, in configuration order."""
        return tuple(self._visible)

    def aliases_for(self, operation: Operation) -> tuple[str, ...]:
        """The visible aliases ``operation`` may address, in configuration order."""
        return tuple(a for a in self._visible if self._refusal(a, operation) is None)

    def default_alias(self) -> str | None:
        """The bank used when none is named: the profile's own bank when acting as a profile, else
        ``topology.default_bank``. A profile's default is its own bank even where the configuration
        names a roll-up bank (``global``) as ``default_bank``: turns and facts an agent stores
        without naming a bank belong where the roll-up reads them."""
        candidates: list[str | None] = []
        if self.profile is not None:
            candidates.append(self.config.profiles[self.profile].bank)
        candidates.append(self.config.topology.default_bank)
        return next((a for a in candidates if a is not None and a in self._visible), None)

    def default_for(self, operation: Operation) -> str | None:
        """The default bank if ``operation`` may use it, else None (the caller must name a bank)."""
        alias = self.default_alias()
        return alias if alias is not None and self._refusal(alias, operation) is None else None

    def no_default_reason(self, operation: Operation) -> str:
        """Why ``operation`` without a bank name would be refused ("" when a default serves it)."""
        try:
            self.resolve(None, operation)
        except PolicyError as exc:
            return str(exc)
        return ""

    def union_aliases(self) -> tuple[str, ...]:
        """The profile's read-union (own bank, upstream, shared, or as configured), visible ones only."""
        if self.profile is None:
            raise PolicyError(
                "a read-union needs a profile: pass one (e.g. --profile NAME) or name the banks to read"
            )
        return tuple(a for a in self.config.read_union(self.profile) if a in self._visible)

    def roles(self, alias: str) -> tuple[str, ...]:
        """What part ``alias`` plays in the topology: global, shared, upstream/bank of profiles."""
        topology = self.config.topology
        roles: list[str] = []
        if alias == topology.global_bank:
            roles.append("global")
        if alias == topology.shared:
            roles.append("shared")
        if alias == topology.default_bank:
            roles.append("default")
        for name, profile in self.config.profiles.items():
            if profile.bank == alias:
                roles.append(f"bank of {name}")
        for name in self.config.profiles:
            if alias != topology.global_bank and self.config.upstream_alias(name) == alias:
                roles.append(f"upstream of {name}")
        return tuple(roles)

    def description(self, alias: str) -> str:
        """The bank's configured description on one line, as the model may be shown it (tool
        schemas, prompts): control characters escaped, withheld when it reads like an instruction
        to the agent; "" when it has none."""
        return withhold_lines(" ".join(self.config.banks[alias].description.split()))[0]

    def summary(self, alias: str) -> str:
        """What a bank is for: its configured description (:meth:`description`), else a phrase for
        its role."""
        description = self.description(alias)
        if description:
            return description
        topology = self.config.topology
        phrases: list[str] = []
        if alias == topology.global_bank:
            phrases.append("global roll-up: durable facts consolidated from every profile's bank")
        if alias == topology.shared:
            phrases.append("shared by all agents")
        for name, profile in self.config.profiles.items():
            if profile.bank == alias:
                phrases.append(f"own bank of profile {name}")
        for name in self.config.profiles:
            if alias != topology.global_bank and self.config.upstream_alias(name) == alias:
                phrases.append(f"roll-up bank of profile {name}")
        return "; ".join(phrases) or "no description"

    def describe(self, *, include_disabled: bool = False) -> tuple[BankInfo, ...]:
        """Every bank (visible ones, or all), with roles and what this profile may do with it."""
        infos: list[BankInfo] = []
        for alias, bank in self.config.banks.items():
            if not bank.enabled and not include_disabled:
                continue
            refusal = self._refusal(alias, "retain") if bank.enabled else "the bank is disabled"
            infos.append(
                BankInfo(
                    alias=alias,
                    bank_id=bank.bank_id,
                    description=bank.description,
                    access=bank.access,
                    budget=bank.budget,
                    enabled=bank.enabled,
                    roles=self.roles(alias),
                    readable=bank.enabled,
                    writable=refusal is None,
                    retain_refusal=refusal,
                )
            )
        return tuple(infos)

    # --- resolution ----------------------------------------------------------------------

    def resolve(self, name: str | None, operation: Operation) -> BankTarget:
        """The bank ``name`` means for ``operation`` (the default bank when None), or PolicyError."""
        if name is None:
            alias = self.default_alias()
            if alias is None:
                raise PolicyError(
                    f"no bank named and no default bank for {operation}: name one of "
                    f"{self._list(self.aliases_for(operation))} "
                    "(or set topology.default_bank)"
                )
            refusal = self._refusal(alias, operation)
            if refusal is not None:
                raise PolicyError(f"no bank named, so the default was used, but {refusal}")
            name = alias
        if name in self._visible:
            refusal = self._refusal(name, operation)
            if refusal is not None:
                raise PolicyError(refusal)
            bank = self._visible[name]
            return BankTarget(name, bank.bank_id, bank.access, bank.budget, bank.description)
        if name in self._by_bank_id:
            alias = self._by_bank_id[name]
            if not self.config.topology.allow_raw_bank_ids:
                raise PolicyError(
                    f"{name!r} is the bank id of {alias!r}: use the alias "
                    "(raw bank ids are not accepted: topology.allow_raw_bank_ids = false)"
                )
            # The raw id of a configured bank obeys that bank's policy and carries its alias.
            return self.resolve(alias, operation)
        if self.config.topology.allow_raw_bank_ids and self._is_raw_candidate(name):
            if operation == "retain":
                raise PolicyError(
                    f"raw bank id {name!r} is read-only: retain needs a configured bank with "
                    f'access = "read_write"; add it under [banks] or retain to one of '
                    f"{self._list(self.aliases_for('retain'))}"
                )
            return BankTarget(name, name, "read_only", RAW_BANK_BUDGET, raw=True)
        raise PolicyError(f"unknown bank {name!r} (known: {self._list(self.aliases)})")

    def resolve_many(self, names: Sequence[str | None], operation: Operation) -> tuple[BankTarget, ...]:
        """Resolve every name (all refusals before anything is sent), dropping repeats of a bank."""
        if not names:
            raise PolicyError(
                f"no banks named for {operation}: name one or more of "
                f"{self._list(self.aliases_for(operation))}"
            )
        targets: dict[str, BankTarget] = {}
        for name in names:
            target = self.resolve(name, operation)
            targets.setdefault(target.bank_id, target)
        return tuple(targets.values())

    # --- internals -----------------------------------------------------------------------

    def _retain_block(self, alias: str) -> str | None:
        """Why nothing may be retained into the visible bank ``alias``, or None when it may."""
        bank = self._visible[alias]
        if alias in self._rollup_banks:
            return (
                f"bank {alias!r} is a roll-up bank: cards arrive there only through the roll-up, "
                "never by retain"
            )
        if bank.access != "read_write":
            return f'bank {alias!r} is read-only (banks.{alias}.access = "{bank.access}")'
        if self.profile is not None:
            own = self.config.profiles[self.profile].bank
            owners = sorted(name for name, p in self.config.profiles.items() if p.bank == alias)
            if owners and alias != own:
                return (
                    f"bank {alias!r} is the own bank of profile {owners[0]!r}, written only by that profile"
                )
        return None

    def _refusal(self, alias: str, operation: Operation) -> str | None:
        """Why ``operation`` may not address the visible bank ``alias`` (with what to do instead)."""
        if operation != "retain":
            return None
        block = self._retain_block(alias)
        if block is None:
            return None
        writable = [a for a in self._visible if self._retain_block(a) is None]
        instead = f"retain to one of {self._list(writable)}" if writable else "no bank is writable here"
        return f"{block}; {instead}"

    @staticmethod
    def _is_raw_candidate(name: str) -> bool:
        # The same shape config.BankId accepts; anything else would be refused by the backend anyway.
        return (
            0 < len(name) <= 128
            and name[0].isascii()
            and name[0].isalnum()
            and all(c.isascii() and (c.isalnum() or c in "_.:-") for c in name)
        )

    @staticmethod
    def _list(aliases: Sequence[str]) -> str:
        return ", ".join(aliases) if aliases else "none"


def render_banks(infos: Sequence[BankInfo]) -> str:
    """A plain-text table of banks: alias, bank id, access, what may be done, roles, description."""
    rows = [("ALIAS", "BANK ID", "ACCESS", "USE", "ROLES", "DESCRIPTION")]
    for info in infos:
        use = "disabled" if not info.enabled else ("read, retain" if info.writable else "read")
        rows.append(
            (info.alias, info.bank_id, info.access, use, ", ".join(info.roles) or "-", info.description)
        )
    widths = [max(len(row[i]) for row in rows) for i in range(5)]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(row[:5], widths, strict=True)) + "  " + row[5]
        for row in rows
    ]
    return "\n".join(line.rstrip() for line in lines)
