"""Conversation turns stored as they happen, as Hermes' own Hindsight plugin does (``auto_retain``).

``sync_turn`` never blocks the agent: it hands the turn to one writer thread through a bounded
queue. Every ``every_n`` turns the buffered turns are stored together as one memory in the
profile's default bank, tagged ``session:<id>``; the profile bank is what Dreamer's roll-up
consolidates. A failed store is logged and counted, never raised into the agent's turn.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from dreamer.text import printable

log = logging.getLogger("dreamer.hermes_provider")

#: Turns waiting for the writer; beyond this the oldest waiting turn is dropped (and counted).
QUEUE_LIMIT = 256
#: A turn's side is cut to this many characters: a pasted log is not a memory.
TURN_SIDE_CHARS = 4_000

#: Stores one memory: (content, tags) -> None; raises on failure.
Store = Callable[[str, list[str]], None]


@dataclass
class TurnStats:
    """What the writer did, for tests and the provider's diagnostics."""

    stored: int = 0
    failed: int = 0
    dropped: int = 0
    #: Turns still queued or being stored when shutdown stopped waiting for them.
    unsaved_at_close: int = 0
    #: The last few failures' messages (a server down for weeks must not grow this without end).
    errors: list[str] = field(default_factory=list)


#: How many failure messages :class:`TurnStats` keeps.
ERRORS_KEPT = 20


def turn_text(user: str, assistant: str) -> str:
    """One turn as two labelled lines, each side cut and freed of control characters."""

    def side(text: str) -> str:
        flat = " ".join(printable(str(text)).split())
        return flat if len(flat) <= TURN_SIDE_CHARS else flat[:TURN_SIDE_CHARS] + " …"

    return f"User: {side(user)}\nAssistant: {side(assistant)}"


class TurnWriter:
    """A queue and one daemon thread that stores buffered turns every ``every_n`` turns."""

    def __init__(self, store: Store, *, every_n: int = 1, limit: int = QUEUE_LIMIT) -> None:
        self._store = store
        self._every_n = max(1, every_n)
        self._queue: queue.Queue[tuple[str, str] | None] = queue.Queue(maxsize=limit)
        self._thread: threading.Thread | None = None
        self._closed = threading.Event()
        self._lock = threading.Lock()
        #: Turns accepted and neither stored, failed nor dropped yet.
        self._pending = 0
        self.stats = TurnStats()

    def add(self, text: str, session_id: str) -> None:
        """Queue one turn; returns at once. After :meth:`close` turns are ignored."""
        if self._closed.is_set():
            return
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="dreamer-turns", daemon=True)
                self._thread.start()
        item = (text, session_id)
        while True:
            try:
                self._queue.put_nowait(item)
                with self._lock:
                    self._pending += 1
                return
            except queue.Full:
                try:
                    self._queue.get_nowait()
                    with self._lock:
                        self._pending -= 1
                    self.stats.dropped += 1
                except queue.Empty:
                    pass

    def close(self, timeout_s: float = 5.0) -> None:
        """Store what is buffered and stop the writer, waiting at most ``timeout_s`` in all. Turns
        the writer has not stored by then are counted (``unsaved_at_close``) and logged."""
        if self._closed.is_set():
            return
        self._closed.set()
        deadline = time.monotonic() + timeout_s
        with self._lock:
            thread = self._thread
        if thread is None:
            return
        with contextlib.suppress(queue.Full):  # the writer is stuck: what is queued is counted below
            self._queue.put(None, timeout=timeout_s)
        thread.join(max(0.0, deadline - time.monotonic()))
        with self._lock:
            unsaved = self._pending if thread.is_alive() else 0
        if unsaved:
            self.stats.unsaved_at_close = unsaved
            log.warning(
                "Dreamer memory: %d conversation turn(s) were not stored: the memory server did not "
                "answer within %g s of shutdown",
                unsaved,
                timeout_s,
            )

    def _run(self) -> None:
        buffered: list[str] = []
        session = ""
        while True:
            item = self._queue.get()
            if item is not None:
                text, session_id = item
                if session_id != session and buffered:
                    self._flush(buffered, session)
                    buffered = []
                session = session_id
                buffered.append(text)
                if len(buffered) < self._every_n:
                    continue
            if buffered:
                self._flush(buffered, session)
                buffered = []
            if item is None:
                return

    def _flush(self, turns: list[str], session_id: str) -> None:
        tags = [f"session:{session_id}"] if session_id else []
        try:
            self._store("\n\n".join(turns), tags)
            self.stats.stored += 1
        except Exception as exc:  # the agent's turn must never see a memory failure
            self.stats.failed += 1
            self.stats.errors = [*self.stats.errors[-(ERRORS_KEPT - 1) :], str(exc)]
            log.warning("Dreamer memory: a conversation turn was not stored: %s", exc)
        finally:
            with self._lock:
                self._pending -= len(turns)
