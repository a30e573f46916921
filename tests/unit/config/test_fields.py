"""``audit.verify_hosts`` entries: names, addresses and ports as written, anything else refused with
the key, the entry and the fix."""

from __future__ import annotations

from typing import Any

import pytest

from dreamer.config import parse_config
from dreamer.errors import ConfigError
from tests.support.configs import config_data


def config_problems(hosts: Any) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        parse_config(config_data(audit={"verify_hosts": hosts}), source="config.toml", environ={})
    return caught.value.problems


class TestConfig:
    def test_listed_hosts_load(self) -> None:
        """Names, addresses, ports and bracketed IPv6 addresses are accepted as written."""
        hosts = ["nas01.lan", "127.0.0.1:8080", "[::1]:9000", "grafana.lan."]
        config = parse_config(config_data(audit={"verify_hosts": hosts}), source="config.toml", environ={})
        assert config.audit.verify_hosts == tuple(hosts)

    def test_the_default_is_none(self) -> None:
        """No [audit] key: no host."""
        assert parse_config(config_data(), source="config.toml", environ={}).audit.verify_hosts == ()

    @pytest.mark.parametrize(
        ("entry", "why"),
        [
            ("http://nas01.lan/health", "is a URL, not a host"),
            ("*.lan", "has a wildcard; list each host"),
            ("nas01.lan:0", "has a port outside 1-65535"),
            ("nas01.lan:70000", "has a port outside 1-65535"),
            ("::1", "is not a host name or address"),
            ("[::g]", "is not a host name or address"),
            ("a..b", "is not a host name or address"),
            ("", "is not a host name or address"),
        ],
    )
    def test_a_bad_entry_names_the_key_the_entry_and_the_fix(self, entry: str, why: str) -> None:
        """config.toml: audit.verify_hosts: entry 2: '<entry>' <why> (e.g. ...)."""
        (line,) = config_problems(["nas01.lan", entry])
        assert line.startswith(f"config.toml: audit.verify_hosts: entry 2: {entry!r} ")
        assert why in line

    def test_a_string_instead_of_a_list_is_refused(self) -> None:
        """verify_hosts = "nas01.lan" (not a list) names the key."""
        (line,) = config_problems("nas01.lan")
        assert line.startswith("config.toml: audit.verify_hosts: ")
