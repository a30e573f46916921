"""The embedded store's connections, on a real SQLite file: a read allowed the spare connection runs
beside a call on the main one; every other call waits for the main one; errors on either come out
of the error tree, naming the file; closing closes both.

Two calls "at once" are shown by each waiting (a barrier, bounded by a deadline) until the other
has started: one after the other, they would wait for ever.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import anyio
import pytest

from dreamer.backends.base import RetainItem
from dreamer.backends.embedded.backend import EmbeddedBackend
from dreamer.backends.embedded.connections import Connections
from dreamer.errors import BackendError, PermanentBackendError, TransientBackendError

DEADLINE_S = 10


@pytest.fixture
def connections(tmp_path: Path) -> Iterator[Connections]:
    opened = Connections(tmp_path / "memory.sqlite3")
    opened.run("open", lambda conn: conn.execute("CREATE TABLE t (x)"))
    try:
        yield opened
    finally:
        opened.close()


def _both_inside(barrier: threading.Barrier) -> object:
    def work(conn: sqlite3.Connection) -> int:
        barrier.wait()  # BrokenBarrierError after the deadline when the other never gets in
        return id(conn)

    return work


def test_a_spare_read_runs_beside_a_call_on_the_main_connection(connections: Connections) -> None:
    barrier = threading.Barrier(2, timeout=DEADLINE_S)
    with ThreadPoolExecutor(2) as pool:
        first = pool.submit(connections.run, "recall", _both_inside(barrier), spare=True)
        second = pool.submit(connections.run, "recall", _both_inside(barrier), spare=True)
        conns = {first.result(), second.result()}
    assert len(conns) == 2, "the two reads ran on two connections"


def test_a_read_sent_to_the_spare_first_leaves_the_main_connection_free(connections: Connections) -> None:
    """``spare_first``: alone it reads on the spare, so the main connection stays free for a call
    that needs it; while another holds the spare it reads on the main connection, beside it."""
    main = connections.run("open", id)
    alone = connections.run("recall", id, spare_first=True)
    assert alone != main
    barrier = threading.Barrier(2, timeout=DEADLINE_S)
    with ThreadPoolExecutor(2) as pool:
        first = pool.submit(connections.run, "recall", _both_inside(barrier), spare_first=True)
        second = pool.submit(connections.run, "recall", _both_inside(barrier), spare_first=True)
        conns = {first.result(), second.result()}
    assert conns == {main, alone}, "the two reads ran on the two connections"


def test_a_call_not_allowed_the_spare_waits_for_the_main_connection(connections: Connections) -> None:
    inside, leave = threading.Event(), threading.Event()
    order: list[str] = []

    def holding(conn: sqlite3.Connection) -> None:
        inside.set()
        assert leave.wait(DEADLINE_S)
        order.append("first done")

    with ThreadPoolExecutor(2) as pool:
        first = pool.submit(connections.run, "retain", holding)
        assert inside.wait(DEADLINE_S)
        second = pool.submit(connections.run, "retain", lambda conn: order.append("second ran"))
        threading.Timer(0.2, leave.set).start()
        first.result(), second.result()
    assert order == ["first done", "second ran"]


def test_the_spare_is_opened_only_when_needed(connections: Connections, tmp_path: Path) -> None:
    """One read at a time stays on the main connection: a run that never recalls two cards at once
    holds one connection, as before."""
    seen = {connections.run("recall", id, spare=True) for _ in range(5)}
    assert len(seen) == 1 and seen == {connections.run("retain", id)}


def test_errors_on_the_spare_connection_are_the_error_tree_s(connections: Connections) -> None:
    inside, leave = threading.Event(), threading.Event()

    def holding(conn: sqlite3.Connection) -> None:
        inside.set()
        assert leave.wait(DEADLINE_S)

    def busy(conn: sqlite3.Connection) -> None:
        raise sqlite3.OperationalError("database is locked")

    def broken(conn: sqlite3.Connection) -> None:
        raise sqlite3.DatabaseError("database disk image is malformed")

    with ThreadPoolExecutor(1) as pool:
        held = pool.submit(connections.run, "retain", holding)
        assert inside.wait(DEADLINE_S)
        try:
            with pytest.raises(TransientBackendError):
                connections.run("recall", busy, spare=True)
            with pytest.raises(BackendError, match=r"memory\.sqlite3") as caught:
                connections.run("recall", broken, spare=True)
            assert not isinstance(caught.value, TransientBackendError)
        finally:
            leave.set()
            held.result()


def test_a_spare_that_cannot_be_opened_names_the_file(tmp_path: Path) -> None:
    """The main connection is open; the file is then replaced by a folder (its WAL files too, which
    would otherwise still give a new connection the old pages)."""
    path = tmp_path / "memory.sqlite3"
    connections = Connections(path)
    inside, leave = threading.Event(), threading.Event()

    def holding(conn: sqlite3.Connection) -> None:
        inside.set()
        assert leave.wait(DEADLINE_S)

    try:
        with ThreadPoolExecutor(1) as pool:
            held = pool.submit(connections.run, "retain", holding)
            assert inside.wait(DEADLINE_S)
            try:
                for left in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
                    left.unlink(missing_ok=True)
                path.mkdir()
                with pytest.raises(BackendError, match=r"memory\.sqlite3"):
                    connections.run("recall", lambda conn: None, spare=True)
            finally:
                leave.set()
                held.result()
    finally:
        connections.close()


def test_closing_closes_both_and_refuses_every_later_call(connections: Connections) -> None:
    barrier = threading.Barrier(2, timeout=DEADLINE_S)
    opened: list[sqlite3.Connection] = []

    def keep(conn: sqlite3.Connection) -> None:
        opened.append(conn)
        barrier.wait()

    with ThreadPoolExecutor(2) as pool:
        for future in [pool.submit(connections.run, "recall", keep, spare=True) for _ in range(2)]:
            future.result()
    connections.close()
    connections.close()
    for conn in opened:
        with pytest.raises(sqlite3.ProgrammingError):
            conn.execute("SELECT 1")
    for spare in (True, False):
        with pytest.raises(PermanentBackendError, match="closed"):
            connections.run("recall", lambda conn: None, spare=spare)


async def test_the_backend_s_recalls_run_two_at_once_and_find_what_one_at_a_time_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Full-text recalls through the backend: two at once, each the hits it gets alone. Their
    search is wrapped to wait for the other to have started (a spy, the store is real)."""
    import dreamer.backends.embedded.backend as backend_module

    store = await EmbeddedBackend.open(tmp_path / "memory.sqlite3")
    try:
        texts = [
            f"Caroline keeps {thing} on host nas0{i}"
            for i, thing in enumerate(["Grafana", "restic", "nginx"])
        ]
        await store.retain("global", [RetainItem(text) for text in texts])
        alone = [await store.recall("global", text) for text in texts[:2]]
        barrier = threading.Barrier(2, timeout=DEADLINE_S)
        search = backend_module.full_text_recall

        def waiting(*args: object, **kwargs: object) -> object:
            barrier.wait()
            return search(*args, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(backend_module, "full_text_recall", waiting)
        together: list[object] = [None, None]

        async def recall(index: int) -> None:
            together[index] = await store.recall("global", texts[index])

        async with anyio.create_task_group() as group:
            for index in range(2):
                group.start_soon(recall, index)
        assert together == alone and all(alone)
    finally:
        await store.aclose()


async def test_two_hybrid_recalls_read_their_full_text_side_at_once_and_find_what_one_does_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With an embedder: each recall's full-text side waits for the other's to have started (a spy
    around the real search), so the two ran on two connections; each finds, with its cosines and
    scores, what it finds alone. The vector side then searches the cache under the first lock."""
    import dreamer.backends.embedded.backend as backend_module
    from tests.support.embedding_model import local_embedder

    store = await EmbeddedBackend.open(tmp_path / "memory.sqlite3", embedder=local_embedder())
    try:
        texts = [
            f"Caroline keeps {thing} on host nas0{i}"
            for i, thing in enumerate(["Grafana", "restic", "nginx", "the family photos"])
        ]
        await store.retain("global", [RetainItem(text) for text in texts])
        alone = [await store.recall("global", text, limit=3) for text in texts[:2]]
        barrier = threading.Barrier(2, timeout=DEADLINE_S)
        search = backend_module.lexical_rows
        connections: list[int] = []

        def waiting(conn: sqlite3.Connection, *args: object, **kwargs: object) -> object:
            connections.append(id(conn))
            barrier.wait()
            return search(conn, *args, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(backend_module, "lexical_rows", waiting)
        together: list[object] = [None, None]

        async def recall(index: int) -> None:
            together[index] = await store.recall("global", texts[index], limit=3)

        async with anyio.create_task_group() as group:
            for index in range(2):
                group.start_soon(recall, index)
        assert together == alone and all(alone)
        assert all(item.semantic is not None for hits in alone for item in hits), "hybrid hits, cosines"
        assert len(set(connections)) == 2
    finally:
        await store.aclose()

