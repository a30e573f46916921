"""The audit's host allow-list: which URL from memory text may be checked, and the one request sent
for it (pure; the requests themselves are tested in ``tests/integration/hermes/audit/test_probe.py``)."""

from __future__ import annotations

import pytest

from dreamer.hermes.audit.hosts import HostAllowList

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
