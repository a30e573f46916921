"""The audit's URL checks against real HTTP servers on 127.0.0.1: which requests a URL found in memory
text makes the daemon send (none unless its host is on ``audit.verify_hosts``; never under a dry run
unless asked; a HEAD without query string when allowed)."""

from __future__ import annotations

import ast
import io
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from dreamer.commands.audit import audit_command
from dreamer.config import Config
from dreamer.hermes.audit.hosts import HostAllowList
from dreamer.hermes.audit.probe import HttpUrlProbe
from dreamer.hermes.audit.report import AuditStatus
from dreamer.hermes.audit.run import audit_agent
from dreamer.hermes.audit.settings import AgentFiles, AuditSettings
from tests.integration.hermes.audit.test_run import CANARY, NOW, closed_port, make_agent, read_store
from tests.support.configs import config_data, parsed, write_toml
from tests.support.hostile_server import Answer, HostileServer

PACKAGE = Path(__file__).resolve().parents[4] / "dreamer"
DELETE_PATH = "/api/v1/users/7/delete"


@pytest.fixture
def server() -> Iterator[HostileServer]:
    hostile = HostileServer(Answer(status=200, body="deleted"))
    try:
        yield hostile
    finally:
        hostile.close()


@pytest.fixture
def other() -> Iterator[HostileServer]:
    hostile = HostileServer(Answer(status=200, body="ok"))
    try:
        yield hostile
    finally:
        hostile.close()


def port_of(server: HostileServer) -> int:
    return int(server.url.rsplit(":", 1)[1])


def seen(server: HostileServer) -> list[tuple[str, str]]:
    return [(request.method, request.path) for request in server.requests]


def delete_entry(server: HostileServer) -> str:
    return f"Admin API endpoint: {server.url}{DELETE_PATH}?confirm=yes"


def configured(tmp_path: Path, agent: AgentFiles, verify_hosts: list[str]) -> Config:
    assert agent.skills_dir is not None
    data = config_data(
        agents={agent.name: {"memories_dir": str(agent.memories_dir), "skills_dir": str(agent.skills_dir)}},
        audit={"verify_hosts": verify_hosts, "url_timeout_s": 1.0},
    )
    return parsed(data, base_dir=tmp_path)


def run_command(config: Config, *, dry_run: bool = False, verify_urls: bool = False) -> dict[str, Any]:
    out = io.StringIO()

    async def main() -> int:
        return await audit_command(
            config, [], dry_run=dry_run, force=True, as_json=True, verify_urls=verify_urls, out=out
        )

    assert anyio.run(main) == 0
    agents: dict[str, Any] = json.loads(out.getvalue())["agents"]
    return agents


# --- what reaches the server ---------------------------------------------------------------------

_HEAD_WITHOUT_QUERY = [("HEAD", "/")]


class TestWhichRequestsReachTheServer:
    """`dreamer audit`'s body on an entry naming the server's delete URL, host listed or not."""

    @pytest.mark.parametrize(
        ("listed", "dry_run", "verify_urls", "expected"),
        [
            (False, False, False, []),
            (False, True, False, []),
            (False, True, True, []),
            (True, True, False, []),
            (True, True, True, _HEAD_WITHOUT_QUERY),
            (True, False, False, _HEAD_WITHOUT_QUERY),
        ],
        ids=[
            "unlisted",
            "unlisted-dry-run",
            "unlisted-dry-run-verify-urls",
            "listed-dry-run",
            "listed-dry-run-verify-urls",
            "listed",
        ],
    )
    def test_exactly_these_requests(
        self,
        tmp_path: Path,
        server: HostileServer,
        listed: bool,
        dry_run: bool,
        verify_urls: bool,
        expected: list[tuple[str, str]],
    ) -> None:
        """None unless the host is listed (and, in a dry run, --verify-urls given); then one HEAD to
        the path, without the query string that would confirm the delete."""
        agent = make_agent(tmp_path, "mumuni", [CANARY, delete_entry(server)], [CANARY])
        config = configured(tmp_path, agent, [f"127.0.0.1:{port_of(server)}"] if listed else [])

        reports = run_command(config, dry_run=dry_run, verify_urls=verify_urls)

        assert seen(server) == expected
        assert reports["mumuni"]["status"] in ("COMPLETE", "DRY_RUN")
        assert read_store(agent.memory_path) == [CANARY, delete_entry(server)]

    def test_a_host_listed_without_port_allows_every_port(
        self, tmp_path: Path, server: HostileServer
    ) -> None:
        """``127.0.0.1`` lists the host on any port: the server gets its HEAD."""
        agent = make_agent(tmp_path, "mumuni", [CANARY, delete_entry(server)], [CANARY])
        run_command(configured(tmp_path, agent, ["127.0.0.1"]))
        assert seen(server) == _HEAD_WITHOUT_QUERY

    def test_another_port_of_the_host_is_not_listed(
        self, tmp_path: Path, server: HostileServer, other: HostileServer
    ) -> None:
        """``127.0.0.1:<other port>`` does not list the server's port: it gets nothing."""
        agent = make_agent(tmp_path, "mumuni", [CANARY, delete_entry(server)], [CANARY])
        run_command(configured(tmp_path, agent, [f"127.0.0.1:{port_of(other)}"]))
        assert seen(server) == [] and seen(other) == []

    def test_the_cli_dry_run_sends_nothing_even_for_a_listed_host(
        self, tmp_path: Path, server: HostileServer
    ) -> None:
        """`dreamer audit --dry-run --force` as a user runs it: the listed server sees no request;
        with --verify-urls it sees one HEAD without the query."""
        agent = make_agent(tmp_path, "mumuni", [CANARY, delete_entry(server)], [CANARY])
        assert agent.skills_dir is not None
        settings = {"memories_dir": str(agent.memories_dir), "skills_dir": str(agent.skills_dir)}
        audit = {"verify_hosts": [f"127.0.0.1:{port_of(server)}"]}
        write_toml(tmp_path / "config.toml", config_data(agents={"mumuni": settings}, audit=audit))
        env = {**os.environ, "DREAMER_CONFIG": str(tmp_path / "config.toml")}
        env.pop("NOTIFY_SOCKET", None)

        def dreamer(*args: str) -> subprocess.CompletedProcess[str]:
            command = [sys.executable, "-m", "dreamer", "audit", *args]
            return subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)

        dry = dreamer("--dry-run", "--force", "--json")
        assert dry.returncode == 0, dry.stderr
        assert "nothing was changed" in json.loads(dry.stdout)["agents"]["mumuni"]["reason"]
        assert seen(server) == []
        checked = dreamer("--dry-run", "--verify-urls", "--force", "--json")
        assert checked.returncode == 0, checked.stderr
        assert seen(server) == _HEAD_WITHOUT_QUERY
        help_text = dreamer("--help").stdout
        assert "--verify-urls" in help_text and "audit.verify_hosts" in help_text


class TestTheRequestItself:
    """What a check of a listed host sends: HEAD, path only, no credentials, no redirect, no proxy."""

    def test_no_user_part_query_or_fragment(self, tmp_path: Path, server: HostileServer) -> None:
        """A URL carrying user:password, a query and a fragment is checked as scheme://host:port/path:
        no Authorization header, no query."""
        url = f"http://admin:hunter2@127.0.0.1:{port_of(server)}/status?token=abc#top"
        agent = make_agent(tmp_path, "mumuni", [CANARY, f"Status API endpoint: {url}"], [CANARY])
        audit_agent(agent, AuditSettings(url_timeout_s=1.0, verify_hosts=("127.0.0.1",)), NOW)
        assert seen(server) == [("HEAD", "/")]
        assert "Authorization" not in server.requests[0].headers

    def test_a_redirect_is_not_followed(self, tmp_path: Path, other: HostileServer) -> None:
        """A listed host answering 302 to another listed host: the target gets nothing, and the 302
        counts as an answer (the entry is not marked)."""
        redirecting = HostileServer(Answer.redirect(f"{other.url}/steal?confirm=yes"))
        try:
            entry = f"Admin API endpoint: {redirecting.url}/x"
            agent = make_agent(tmp_path, "mumuni", [CANARY, entry], [CANARY])
            report = audit_agent(agent, AuditSettings(url_timeout_s=1.0, verify_hosts=("127.0.0.1",)), NOW)
            assert seen(redirecting) == [("HEAD", "/")]
        finally:
            redirecting.close()
        assert seen(other) == []
        assert report.counts["unverified"] == 0 and read_store(agent.memory_path) == [CANARY, entry]

    def test_proxy_variables_are_ignored(
        self, tmp_path: Path, server: HostileServer, other: HostileServer, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """HTTP_PROXY and ALL_PROXY pointing at another server: the request goes straight to the host."""
        for name in ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
            monkeypatch.setenv(name, other.url)
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        agent = make_agent(tmp_path, "mumuni", [CANARY, delete_entry(server)], [CANARY])
        audit_agent(agent, AuditSettings(url_timeout_s=1.0, verify_hosts=("127.0.0.1",)), NOW)
        assert seen(server) == _HEAD_WITHOUT_QUERY and seen(other) == []


class TestNotCheckedIsNotDead:
    """A URL the audit may not check leaves its entry as it is."""

    def test_an_unlisted_dead_url_is_neither_marked_nor_removed(self, tmp_path: Path) -> None:
        """A closed port on an unlisted host: no [UNVERIFIED], no deletion; a note names the host."""
        port = closed_port()
        entry = f"Search API endpoint: http://127.0.0.1:{port}/health"
        agent = make_agent(tmp_path, "mumuni", [CANARY, entry], [CANARY])
        report = audit_agent(agent, AuditSettings(url_timeout_s=1.0), NOW)
        assert report.status is AuditStatus.COMPLETE
        assert read_store(agent.memory_path) == [CANARY, entry]
        assert report.counts["unverified"] == 0 and report.counts["deletions"] == 0
        assert any("not checked" in note and "audit.verify_hosts" in note for note in report.notes)

    def test_an_unlisted_url_keeps_an_old_mark(self, tmp_path: Path, server: HostileServer) -> None:
        """A marked entry whose host is not listed keeps [UNVERIFIED]: an answer nobody asked for
        does not clear it."""
        entry = f"Admin API endpoint: {server.url}/x [UNVERIFIED]"
        agent = make_agent(tmp_path, "mumuni", [CANARY, entry], [CANARY])
        report = audit_agent(agent, AuditSettings(url_timeout_s=1.0, verify_hosts=("nas01.lan",)), NOW)
        assert read_store(agent.memory_path) == [CANARY, entry] and report.counts["reverified"] == 0
        assert any("127.0.0.1" in note for note in report.notes)

    def test_a_listed_dead_url_is_still_marked(self, tmp_path: Path) -> None:
        """The same closed port, listed: marked [UNVERIFIED] (so the tests above can fail)."""
        port = closed_port()
        entry = f"Search API endpoint: http://127.0.0.1:{port}/health"
        agent = make_agent(tmp_path, "mumuni", [CANARY, entry], [CANARY])
        report = audit_agent(
            agent, AuditSettings(url_timeout_s=1.0, verify_hosts=(f"127.0.0.1:{port}",)), NOW
        )
        assert read_store(agent.memory_path) == [CANARY, f"{entry} [UNVERIFIED]"]
        assert report.counts["unverified"] == 1


# --- no code path requests an unlisted host --------------------------------------------------------

_NETWORK: list[tuple[str, object]] = []
_RECORDING: list[bool] = []


def _record_network(event: str, args: tuple[object, ...]) -> None:
    if _RECORDING and event in ("socket.connect", "socket.getaddrinfo"):
        _NETWORK.append((event, args[1] if event == "socket.connect" else args[0]))


sys.addaudithook(_record_network)


def spellings(server: HostileServer) -> list[str]:
    """The server's address written the ways a URL parser may read differently."""
    port = port_of(server)
    return [
        f"http://127.0.0.1:{port}{DELETE_PATH}?confirm=yes",
        f"HTTP://127.0.0.1:{port}/upper",
        f"https://127.0.0.1:{port}/tls",
        f"http://localhost:{port}/name",
        f"http://[::1]:{port}/six",
        f"http://2130706433:{port}/decimal",
        f"http://0x7f000001:{port}/hex",
        f"http://127.1:{port}/short",
        f"http://user@127.0.0.1:{port}/user",
        f"http://127.0.0.1:1@127.0.0.1:{port}/userinfo-port",
        f"http://127.0.0.1.:{port}/dot",
    ]


class TestNoCodePathRequestsAnUnlistedHost:
    """Every socket the audit opens, and every name it resolves, is recorded by an audit hook."""

    def test_a_full_audit_connects_only_to_the_listed_host(
        self, tmp_path: Path, server: HostileServer, other: HostileServer
    ) -> None:
        """Eleven spellings of an unlisted server in MEMORY.md and USER.md, one listed server: the
        only connections go to the listed one, and the unlisted server sees nothing."""
        memory = [CANARY, *(f"Admin API endpoint: {url}" for url in spellings(server)[:6])]
        memory.append(f"Health API endpoint: {other.url}/health?x=1")
        user = [CANARY, *(f"Admin API endpoint: {url}" for url in spellings(server)[6:])]
        agent = make_agent(tmp_path, "mumuni", memory, user)
        settings = AuditSettings(url_timeout_s=1.0, verify_hosts=(f"127.0.0.1:{port_of(other)}",))
        _NETWORK.clear()
        _RECORDING.append(True)
        try:
            report = audit_agent(agent, settings, NOW)
        finally:
            _RECORDING.clear()
        assert report.status is AuditStatus.COMPLETE, report.to_json()
        assert seen(server) == []
        assert seen(other) == [("HEAD", "/")]
        connects = {address for event, address in _NETWORK if event == "socket.connect"}
        assert connects == {("127.0.0.1", port_of(other))}
        assert {host for event, host in _NETWORK if event == "socket.getaddrinfo"} <= {"127.0.0.1"}
        assert report.counts["unverified"] == 0

    def test_a_dry_run_opens_no_socket(self, tmp_path: Path, server: HostileServer) -> None:
        """A requested dry run with the host listed: not one connection, not one name resolved."""
        memory = [CANARY, *(f"Admin API endpoint: {url}" for url in spellings(server))]
        agent = make_agent(tmp_path, "mumuni", memory, [CANARY])
        settings = AuditSettings(url_timeout_s=1.0, verify_hosts=("127.0.0.1", "localhost"), dry_run=True)
        _NETWORK.clear()
        _RECORDING.append(True)
        try:
            report = audit_agent(agent, settings, NOW)
        finally:
            _RECORDING.clear()
        assert report.status is AuditStatus.DRY_RUN
        assert _NETWORK == [] and seen(server) == []

    def test_the_probe_refuses_an_unlisted_host_when_called_directly(self, server: HostileServer) -> None:
        """`HttpUrlProbe` itself: an unlisted host is not checked (None) and never contacted; with an
        empty list nothing is; the listed host gets a HEAD without the query."""
        url = f"{server.url}{DELETE_PATH}?confirm=yes"
        _NETWORK.clear()
        _RECORDING.append(True)
        try:
            assert HttpUrlProbe(1.0, HostAllowList())(url) is None
            assert HttpUrlProbe(1.0, HostAllowList.parse(["nas01.lan", "127.0.0.1:1"]))(url) is None
        finally:
            _RECORDING.clear()
        assert _NETWORK == [] and seen(server) == []
        assert HttpUrlProbe(1.0, HostAllowList.parse([f"127.0.0.1:{port_of(server)}"]))(url) is True
        assert seen(server) == _HEAD_WITHOUT_QUERY

    def test_the_probe_is_the_audits_only_network_code(self) -> None:
        """No module of ``dreamer.hermes`` imports a network library but the probe (which sends) and
        the allow-list (which only parses with ``httpx.URL``); the probe opens its client only in
        `HttpUrlProbe.__call__`, after asking the allow-list."""
        network = {
            "httpx",
            "socket",
            "ssl",
            "requests",
            "aiohttp",
            "urllib.request",
            "http.client",
            "urllib3",
        }
        importers: dict[str, set[str]] = {}
        for path in sorted((PACKAGE / "hermes").rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                names = (
                    [a.name for a in node.names]
                    if isinstance(node, ast.Import)
                    else [node.module or ""]
                    if isinstance(node, ast.ImportFrom)
                    else []
                )
                for name in names:
                    if any(name == lib or name.startswith(lib + ".") for lib in network):
                        importers.setdefault(path.relative_to(PACKAGE).as_posix(), set()).add(name)
        assert importers == {"hermes/audit/probe.py": {"httpx"}, "hermes/audit/hosts.py": {"httpx"}}

        hosts = ast.parse((PACKAGE / "hermes/audit/hosts.py").read_text(encoding="utf-8"))
        used = {
            node.attr
            for node in ast.walk(hosts)
            if isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "httpx"
        }
        assert used <= {"URL", "InvalidURL"}

        probe = ast.parse((PACKAGE / "hermes/audit/probe.py").read_text(encoding="utf-8"))
        clients = [
            node
            for node in ast.walk(probe)
            if isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "httpx"
            and node.attr in ("Client", "AsyncClient", "get", "head", "post", "request", "stream")
        ]
        (call,) = [
            fn
            for cls in ast.walk(probe)
            if isinstance(cls, ast.ClassDef) and cls.name == "HttpUrlProbe"
            for fn in cls.body
            if isinstance(fn, ast.FunctionDef) and fn.name == "__call__"
        ]
        inside = {id(node) for node in ast.walk(call)}
        assert clients and all(id(node) in inside for node in clients)
        first = call.body[0]
        assert isinstance(first, ast.Assign) and "request_url" in ast.unparse(first.value)
