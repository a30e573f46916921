"""The audit's host allow-list: which URL from memory text may be checked, and the one request sent
for it (pure; the requests themselves are tested in ``test_hermes_audit_urls.py``)."""

from __future__ import annotations

from typing import Any

import pytest

from dreamer.config import parse_config
from dreamer.errors import ConfigError
from dreamer.hermes.audit.hosts import HostAllowList
from dreamer.hermes.audit.settings import AuditSettings, InvalidAuditSettingsError
from tests.support.configs import config_data

LISTED = HostAllowList.parse(["127.0.0.1:8080", "NAS01.lan.", "[::1]"])


class TestRequestUrl:
    @pytest.mark.parametrize(
        ("url", "sent"),
        [
            ("http://127.0.0.1:8080/api/v1/users/7/delete?confirm=yes#top", "http://127.0.0.1:8080/"),
            ("http://127.0.0.1:8080", "http://127.0.0.1:8080/"),
            ("http://admin:hunter2@nas01.lan/status?token=abc", "http://nas01.lan/"),
            ("https://NAS01.LAN:8443/x%3Fy?z", "https://nas01.lan:8443/"),
            ("http://nas01.lan./dot", "http://nas01.lan./"),
            ("http://[0:0::1]:9000/six?q", "http://[0:0::1]:9000/"),
        ],
    )
    def test_a_listed_host_gets_its_root_only(self, url: str, sent: str) -> None:
        """Only scheme, host and port survive: no path (HEAD /users/7/delete could act on a server
        that answers HEAD with its GET handler), query string, fragment or user part."""
        assert LISTED.request_url(url) == sent

    @pytest.mark.parametrize(
        "url",
        [
            "http://127.0.0.1:8081/other-port",
            "http://127.0.0.1/default-port",
            "http://localhost:8080/another-name",
            "http://2130706433:8080/decimal",
            "http://nas01.lan@evil.example/userinfo-is-not-the-host",
            "http://nas01.lan.evil.example/suffix",
            "http://sub.nas01.lan/subdomain",
            "ftp://nas01.lan/scheme",
            "http:///no-host",
            "http://[::1/broken",
        ],
    )
    def test_any_other_url_is_not_checked(self, url: str) -> None:
        """Another port, another spelling, a user part naming a listed host, a subdomain, another
        scheme or a broken URL: None, so nothing is sent."""
        assert LISTED.request_url(url) is None

    def test_the_host_httpx_reads_is_the_host_checked(self) -> None:
        """A backslash before '@' is part of the user for httpx: the request goes to the host after
        it, which is the host the list was asked about."""
        assert LISTED.request_url("http://evil.example\\@nas01.lan/x") == "http://nas01.lan/"
        assert HostAllowList.parse(["evil.example"]).request_url("http://evil.example\\@nas01.lan/x") is None

    def test_the_empty_list_checks_nothing(self) -> None:
        """The default: not one URL has a request."""
        assert not HostAllowList()
        assert HostAllowList().request_url("http://127.0.0.1:8080/x") is None


class TestSettings:
    def test_default_sends_no_request(self) -> None:
        """AuditSettings() lists no host, so `checks_urls` is false."""
        assert AuditSettings().verify_hosts == () and not AuditSettings().checks_urls

    def test_a_dry_run_checks_only_when_asked(self) -> None:
        """A listed host and a dry run: no checks unless verify_urls."""
        assert not AuditSettings(verify_hosts=("nas01.lan",), dry_run=True).checks_urls
        assert AuditSettings(verify_hosts=("nas01.lan",), dry_run=True, verify_urls=True).checks_urls
        assert AuditSettings(verify_hosts=("nas01.lan",)).checks_urls

    def test_a_malformed_host_is_refused(self) -> None:
        """A URL given as a host names the setting and what to give instead."""
        with pytest.raises(InvalidAuditSettingsError, match=r"verify_hosts: 'http://nas01.lan' is a URL"):
            AuditSettings(verify_hosts=("http://nas01.lan",))


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
