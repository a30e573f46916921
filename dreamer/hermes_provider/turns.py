"""Conversation turns stored as they happen, as Hermes' own Hindsight plugin does (``auto_retain``).

``sync_turn`` never blocks the agent: it hands the turn to one writer thread through a bounded
queue. Every ``every_n`` turns the buffered turns are stored together as one memory in the
profile's default bank, tagged ``session:<id>``; the profile bank is what Dreamer's roll-up
consolidates. A failed store is logged and counted, never raised into the agent's turn.
"""

from __future__ import annotations

import logging
import queue
import threading
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
    errors: list[str] = field(default_factory=list)


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
                return
            except queue.Full:
                try:
                    self._queue.get_nowait()
                    self.stats.dropped += 1
                except queue.Empty:
                    pass

    def close(self, timeout_s: float = 5.0) -> None:
        """Store what is buffered and stop the writer, waiting at most ``timeout_s``."""
        if self._closed.is_set():
            return
        self._closed.set()
        with self._lock:
            thread = self._thread
        if thread is None:
            return
        try:
            self._queue.put(None, timeout=timeout_s)
        except queue.Full:
            log.warning("Dreamer memory: turns still queued at shutdown were not stored")
            return
        thread.join(timeout_s)

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
            self.stats.errors.append(str(exc))
            log.warning("Dreamer memory: a conversation turn was not stored: %s", exc)
