"""Bank policy: what a name means, what may be done with it, the default bank, the read-union, the listing."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from dreamer.config import Config
from dreamer.errors import PolicyError
from dreamer.readside.policy import BankPolicy, render_banks
from tests.support.configs import parsed

BASE: dict[str, Any] = {
    "banks": {
        "global": {"bank_id": "private__hermes", "access": "read_write"},
        "shared": {"bank_id": "shared", "description": "Cross-agent knowledge."},
        "research": {"bank_id": "private__hermes__research", "access": "read_write"},
        "coder": {"bank_id": "private__hermes__coder", "access": "read_write"},
        "ops": {"bank_id": "ops", "description": "Deployment and host quirks."},
        "notes": {"bank_id": "notes", "access": "read_write"},
        "archive": {"bank_id": "archive", "access": "read_write", "enabled": False},
    },
    "profiles": {"research": {"bank": "research"}, "coder": {"bank": "coder"}},
}


def config_with(change: Callable[[dict[str, Any]], None] | None = None) -> Config:
    return parsed(BASE, change)


def allow_raw(data: dict[str, Any]) -> None:
    data.setdefault("topology", {})["allow_raw_bank_ids"] = True


def refusal(policy: BankPolicy, name: str | None, operation: Any) -> str:
    with pytest.raises(PolicyError) as caught:
        policy.resolve(name, operation)
    return str(caught.value)


class TestResolve:
    def test_alias_maps_to_its_bank(self) -> None:
        """An alias resolves to its bank id, budget and description, labelled by the alias."""
        target = BankPolicy(config_with()).resolve("ops", "recall")
        assert (target.alias, target.bank_id, target.raw) == ("ops", "ops", False)
        assert target.description == "Deployment and host quirks."

    def test_unknown_name_lists_the_known_aliases(self) -> None:
        """An invented name is refused with every visible alias listed, in configuration order."""
        message = refusal(BankPolicy(config_with()), "finance", "recall")
        assert message == "unknown bank 'finance' (known: global, shared, research, coder, ops, notes)"

    def test_disabled_bank_is_invisible(self) -> None:
        """A disabled alias is unknown, and absent from the known list and from every operation."""
        policy = BankPolicy(config_with())
        assert refusal(policy, "archive", "recall").startswith("unknown bank 'archive' (known:")
        assert "archive" not in policy.aliases
        assert all("archive" not in policy.aliases_for(op) for op in ("recall", "reflect", "retain"))

    def test_raw_id_refused_when_not_allowed(self) -> None:
        """Without allow_raw_bank_ids a configured bank id is refused, naming its alias."""
        message = refusal(BankPolicy(config_with()), "private__hermes__coder", "recall")
        assert "'private__hermes__coder' is the bank id of 'coder': use the alias" in message
        assert "allow_raw_bank_ids = false" in message

    def test_unconfigured_raw_id_refused_when_not_allowed(self) -> None:
        """Without allow_raw_bank_ids an unconfigured bank id is just an unknown name."""
        assert refusal(BankPolicy(config_with()), "scratch", "recall").startswith("unknown bank 'scratch'")

    def test_raw_id_readable_when_allowed(self) -> None:
        """With allow_raw_bank_ids an unconfigured id is read as itself, read-only."""
        target = BankPolicy(config_with(allow_raw)).resolve("scratch.2024", "reflect")
        assert (target.alias, target.bank_id, target.raw, target.access) == (
            "scratch.2024",
            "scratch.2024",
            True,
            "read_only",
        )

    def test_raw_id_never_writable(self) -> None:
        """Retain into an unconfigured raw id is refused: a model must not create banks."""
        message = refusal(BankPolicy(config_with(allow_raw)), "scratch", "retain")
        assert "raw bank id 'scratch' is read-only" in message
        assert "add it under [banks]" in message

    def test_configured_raw_id_obeys_its_alias_policy(self) -> None:
        """A configured bank's raw id carries its alias and its rules (global stays append-only)."""
        policy = BankPolicy(config_with(allow_raw))
        assert policy.resolve("private__hermes", "recall").alias == "global"
        assert "only through the roll-up" in refusal(policy, "private__hermes", "retain")

    def test_disabled_bank_raw_id_stays_invisible(self) -> None:
        """A disabled bank cannot be reached through its raw id as a configured bank either."""
        target = BankPolicy(config_with(allow_raw)).resolve("archive", "recall")
        assert target.raw and target.access == "read_only"
        assert "read-only" in refusal(BankPolicy(config_with(allow_raw)), "archive", "retain")

    def test_malformed_raw_id_is_unknown(self) -> None:
        """A raw id that is not a valid bank id shape is refused as unknown."""
        assert refusal(BankPolicy(config_with(allow_raw)), "../etc", "recall").startswith("unknown bank")

    def test_resolve_many_drops_repeats_of_one_bank(self) -> None:
        """An alias and its raw id, or an alias twice, address the bank once, first name kept."""
        policy = BankPolicy(config_with(allow_raw))
        targets = policy.resolve_many(["ops", "shared", "ops", "ops"], "recall")
        assert [t.alias for t in targets] == ["ops", "shared"]

    def test_resolve_many_refuses_an_empty_list(self) -> None:
        """Naming no bank at all is refused with the banks to choose from."""
        with pytest.raises(PolicyError, match="no banks named for recall: name one or more of global"):
            BankPolicy(config_with()).resolve_many([], "recall")

    def test_unknown_profile(self) -> None:
        """A policy for an unknown profile is refused with the known profiles."""
        with pytest.raises(PolicyError, match=r"unknown profile 'reserch' \(known: coder, research\)"):
            BankPolicy(config_with(), "reserch")


class TestAccess:
    def test_read_only_bank_is_readable(self) -> None:
        """recall and reflect need read access only, so a read-only bank serves both."""
        policy = BankPolicy(config_with())
        assert policy.resolve("shared", "recall").bank_id == "shared"
        assert policy.resolve("shared", "reflect").bank_id == "shared"

    def test_retain_needs_read_write(self) -> None:
        """Retain into a read-only bank names the setting and the banks that are writable."""
        message = refusal(BankPolicy(config_with()), "ops", "retain")
        assert message.startswith("bank 'ops' is read-only (banks.ops.access = \"read_only\")")
        assert message.endswith("retain to one of research, coder, notes")

    def test_global_bank_is_never_retained_into(self) -> None:
        """The global roll-up bank is append-only through the roll-up, even when read_write."""
        message = refusal(BankPolicy(config_with()), "global", "retain")
        assert "cards arrive there only through the roll-up" in message

    def test_a_custom_upstream_is_a_roll_up_bank_too(self) -> None:
        """A profile's own upstream bank receives roll-up cards, so retain into it is refused."""
        config = config_with(lambda d: d["profiles"]["research"].update(upstream="notes"))
        policy = BankPolicy(config)
        assert "only through the roll-up" in refusal(policy, "notes", "retain")
        assert "notes" not in policy.aliases_for("retain")

    def test_profile_may_not_write_another_profiles_bank(self) -> None:
        """With a profile, another profile's own bank is read-only; without one, it is writable."""
        message = refusal(BankPolicy(config_with(), "research"), "coder", "retain")
        assert "own bank of profile 'coder'" in message
        assert message.endswith("retain to one of research, notes")
        assert BankPolicy(config_with()).resolve("coder", "retain").bank_id == "private__hermes__coder"

    def test_aliases_for_each_operation(self) -> None:
        """Readable: every visible bank; writable: read_write, not roll-up, not another profile's."""
        policy = BankPolicy(config_with(), "research")
        assert policy.aliases_for("recall") == ("global", "shared", "research", "coder", "ops", "notes")
        assert policy.aliases_for("reflect") == policy.aliases_for("recall")
        assert policy.aliases_for("retain") == ("research", "notes")

    def test_nothing_writable_says_so(self) -> None:
        """When no bank is writable the refusal says so instead of listing nothing."""

        def all_read_only(data: dict[str, Any]) -> None:
            for bank in data["banks"].values():
                bank["access"] = "read_only"

        config = config_with(all_read_only)
        assert BankPolicy(config).aliases_for("retain") == ()
        assert refusal(BankPolicy(config), "research", "retain").endswith("no bank is writable here")


class TestDefaultBank:
    def test_topology_default_bank_without_a_profile(self) -> None:
        """Without a name and without a profile, topology.default_bank is used; a profile's own bank
        comes before it."""
        config = config_with(lambda d: d.setdefault("topology", {}).update(default_bank="notes"))
        assert BankPolicy(config).resolve(None, "retain").alias == "notes"
        assert BankPolicy(config, "research").resolve(None, "retain").alias == "research"

    def test_profile_bank_when_no_default(self) -> None:
        """Without topology.default_bank, the profile's own bank is the default."""
        assert BankPolicy(config_with(), "research").resolve(None, "retain").alias == "research"

    def test_no_default_at_all(self) -> None:
        """No name, no default, no profile: refused with the banks to choose from."""
        message = refusal(BankPolicy(config_with()), None, "recall")
        assert message.startswith("no bank named and no default bank for recall: name one of global")
        assert "topology.default_bank" in message

    def test_disabled_default_is_skipped(self) -> None:
        """A disabled default bank is invisible, so the profile's own bank is used instead."""
        config = config_with(lambda d: d.setdefault("topology", {}).update(default_bank="archive"))
        assert BankPolicy(config, "research").default_alias() == "research"

    def test_a_profile_defaults_to_its_own_bank_over_a_roll_up_default(self) -> None:
        """With ``default_bank = "global"`` (the shipped example), a profile's unnamed retain goes to
        its own bank, not to the roll-up bank (which would refuse it); without a profile the
        configured default stays."""
        config = config_with(lambda d: d.setdefault("topology", {}).update(default_bank="global"))
        policy = BankPolicy(config, "research")
        assert policy.default_for("retain") == "research"
        assert policy.resolve(None, "retain").alias == "research"
        assert BankPolicy(config).default_alias() == "global"

    def test_default_refused_for_the_operation(self) -> None:
        """A read-only default serves reads; retain without a name explains the default is read-only."""
        config = config_with(lambda d: d.setdefault("topology", {}).update(default_bank="ops"))
        policy = BankPolicy(config)
        assert policy.resolve(None, "recall").alias == "ops"
        assert policy.default_for("retain") is None
        message = refusal(policy, None, "retain")
        assert message.startswith("no bank named, so the default was used, but bank 'ops' is read-only")


class TestUnionAndListing:
    def test_union_order(self) -> None:
        """A profile reads own bank, upstream, shared, in that order."""
        assert BankPolicy(config_with(), "coder").union_aliases() == ("coder", "global", "shared")

    def test_union_skips_disabled_banks(self) -> None:
        """A disabled bank in a configured read_union is left out."""
        config = config_with(lambda d: d["profiles"]["coder"].update(read_union=["coder", "archive", "ops"]))
        assert BankPolicy(config, "coder").union_aliases() == ("coder", "ops")

    def test_union_needs_a_profile(self) -> None:
        """A read-union without a profile is refused with what to do."""
        with pytest.raises(PolicyError, match="a read-union needs a profile"):
            BankPolicy(config_with()).union_aliases()

    def test_describe_marks_roles_and_refusals(self) -> None:
        """The listing shows roles, and why a bank is not writable; disabled banks only on request."""
        infos = {i.alias: i for i in BankPolicy(config_with(), "research").describe()}
        assert "archive" not in infos
        assert infos["global"].roles == ("global",) and not infos["global"].writable
        assert infos["research"].roles == ("bank of research",) and infos["research"].writable
        assert infos["ops"].retain_refusal is not None and "read-only" in infos["ops"].retain_refusal
        every = BankPolicy(config_with()).describe(include_disabled=True)
        assert [i.alias for i in every][-1] == "archive" and not every[-1].enabled

    def test_render_banks_table(self) -> None:
        """The bank table has one line per bank, with what may be done and the description."""
        table = render_banks(BankPolicy(config_with(), "research").describe(include_disabled=True))
        lines = table.splitlines()
        assert lines[0].split() == ["ALIAS", "BANK", "ID", "ACCESS", "USE", "ROLES", "DESCRIPTION"]
        research = next(line for line in lines if line.startswith("research "))
        assert "read, retain" in research
        assert next(line for line in lines if line.startswith("ops ")).endswith("Deployment and host quirks.")
        assert "disabled" in next(line for line in lines if line.startswith("archive "))

    def test_summary_falls_back_to_the_role(self) -> None:
        """A bank without a description is summarised by its role."""
        policy = BankPolicy(config_with())
        assert policy.summary("ops") == "Deployment and host quirks."
        assert policy.summary("coder") == "own bank of profile coder"
        assert policy.summary("global").startswith("global roll-up")
