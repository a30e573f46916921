"""The provider's turn writer over its spool (a real SQLite file in a temporary directory): batching
every N turns, sessions kept apart, retries until stored, in order and once, the spool's bound, and
what a shutdown leaves for the next start. The stores are plain functions standing in for a server."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from dreamer.errors import PermanentBackendError, TransientBackendError
from dreamer.hermes_provider.spool import Batch, TurnSpool, spool_path
from dreamer.hermes_provider.turns import PARK_AFTER, TURN_SIDE_CHARS, TurnWriter, turn_text
from dreamer.retry import RetryPolicy

#: Backoff of milliseconds, so that a test of retries takes no real time.
FAST = RetryPolicy(max_attempts=1, base_delay_s=0.002, max_delay_s=0.01, retry_after_cap_s=0.01)


def writer(
    path: Path, store: Callable[[Batch], None], *, every_n: int = 1, max_turns: int = 10_000
) -> TurnWriter:
    return TurnWriter(store, TurnSpool(path, max_turns=max_turns), every_n=every_n, retry=FAST, poll_s=0.02)


def wait_until(done: Callable[[], bool], timeout_s: float = 30.0) -> None:
    """Wait for the writer thread to get somewhere (a wait, not a measurement: no time is asserted)."""
    deadline = time.monotonic() + timeout_s
    while not done():
        assert time.monotonic() < deadline, "the writer did not get there"
        time.sleep(0.005)


class Recorder:
    """A store that keeps each batch it took; ``fail`` decides, per call, whether to raise instead."""

    def __init__(self, fail: Callable[[Batch], Exception | None] = lambda batch: None) -> None:
        self.batches: list[Batch] = []
        self.calls = 0
        self.fail = fail
        self.lock = threading.Lock()

    def __call__(self, batch: Batch) -> None:
        with self.lock:
            self.calls += 1
            error = self.fail(batch)
            if error is not None:
                raise error
            self.batches.append(batch)

    @property
    def contents(self) -> list[str]:
        return [b.content for b in self.batches]

    @property
    def turns(self) -> list[str]:
        return [text for b in self.batches for text in b.texts]


@pytest.fixture
def spool_file(tmp_path: Path) -> Path:
    return spool_path(tmp_path / "home" / "dreamer", "bank-1")


class TestBatching:
    def test_turns_are_stored_together_every_n_and_the_rest_on_close(self, spool_file: Path) -> None:
        """Five turns with every_n 2: two stores of two turns, and the fifth stored at close."""
        store = Recorder()
        w = writer(spool_file, store, every_n=2)
        for i in range(5):
            w.add(f"turn {i}", "s1")
        w.close()
        assert store.contents == ["turn 0\n\nturn 1", "turn 2\n\nturn 3", "turn 4"]
        assert all(b.tags == ["session:s1"] for b in store.batches)
        assert w.stats.stored == 3 and w.depth().turns == 0

    def test_a_new_session_flushes_the_old_ones_turns_under_their_own_tag(self, spool_file: Path) -> None:
        """Turns of two sessions are never stored as one memory."""
        store = Recorder()
        w = writer(spool_file, store, every_n=10)
        w.add("a1", "a")
        w.add("b1", "b")
        w.close()
        assert [(b.content, b.tags) for b in store.batches] == [("a1", ["session:a"]), ("b1", ["session:b"])]

    def test_add_returns_while_the_store_is_stuck(self, spool_file: Path) -> None:
        """The agent's turn never waits for the server: 50 turns are spooled while a store hangs."""
        gate = threading.Event()
        store = Recorder(lambda batch: None if gate.wait(10) else TimeoutError("hung"))
        w = writer(spool_file, store)
        for i in range(50):
            w.add(f"t{i}", "s")
        assert w.depth().turns == 50 and not gate.is_set()
        gate.set()
        w.close(timeout_s=10)
        assert store.turns == [f"t{i}" for i in range(50)]


class TestRetries:
    def test_a_server_down_for_a_while_gets_every_turn_in_order_once(self, spool_file: Path) -> None:
        """200 turns while the store fails 60 times (a server down): once it answers, every turn is
        stored, in order, exactly once; the failures were retried, not dropped."""
        down = {"left": 60}

        def fail(batch: Batch) -> Exception | None:
            if down["left"] > 0:
                down["left"] -= 1
                return TransientBackendError("connection refused", operation="retain")
            return None

        store = Recorder(fail)
        w = writer(spool_file, store)
        for i in range(200):
            w.add(f"turn {i}", "s")
        wait_until(lambda: w.stats.stored == 200)
        w.close(timeout_s=30)
        assert store.turns == [f"turn {i}" for i in range(200)]
        assert len({b.document_id for b in store.batches}) == 200
        assert (w.stats.stored, w.stats.failed, w.stats.failed_attempts) == (200, 1, 60)
        assert w.stats.dropped == 0 and w.depth().turns == 0

    def test_a_batch_sent_again_after_a_crash_keeps_its_document_id(self, spool_file: Path) -> None:
        """The server took a batch but the process died before the spool forgot it: the next start
        sends it again under the same document id, which the server stores once."""
        spool = TurnSpool(spool_file)
        spool.add("s", "the turn", every_n=1)
        taken = spool.next_batch()
        assert taken is not None
        spool.close()  # the crash: sent, never marked done
        store = Recorder()
        w = writer(spool_file, store)
        w.start()
        w.close(timeout_s=10)
        assert [(b.document_id, b.content) for b in store.batches] == [(taken.document_id, "the turn")]

    def test_a_store_failing_at_shutdown_is_counted_and_the_turns_stay(
        self, spool_file: Path, caplog: pytest.LogCaptureFixture
    ) -> None:
        """A failing store is counted and never raised; shutdown does not wait for a server that just
        failed, and the turns stay in the spool, said so with the path."""
        store = Recorder(lambda batch: RuntimeError("server down"))
        w = writer(spool_file, store)
        w.add("x", "s")
        w.add("y", "s")
        w.close(timeout_s=10)
        assert w.stats.stored == 0 and w.stats.failed >= 1
        assert w.stats.unsaved_at_close == 2 and w.depth().turns == 2
        assert f"2 conversation turn(s) kept in {spool_file}" in caplog.text

    def test_a_hung_server_at_shutdown_costs_at_most_the_timeout_and_keeps_the_turns(
        self, spool_file: Path, caplog: pytest.LogCaptureFixture
    ) -> None:
        """With the store stuck (a server that never answers), close returns while the store is still
        blocked; the turns are counted, logged and kept, and the next start stores them in order."""
        gate = threading.Event()
        store = Recorder(lambda batch: None if gate.wait(30) else TimeoutError("hung"))
        w = writer(spool_file, store)
        for i in range(3):
            w.add(f"t{i}", "s")
        w.close(timeout_s=0.2)
        try:
            assert not gate.is_set() and w.stats.stored == 0
            assert w.stats.unsaved_at_close == 3
            assert (
                "3 conversation turn(s) kept in" in caplog.text and "stored at the next start" in caplog.text
            )
        finally:
            gate.set()
        wait_until(lambda: not w.running)
        again = writer(spool_file, store)  # the first store, once answered, is not sent again
        again.start()
        again.close(timeout_s=10)
        assert store.turns == ["t0", "t1", "t2"]

    def test_a_partial_group_left_by_a_dead_process_is_stored_at_the_next_start(
        self, spool_file: Path
    ) -> None:
        """every_n 3 and two turns spooled when the process died: the next start stores them as one
        memory instead of waiting for a third turn that will never come."""
        spool = TurnSpool(spool_file)
        spool.add("s", "a", every_n=3)
        spool.add("s", "b", every_n=3)
        spool.close()
        store = Recorder()
        w = writer(spool_file, store, every_n=3)
        w.start()
        w.close(timeout_s=10)
        assert store.contents == ["a\n\nb"]

    def test_a_turn_after_close_is_kept_for_the_next_start(self, spool_file: Path) -> None:
        """A turn synced after shutdown (Hermes may sync during exit) is not sent, but not lost."""
        store = Recorder()
        w = writer(spool_file, store)
        w.close()
        w.add("late", "s")
        assert store.batches == [] and w.depth().turns == 1

    def test_failure_messages_are_bounded(self, spool_file: Path) -> None:
        """A server down for a long time keeps only the last failures' messages, all counted."""
        count = {"n": 0}

        def fail(batch: Batch) -> Exception | None:
            count["n"] += 1
            return TransientBackendError(f"down {count['n']}") if count["n"] <= 100 else None

        w = writer(spool_file, Recorder(fail))
        w.add("t", "s")
        wait_until(lambda: w.stats.stored == 1)
        w.close(timeout_s=30)
        assert w.stats.failed_attempts == 100 and w.stats.stored == 1
        assert w.stats.errors == [f"down {i}" for i in range(81, 101)]


class TestRefusals:
    def test_a_batch_refused_for_good_is_set_aside_and_the_next_ones_are_stored(
        self, spool_file: Path, caplog: pytest.LogCaptureFixture
    ) -> None:
        """A 422 for one batch is tried PARK_AFTER times, then set aside (kept, counted, logged): it
        does not hold back the turns after it. The next start tries it once more."""

        def fail(batch: Batch) -> Exception | None:
            if "poison" in batch.content:
                return PermanentBackendError("HTTP 422: bad item", status=422, operation="retain")
            return None

        store = Recorder(fail)
        w = writer(spool_file, store)
        for text in ("ok 1", "poison", "ok 2"):
            w.add(text, "s")
        wait_until(lambda: w.stats.stored == 2)
        w.close(timeout_s=10)
        assert store.turns == ["ok 1", "ok 2"] and store.calls == 2 + PARK_AFTER
        assert w.stats.parked == 1 and w.depth().parked == 1
        assert "were refused 3 times (HTTP 422: bad item); they are set aside in" in caplog.text
        healed = Recorder()
        again = writer(spool_file, healed)
        again.start()
        again.close(timeout_s=10)
        assert healed.turns == ["poison"] and again.depth().turns == 0

    def test_a_wrong_key_is_not_a_refusal_of_the_batch(self, spool_file: Path) -> None:
        """401 refuses every batch alike: nothing is set aside, the turns wait in order until the key
        works."""
        left = {"n": PARK_AFTER * 3}

        def fail(batch: Batch) -> Exception | None:
            if left["n"] > 0:
                left["n"] -= 1
                return PermanentBackendError("HTTP 401", status=401, operation="retain")
            return None

        store = Recorder(fail)
        w = writer(spool_file, store)
        for i in range(3):
            w.add(f"t{i}", "s")
        wait_until(lambda: w.stats.stored == 3)
        w.close(timeout_s=30)
        assert store.turns == ["t0", "t1", "t2"] and w.stats.parked == 0


class TestBound:
    def test_a_full_spool_drops_the_oldest_counts_them_and_warns_once(
        self, spool_file: Path, caplog: pytest.LogCaptureFixture
    ) -> None:
        """With the server down and room for 5 turns, 12 turns keep the newest 5; the 7 dropped are
        counted, one warning says the spool is full, and one says how many went once it drains."""
        up = threading.Event()
        store = Recorder(lambda batch: None if up.is_set() else TransientBackendError("down"))
        w = writer(spool_file, store, max_turns=5)
        for i in range(12):
            w.add(f"t{i}", "s")
        assert w.stats.dropped == 7 and w.depth().turns == 5
        assert caplog.text.count("is full (5 turns") == 1
        up.set()
        wait_until(lambda: w.stats.stored == 5)
        w.close(timeout_s=30)
        assert store.turns == [f"t{i}" for i in range(7, 12)]
        assert "7 conversation turn(s) were dropped, oldest first" in caplog.text

    def test_set_aside_batches_are_dropped_before_waiting_ones(self, spool_file: Path) -> None:
        """When the spool is full, a batch set aside after refusals goes before a turn that may
        still be stored."""
        spool = TurnSpool(spool_file, max_turns=3)
        spool.add("s", "refused", every_n=1)
        batch = spool.next_batch()
        assert batch is not None
        spool.failed(batch.id, "HTTP 422", park=True)
        for text in ("a", "b", "c"):
            assert spool.add("s", text, every_n=1) == (1 if text == "c" else 0)
        store = Recorder()
        w = TurnWriter(store, spool, retry=FAST, poll_s=0.02)
        w.start()
        w.close(timeout_s=10)
        assert store.turns == ["a", "b", "c"]

    def test_a_turn_the_spool_cannot_keep_is_counted_and_said_once(
        self, tmp_path: Path, caplog: pytest.LogCaptureFixture
    ) -> None:
        """A spool that cannot be written (here its directory is a file) costs the turns, never the
        agent's turn: each is counted, one warning says so."""
        (tmp_path / "home").write_text("not a directory", encoding="utf-8")
        w = writer(tmp_path / "home" / "turns.sqlite3", Recorder())
        for i in range(3):
            w.add(f"t{i}", "s")
        w.close(timeout_s=1)
        assert w.stats.lost == 3
        assert caplog.text.count("could not be spooled") == 1


class TestTwoWriters:
    def test_two_writers_on_one_spool_never_send_a_turn_twice(self, spool_file: Path) -> None:
        """Two writers (two connections, as two agent processes would have) add 100 turns each at
        once: one sends, and every turn reaches the store exactly once."""
        store = Recorder()
        writers = [writer(spool_file, store), writer(spool_file, store)]

        def feed(w: TurnWriter, name: str) -> None:
            for i in range(100):
                w.add(f"{name} {i}", name)

        threads = [threading.Thread(target=feed, args=(w, n)) for w, n in zip(writers, "ab", strict=True)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for w in writers:
            w.close(timeout_s=30)
        assert sorted(store.turns) == sorted(f"{n} {i}" for n in "ab" for i in range(100))
        assert len({b.document_id for b in store.batches}) == 200
        for name in "ab":
            assert [t for t in store.turns if t.startswith(name)] == [f"{name} {i}" for i in range(100)]


class TestTurnText:
    def test_control_characters_and_huge_sides_are_tamed(self) -> None:
        """A turn is two lines: escapes and newlines flattened, each side cut at its limit."""
        text = turn_text("hi\x1b[31m\nthere", "x" * (TURN_SIDE_CHARS * 3))
        user, assistant = text.split("\n")
        assert "\x1b" not in user and user.startswith("User: hi")
        assert len(assistant) < TURN_SIDE_CHARS + 20 and assistant.endswith("…")
