"""The turn spool end to end: Dreamer's Hermes provider in a Hermes home, its real spool file, the
real Hindsight client, real agent processes (killed with SIGKILL where a test says so), and a real
HTTP server on 127.0.0.1 that takes retain requests (tests/support/retain_sink.py): a real Hindsight
cannot be stopped for a while and brought back, or made to answer 503, on demand."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip(
    "agent.memory_provider", reason="hermes-agent is not installed (pip install -e '.[test]')"
)

from dreamer.hermes_provider.memory import DreamerMemory
from dreamer.hermes_provider.provider import DreamerMemoryProvider
from dreamer.hermes_provider.settings import load_settings
from dreamer.retry import RetryPolicy
from tests.support.retain_sink import RetainSink

REPO = Path(__file__).resolve().parents[3]
FAST = RetryPolicy(max_attempts=1, base_delay_s=0.005, max_delay_s=0.05, retry_after_cap_s=0.05)


@pytest.fixture
def sink() -> Iterator[RetainSink]:
    server = RetainSink()
    yield server
    server.close()


@pytest.fixture
def home(tmp_path: Path, sink: RetainSink, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A Hermes home whose hindsight/config.json points at the sink, with one writable bank."""
    path = tmp_path / "hermes-home"
    (path / "hindsight").mkdir(parents=True)
    (path / "config.yaml").write_text("memory:\n  provider: dreamer\n", encoding="utf-8")
    config = {"mode": "local_external", "api_url": sink.url, "bank_id": "turns", "timeout": 5}
    (path / "hindsight" / "config.json").write_text(json.dumps(config), encoding="utf-8")
    monkeypatch.delenv("HINDSIGHT_API_KEY", raising=False)
    monkeypatch.setenv("HERMES_HOME", str(path))
    return path


def wait_until(
    done: Callable[[], bool], timeout_s: float = 60.0, *, progress: Callable[[], object] = lambda: None
) -> None:
    """Wait for the writer to get somewhere (a wait, not a measurement: no time is asserted). The
    deadline is ``timeout_s`` without a change of ``progress()``: on a loaded machine 200 stores take
    longer than a minute, and a writer that stops storing still fails here."""
    deadline = time.monotonic() + timeout_s
    last = progress()
    while not done():
        now = progress()
        if now != last:
            last, deadline = now, time.monotonic() + timeout_s
        assert time.monotonic() < deadline, "the writer did not get there"
        time.sleep(0.01)


def agent(home: Path, session: str, count: int, mode: str) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if k != "HINDSIGHT_API_KEY"}
    env["HERMES_HOME"] = str(home)
    return subprocess.Popen(
        [sys.executable, "-m", "tests.support.turn_agent", str(home), session, str(count), mode],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def turns(session: str, count: int) -> list[str]:
    return [f"User: {session} question {i}\nAssistant: {session} answer {i}" for i in range(count)]


def stored(sink: RetainSink) -> dict[str | None, str]:
    """What the server keeps of what reached it: one memory per document id (Hindsight stores a
    batch sent again under its id once), the ids in the order they first arrived."""
    kept: dict[str | None, str] = {}
    for item in list(sink.items):
        kept.setdefault(item.document_id, item.content)
    return kept


def assert_stored_once_in_order(sink: RetainSink, expected: list[str], *, resends: int) -> None:
    """Every turn stored, in order, each under one document id. A batch reaches the server again
    (under its own id) only after an attempt that failed without its answer, a read timeout under
    load say, so there are at most ``resends`` copies (the writers' failed attempts while the server
    took batches); any other copy is a batch sent twice."""
    items = list(sink.items)
    kept = stored(sink)
    assert None not in kept, "a batch was sent without its document id"
    assert all(item.content == kept[item.document_id] for item in items), "one id, two contents"
    assert len(items) - len(kept) <= resends, "a batch was sent twice"
    assert list(kept.values()) == expected


def failed_attempts(provider: DreamerMemoryProvider) -> int:
    """The provider's writer's failed store attempts (it never failed when it has no writer)."""
    memory = provider.memory
    return 0 if memory is None or memory.turns is None else memory.turns.stats.failed_attempts


class TestServerDown:
    @pytest.mark.slow
    def test_200_turns_while_the_server_is_down_are_all_stored_in_order_once_it_is_back(
        self, home: Path, sink: RetainSink
    ) -> None:
        """The server refuses connections for the first 100 turns and answers 503 for the next 100
        (each phase lasting until the writer failed 20 more times); once it answers, all 200 turns
        are stored, in order, each exactly once, each with the time it was said."""
        memory = DreamerMemory(load_settings(hermes_home=home), turn_retry=FAST)
        assert memory.turns is not None
        try:
            sink.down()
            for i in range(100):
                memory.sync_turn(f"s question {i}", f"s answer {i}", "s")
            wait_until(lambda: memory.turns is not None and memory.turns.stats.failed_attempts >= 20)
            sink.up()
            sink.status = 503
            for i in range(100, 200):
                memory.sync_turn(f"s question {i}", f"s answer {i}", "s")
            wait_until(lambda: sink.refused >= 20)
            assert sink.items == []
            failed_while_down = memory.turns.stats.failed_attempts
            sink.status = 200
            wait_until(lambda: len(stored(sink)) >= 200, progress=lambda: len(sink.items))
        finally:
            memory.close()
        resends = memory.turns.stats.failed_attempts - failed_while_down
        assert_stored_once_in_order(sink, turns("s", 200), resends=resends)
        assert all(item.tags == ("session:s",) and item.bank_id == "turns" for item in sink.items)
        stamps = [item.timestamp for item in sink.items]
        assert None not in stamps and stamps == sorted(stamps)  # type: ignore[type-var]
        assert memory.turns.stats.dropped == 0 and memory.turns.depth().turns == 0


class TestProcessExit:
    def test_turns_of_a_killed_agent_are_stored_at_its_next_start(self, home: Path, sink: RetainSink) -> None:
        """An agent syncs 20 turns while the server is down and is killed with SIGKILL; the status
        call shows them waiting, and the next start stores all 20, in order, once."""
        sink.down()
        proc = agent(home, "k", 20, "hold")
        try:
            assert proc.stdout is not None
            assert proc.stdout.readline().strip() == "spooled 20", proc.stderr.read() if proc.stderr else ""
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait(30)
        sink.up()
        status = DreamerMemoryProvider().get_status_config({})
        assert status["turns waiting"] == "20" and Path(status["turn spool"]).is_relative_to(home)
        assert sink.items == []  # reading the status sends nothing
        provider = DreamerMemoryProvider()
        provider.initialize("k2", hermes_home=str(home), agent_identity="default")
        try:
            wait_until(lambda: len(stored(sink)) >= 20, progress=lambda: len(sink.items))
        finally:
            provider.shutdown()
        assert_stored_once_in_order(sink, turns("k", 20), resends=failed_attempts(provider))
        assert provider.get_status_config({})["turns waiting"] == "0"

    def test_an_exit_without_shutdown_loses_no_turn(self, home: Path, sink: RetainSink) -> None:
        """A process that ends without Hermes' shutdown (its writer thread dies with it) leaves its
        queued turns in the spool; the next start stores them all, in order, each under one document
        id (a batch whose answer timed out under load is sent again under its id, kept once)."""
        sink.down()
        code = (
            "from dreamer.hermes_provider.provider import DreamerMemoryProvider as P\n"
            "import sys\np = P()\np.initialize('x', hermes_home=sys.argv[1], agent_identity='default')\n"
            "for i in range(20):\n    p.sync_turn(f'x question {i}', f'x answer {i}', session_id='x')\n"
        )
        subprocess.run([sys.executable, "-c", code, str(home)], cwd=REPO, check=True, timeout=60)
        sink.up()
        provider = DreamerMemoryProvider()
        provider.initialize("y", hermes_home=str(home), agent_identity="default")
        try:
            wait_until(lambda: len(stored(sink)) >= 20, progress=lambda: len(sink.items))
        finally:
            provider.shutdown()
        assert_stored_once_in_order(sink, turns("x", 20), resends=failed_attempts(provider))


class TestTwoAgents:
    @pytest.mark.slow
    def test_two_agent_processes_on_one_home_never_send_a_turn_twice(
        self, home: Path, sink: RetainSink
    ) -> None:
        """Two agents of one Hermes home sync 100 turns each at once and shut down; with whatever a
        shutdown left stored at the next start, each of the 200 turns is stored once, under one
        document id, and each agent's turns in its order; a batch reaches the server again (under
        its id) only after a failed attempt or a store an agent's exit cut short."""
        procs = [agent(home, name, 100, "run") for name in ("a", "b")]
        outputs: list[dict[str, Any]] = []
        for proc in procs:
            out, err = proc.communicate(timeout=120)
            assert proc.returncode == 0, err
            outputs.append(json.loads(out.strip().splitlines()[-1]))
        provider = DreamerMemoryProvider()
        provider.initialize("c", hermes_home=str(home), agent_identity="default")
        try:
            wait_until(lambda: len(stored(sink)) >= 200, progress=lambda: len(sink.items))
        finally:
            provider.shutdown()
        kept = stored(sink)
        assert None not in kept and len(kept) == 200
        for name in ("a", "b"):
            assert [text for text in kept.values() if text.startswith(f"User: {name} ")] == turns(name, 100)
        assert sum(o["lost"] + o["dropped"] for o in outputs) == 0
        # Copies under one id come only from a failed attempt, or from the store an agent had in
        # flight when its shutdown stopped waiting and the process ended: the next start sends it
        # again under its id (its turns were left in the spool, unsaved_at_close).
        in_flight = sum(o["unsaved_at_close"] > 0 for o in outputs)
        resends = failed_attempts(provider) + in_flight + sum(o["failed_attempts"] for o in outputs)
        assert len(sink.items) - len(kept) <= resends, "a batch was sent twice"


class TestSpoolPlace:
    def test_a_home_where_no_spool_can_be_made_still_stores_turns_and_says_what_is_at_risk(
        self, home: Path, sink: RetainSink, caplog: pytest.LogCaptureFixture
    ) -> None:
        """``<home>/dreamer`` is a file: the provider says the spool cannot be used and that an exit
        loses what is not stored yet, and keeps the turns in memory, still storing them."""
        (home / "dreamer").write_text("in the way", encoding="utf-8")
        memory = DreamerMemory(load_settings(hermes_home=home), turn_retry=FAST)
        try:
            assert "kept in memory only, so an exit loses those not yet stored" in caplog.text
            memory.sync_turn("m question 0", "m answer 0", "m")
            wait_until(lambda: len(stored(sink)) == 1, progress=lambda: len(sink.items))
        finally:
            memory.close()
        assert memory.turns is not None
        assert_stored_once_in_order(sink, turns("m", 1), resends=memory.turns.stats.failed_attempts)
