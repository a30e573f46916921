"""Faults an operator or an attacker can cause, each reproduced and each a clear outcome.

Real SQLite files, real subprocesses and real file systems; the numbers in the class docstrings
are the findings these tests were written for.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import sqlite3
import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from dreamer.backends.base import RetainItem
from dreamer.backends.embedded.backend import EmbeddedBackend
from dreamer.config import Config
from dreamer.errors import RunBusyError, StateFileError
from dreamer.jobs.locks import profile_run_lock, upstream_run_lock
from dreamer.rollup.pipeline import Rollup
from dreamer.service.runner import run_rollups_now
from dreamer.state import SCHEMA_VERSION, LedgerCard, Reinforcement, StateStore, Watermark
from tests.support.cli import run_dreamer
from tests.support.configs import config_data, loaded
from tests.support.hostile_server import Answer, HostileServer

T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)

CONFIG = config_data(
    {"global": {}, "shared": {}, "research": {"access": "read_write"}},
    ("research",),
    state_dir="state",
)
MEMORIES = [
    "The nightly restic backup of host atlas runs at 02:30 to the NAS.",
    "Grafana listens on port 3000 on host hermes-mon.",
    "Nextcloud runs version 27.1 on host atlas behind nginx.",
]


def dreamer(cfg_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_dreamer(cfg_dir / "config.toml", *args)


async def seed(cfg: Config, texts: list[str]) -> None:
    backend = EmbeddedBackend(cfg.embedded_path)
    try:
        await backend.retain(cfg.bank_id("research"), [RetainItem(content=t) for t in texts])
    finally:
        await backend.aclose()


def commit(store: StateStore, *, expected: Watermark | None = None, **changes: Any) -> None:
    fields: dict[str, Any] = {
        "profile": "research",
        "bank_id": "b",
        "watermark": Watermark(T0, {"u1": T0}),
        "promoted": [],
        "reinforced": [],
        "run_id": "r",
        "outcome": "promoted",
        "detail": "",
        "counts": {},
        "finished_at": T0,
        "expected": expected,
    }
    fields.update(changes)
    store.record_run_start(fields["run_id"], "rollup:research", T0)
    store.commit_rollup(**fields)


class TestDamagedStateFile:
    """4. A damaged or foreign state file is refused with a message naming it, never reset."""

    @pytest.mark.parametrize(
        ("content", "says"),
        [
            (b"", "the state file is empty"),
            (b"\x00garbage\xff" * 512, "not a readable state file"),
        ],
    )
    def test_refused_and_left_as_it_was(self, tmp_path: Path, content: bytes, says: str) -> None:
        path = tmp_path / "state.sqlite3"
        path.write_bytes(content)
        with pytest.raises(StateFileError, match=says) as info:
            StateStore.open(path)
        assert str(path) in str(info.value)
        assert path.read_bytes() == content

    def test_a_newer_schema_is_refused(self, tmp_path: Path) -> None:
        path = tmp_path / "state.sqlite3"
        StateStore.open(path).close()
        with sqlite3.connect(path) as conn:
            conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
        with pytest.raises(StateFileError, match="written by a newer Dreamer"):
            StateStore.open(path)

    def test_another_programs_database_is_refused(self, tmp_path: Path) -> None:
        path = tmp_path / "state.sqlite3"
        with sqlite3.connect(path) as conn:
            conn.execute("CREATE TABLE photos (id INTEGER PRIMARY KEY, name TEXT)")
        with pytest.raises(StateFileError, match="another program's SQLite database"):
            StateStore.open(path)
        with sqlite3.connect(path) as conn:
            assert conn.execute("SELECT name FROM sqlite_master").fetchall() == [("photos",)]

    def test_a_symlinked_state_file_is_refused(self, tmp_path: Path) -> None:
        real = tmp_path / "elsewhere.sqlite3"
        StateStore.open(real).close()
        (tmp_path / "state.sqlite3").symlink_to(real)
        with pytest.raises(StateFileError, match="symbolic link"):
            StateStore.open(tmp_path / "state.sqlite3")

    def test_a_state_file_from_before_the_identity_pragmas_upgrades_and_keeps_its_rows(
        self, tmp_path: Path
    ) -> None:
        path = tmp_path / "state.sqlite3"
        with StateStore.open(path) as store:
            commit(store, promoted=[LedgerCard("d1", "research", "g", "A card.", "a card")])
        with sqlite3.connect(path) as conn:
            conn.execute("PRAGMA application_id = 0")
            conn.execute("PRAGMA user_version = 0")
        with StateStore.open(path) as store:
            assert [c.document_id for c in store.ledger()] == ["d1"]
            assert store.watermark("research").created_at == T0
        with sqlite3.connect(path) as conn:
            assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION

    @pytest.mark.parametrize("command", ["status", "rollup"])
    def test_commands_say_one_line_and_exit_1(self, tmp_path: Path, command: str) -> None:
        cfg = loaded(tmp_path, CONFIG)
        cfg.state_path.parent.mkdir(parents=True)
        cfg.state_path.write_bytes(b"\x00garbage\xff" * 512)
        proc = dreamer(tmp_path, command, "--log-level", "error")
        assert proc.returncode == 1, (proc.stdout, proc.stderr)
        assert "Traceback" not in proc.stdout + proc.stderr
        assert str(cfg.state_path) in proc.stdout + proc.stderr
        assert cfg.state_path.read_bytes() == b"\x00garbage\xff" * 512


class TestDiskFull:
    """5. A commit that fails for lack of space reports that, not "cannot rollback"."""

    def test_full_database_is_reported_and_nothing_moves(self, tmp_path: Path) -> None:
        with StateStore.open(tmp_path / "state.sqlite3") as store:
            pages = store._conn.execute("PRAGMA page_count").fetchone()[0]
            # SQLite's own limit: past it every write fails with SQLITE_FULL, as on a full disk.
            store._conn.execute(f"PRAGMA max_page_count = {pages}")
            big = [LedgerCard(f"d{i}", "research", "g", "x" * 4000, "x") for i in range(50)]
            with pytest.raises(StateFileError, match="full") as info:
                commit(store, promoted=big)
            assert "rollback" not in str(info.value).lower()
            assert store.watermark("research") == Watermark()


class TestOneRunPerProfile:
    """2. Two roll-ups of one profile at once never move its watermark backwards."""

    def test_commit_refuses_a_watermark_that_moved(self, tmp_path: Path) -> None:
        path = tmp_path / "state.sqlite3"
        with StateStore.open(path) as slow, StateStore.open(path) as fast:
            read_by_slow = slow.watermark("research")
            commit(fast, run_id="fast", watermark=Watermark(T0, {"u2": T0}), expected=read_by_slow)
            with pytest.raises(RunBusyError, match="moved during this run"):
                commit(slow, run_id="slow", watermark=Watermark(None), expected=read_by_slow)
            assert slow.watermark("research").seen.keys() == {"u2"}

    async def test_a_second_run_while_one_holds_the_profile_is_busy(self, tmp_path: Path) -> None:
        """The daemon and `dreamer rollup` share one lock per profile; the second reports busy (75)."""
        cfg = loaded(tmp_path, CONFIG)
        await seed(cfg, MEMORIES)
        lock = profile_run_lock(cfg, "research")
        await lock.acquire()
        try:
            (busy,) = await run_rollups_now(cfg, ["research"])
            proc = dreamer(tmp_path, "rollup", "--log-level", "error")
        finally:
            lock.release()
        assert busy.outcome == "busy" and "run lock" in busy.reason
        assert proc.returncode == 75 and "busy" in proc.stdout, (proc.stdout, proc.stderr)
        with StateStore.open(cfg.state_path) as state:
            assert state.watermark("research") == Watermark()
            assert [r.outcome for r in state.runs("rollup:research")] == ["busy", "busy"]
        (after,) = await run_rollups_now(cfg, ["research"])
        assert after.outcome == "promoted"

    async def test_concurrent_runs_promote_each_unit_once(self, tmp_path: Path) -> None:
        cfg = loaded(tmp_path, CONFIG)
        await seed(cfg, MEMORIES)
        results = await asyncio.gather(*(run_rollups_now(cfg, ["research"]) for _ in range(3)))
        outcomes = sorted(r.outcome for (r,) in results)
        assert outcomes.count("promoted") == 1, outcomes
        with StateStore.open(cfg.state_path) as state:
            assert sum(c.reinforcements for c in state.ledger()) == 0

    async def test_two_profiles_rolling_into_one_upstream_at_once_promote_each_fact_once(
        self, tmp_path: Path
    ) -> None:
        """Two profiles with the same new facts, rolled up at once (the daemon and a `dreamer
        rollup --profile`, or two cron jobs): the upstream bank gets each fact once. Without the
        upstream lock each run judged against a ledger without the other's cards and both promoted
        every fact into the append-only bank."""
        writable = {"access": "read_write"}
        cfg = loaded(
            tmp_path,
            config_data(
                {"global": {}, "shared": {}, "alpha": writable, "beta": writable},
                ("alpha", "beta"),
                state_dir="state",
            ),
        )
        backend = EmbeddedBackend(cfg.embedded_path)
        try:
            for alias in ("alpha", "beta"):
                await backend.retain(cfg.bank_id(alias), [RetainItem(content=t) for t in MEMORIES])
        finally:
            await backend.aclose()
        results = await asyncio.gather(run_rollups_now(cfg, ["alpha"]), run_rollups_now(cfg, ["beta"]))
        outcomes = sorted(str(r.outcome) for (r,) in results)
        assert "promoted" in outcomes and set(outcomes) <= {"promoted", "reinforced", "busy"}, outcomes
        with StateStore.open(cfg.state_path) as state:
            texts = [card.text for card in state.ledger()]
        assert len(texts) == len(set(texts)) == len(MEMORIES), texts

    async def test_a_held_upstream_lock_makes_another_profiles_run_busy(self, tmp_path: Path) -> None:
        """While a run into the upstream bank holds its lock, another profile's run into the same
        bank is `busy` (75), names the bank, and reads nothing; it promotes once the lock is free."""
        cfg = loaded(tmp_path, CONFIG)
        await seed(cfg, MEMORIES)
        lock = upstream_run_lock(cfg, "research")
        await lock.acquire()
        try:
            (busy,) = await run_rollups_now(cfg, ["research"])
        finally:
            lock.release()
        assert busy.outcome == "busy" and "upstream bank" in busy.reason
        (after,) = await run_rollups_now(cfg, ["research"])
        assert after.outcome == "promoted"

    def test_a_symlinked_run_lock_is_not_followed(self, tmp_path: Path) -> None:
        cfg = loaded(tmp_path, CONFIG)
        victim = tmp_path / "victim"
        lock = profile_run_lock(cfg, "research")
        lock.path.parent.mkdir(parents=True)
        lock.path.symlink_to(victim)
        proc = dreamer(tmp_path, "rollup", "--log-level", "error")
        assert proc.returncode == 1, (proc.stdout, proc.stderr)
        assert "symbolic link" in proc.stdout + proc.stderr
        assert not victim.exists()


class TestIdempotentReinforcement:
    """3. Reading the same units again never inflates a card's count."""

    def test_the_same_sources_count_once(self, tmp_path: Path) -> None:
        with StateStore.open(tmp_path / "state.sqlite3") as store:
            card = LedgerCard("d1", "research", "g", "A card.", "a card", source_ids=("u1",))
            commit(store, promoted=[card])
            for i in range(3):
                commit(store, run_id=f"again{i}", reinforced=[Reinforcement("d1", ("u2", "u3"), "research")])
            commit(store, run_id="new", reinforced=[Reinforcement("d1", ("u3", "u4"), "research")])
            (row,) = store.ledger()
        assert row.reinforcements == 2
        assert row.source_ids == ("u1", "u2", "u3", "u4")

    async def test_rollup_since_three_times_adds_nothing(self, tmp_path: Path) -> None:
        cfg = loaded(tmp_path, CONFIG)
        await seed(cfg, [*MEMORIES, "Grafana on host hermes-mon listens on port 3000."])
        await run_rollups_now(cfg, ["research"])
        with StateStore.open(cfg.state_path) as state:
            before = {c.document_id: c.reinforcements for c in state.ledger()}
        for _ in range(3):
            await run_rollups_now(cfg, ["research"], since=datetime(2000, 1, 1, tzinfo=UTC))
        with StateStore.open(cfg.state_path) as state:
            assert {c.document_id: c.reinforcements for c in state.ledger()} == before


async def test_pipeline_commit_checks_the_watermark_it_read(tmp_path: Path) -> None:
    """The pipeline passes what it read to the commit: a run whose watermark was moved under it
    ends busy and commits nothing."""
    cfg = loaded(tmp_path, CONFIG)
    await seed(cfg, MEMORIES)
    backend = EmbeddedBackend(cfg.embedded_path)
    try:
        with StateStore.open(cfg.state_path) as state, StateStore.open(cfg.state_path) as other:

            def meddle(step: str, _profile: str) -> None:
                if step == "promoted":
                    commit(other, run_id="other", watermark=Watermark(T0, {"x": T0}))

            state.record_run_start("mine", "rollup:research", T0)
            report = await Rollup(cfg, backend, state, on_step=meddle).run("research", run_id="mine")
            assert report.outcome == "busy", report.reason
            assert state.watermark("research").seen.keys() == {"x"}
            assert state.ledger() == []
    finally:
        await backend.aclose()


class TestTerminalOutput:
    """10. Memory text cannot drive the terminal: text output shows control characters escaped,
    JSON keeps the exact text."""

    HOSTILE = "Grafana \x1b[2J\x1b[31mlistens\x1b[0m on port 3000 \u202etxt.exe\u202c\n[global] forged line"

    async def test_recall_and_rollup_print_no_control_characters(self, tmp_path: Path) -> None:
        cfg = loaded(tmp_path, CONFIG)
        await seed(cfg, [self.HOSTILE])
        rollup = dreamer(tmp_path, "rollup", "--log-level", "error")
        recall = dreamer(tmp_path, "recall", "Grafana", "--bank", "research", "--log-level", "error")
        as_json = dreamer(tmp_path, "recall", "Grafana", "--bank", "research", "--json")
        for proc in (rollup, recall):
            assert proc.returncode == 0, proc.stderr
            assert "\x1b" not in proc.stdout and "\u202e" not in proc.stdout
            assert "\\x1b[31mlistens" in proc.stdout and "\\u202etxt.exe" in proc.stdout
        (line,) = recall.stdout.strip().splitlines()
        # One line, under its own label; the bidi override flags it as Hermes' scan would block it.
        assert line.startswith("[research] (flagged: reads like an instruction to the agent, not a fact: ")
        assert "invisible_unicode_U+202E) Grafana \\x1b[2J" in line
        texts = [item["text"] for item in __import__("json").loads(as_json.stdout)["items"]]
        assert self.HOSTILE in texts


TEST_KEY = "hs-Zq7Xw2Lp9Vb4Nc8Rt5Ym3Kd6Gf1Hj0"


ANSWERS = {
    "echo": Answer.echo(),
    # The key URL-quoted in the query, base64 in the path, and raw after a user part: a hostile
    # redirect's target in any encoding, which no redactor could know.
    "redirect-query": Answer.redirect("https://login.example/cb?token={auth}&next=/v1"),
    "redirect-path": Answer.redirect(
        "http://127.0.0.1:9/" + base64.urlsafe_b64encode(f"Bearer {TEST_KEY}".encode()).decode() + "/x",
        status=307,
    ),
    "redirect-relative": Answer.redirect("/v1/again?key={auth}", status=308),
}


class TestTheKeyNeverLeaks:
    """6. A server that echoes the Authorization header in a long error body, or redirects to an
    address that carries the key (URL-quoted, base64): no output, no log line and no file the
    command wrote (run records) holds the key or any 8-character piece of it."""

    @pytest.fixture(params=sorted(ANSWERS))
    def echoing(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: Any) -> Any:
        with hostile_backend(tmp_path, monkeypatch, ANSWERS[request.param]):
            yield tmp_path

    @pytest.mark.parametrize(
        "command",
        [
            ("rollup",),
            ("recall", "anything", "--bank", "research"),
            ("retain", "a fact", "--bank", "research"),
            ("status",),
            ("banks",),
        ],
    )
    def test_no_piece_of_the_key_in_any_output(self, echoing: Path, command: tuple[str, ...]) -> None:
        proc = dreamer(echoing, *command, "--log-level", "debug")
        output = proc.stdout + proc.stderr
        assert "HTTP" in output or "xxxxxxxx" in output, output
        pieces = {TEST_KEY[i : i + 8] for i in range(len(TEST_KEY) - 7)}
        assert [p for p in pieces if p in output] == []
        written = "".join(
            path.read_bytes().decode("utf-8", "replace") for path in echoing.rglob("*") if path.is_file()
        )
        assert [p for p in pieces if p in written] == []

    @pytest.mark.parametrize(
        ("answer", "shown"),
        [
            ("redirect-query", "to https://login.example)"),
            ("redirect-path", "to http://127.0.0.1:9)"),
            ("redirect-relative", "to another path on the same server)"),
        ],
    )
    def test_a_redirect_names_where_it_points_by_host_only(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, answer: str, shown: str
    ) -> None:
        """Exit 1 naming the setting to fix and the target's scheme, host and port, never its path
        or query."""
        with hostile_backend(tmp_path, monkeypatch, ANSWERS[answer]):
            proc = dreamer(tmp_path, "retain", "a fact", "--bank", "research")
        output = proc.stdout + proc.stderr
        assert proc.returncode == 1, output
        assert "backend.hindsight.url" in output and shown in output, output
        assert "token" not in output and "/cb" not in output and "again" not in output, output


@contextlib.contextmanager
def hostile_backend(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, answer: Answer) -> Iterator[None]:
    """``tmp_path/config.toml`` on a Hindsight backend that is a real server answering ``answer``
    to every request, with the key TEST_KEY in ECHO_KEY and no retries."""
    server = HostileServer(answer)
    data = config_data(
        ("global", "shared", "research"),
        ("research",),
        state_dir="state",
        backend={"kind": "hindsight", "hindsight": {"url": server.url, "api_key_env": "ECHO_KEY"}},
        retry={"max_attempts": 1},
    )
    data["banks"]["research"]["access"] = "read_write"
    loaded(tmp_path, data)
    monkeypatch.setenv("ECHO_KEY", TEST_KEY)
    try:
        yield
    finally:
        server.close()


async def test_a_peer_card_failure_after_the_commit_leaves_the_run_promoted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run committed before the peer card is refreshed: an error there is a warning, not the
    run's outcome. (The failure is injected into the refresh; a damaged state file cannot be made
    to fail just between the commit and the refresh.)"""
    import dreamer.peercard.refresh as refresh

    async def failing(*args: Any, **kwargs: Any) -> list[Path]:
        raise StateFileError("state.sqlite3: the state file failed: disk I/O error")

    monkeypatch.setattr(refresh, "refresh_peer_cards", failing)
    data = dict(CONFIG)
    data["profiles"] = {"research": {"bank": "research", "peer_card_path": "cards/research.md"}}
    cfg = loaded(tmp_path, data)
    await seed(cfg, MEMORIES)
    (report,) = await run_rollups_now(cfg, ["research"])
    assert report.outcome == "promoted", report.reason
    with StateStore.open(cfg.state_path) as state:
        assert state.runs("rollup:research", limit=1)[0].outcome == "promoted"
