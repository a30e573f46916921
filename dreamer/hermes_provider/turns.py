"""Conversation turns stored as they happen, as Hermes' own Hindsight plugin does (``auto_retain``).

``sync_turn`` never waits for the network: it writes the turn to the :class:`~.spool.TurnSpool` (a
SQLite file) and returns. One writer thread stores the spooled turns, every ``every_n`` turns of a
session as one memory of the profile's default bank tagged ``session:<id>``, oldest first; a failed
store is retried with capped exponential backoff, never skipped, never raised into the agent's turn.
What a shutdown does not store stays in the spool and is stored at the next start. Why:
``docs/design/hermes-provider.md``.
"""

from __future__ import annotations

import logging
import random
import sqlite3
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from dreamer.errors import DreamerError, PermanentBackendError, PolicyError
from dreamer.hermes_provider.spool import Batch, SpoolDepth, TurnSpool
from dreamer.retry import RetryPolicy, backoff_delay
from dreamer.text import printable

log = logging.getLogger("dreamer.hermes_provider")

#: A turn's side is cut to this many characters: a pasted log is not a memory.
TURN_SIDE_CHARS = 4_000
#: Backoff between failed stores: 1 s doubling to 60 s, full jitter; a server's Retry-After is
#: honoured up to 60 s. ``max_attempts`` is not used: a turn is retried until it is stored.
TURN_RETRY = RetryPolicy(max_attempts=1, base_delay_s=1.0, max_delay_s=60.0, retry_after_cap_s=60.0)
#: A batch the server refuses (a 4xx other than 401/403, a refusal by the policy) this many times
#: is set aside in the spool, so that it does not hold back the turns after it.
PARK_AFTER = 3
#: How often the sending writer looks for turns other processes spooled, and a writer that does
#: not send tries to become the one that does.
POLL_S = 1.0

#: Stores one batch as one memory (its content, tags, document id and time); raises on failure.
Store = Callable[[Batch], None]


@dataclass
class TurnStats:
    """What the writer did, for tests and the provider's diagnostics."""

    #: Batches stored.
    stored: int = 0
    #: Batches a store failed for (each counted once, however often it was retried).
    failed: int = 0
    #: Failed store attempts in all.
    failed_attempts: int = 0
    #: Batches set aside after :data:`PARK_AFTER` refusals.
    parked: int = 0
    #: Turns dropped, oldest first, to keep the spool within its limits.
    dropped: int = 0
    #: Turns that could not be written to the spool (a full disk), so were never queued.
    lost: int = 0
    #: Turns left in the spool when shutdown stopped waiting (stored at the next start).
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


def refused(exc: BaseException) -> bool:
    """Whether ``exc`` refuses this batch for good (then it is set aside after :data:`PARK_AFTER`
    tries), rather than saying the server cannot take anything now (then everything waits).

    A wrong key (401/403) refuses every batch alike: the turns wait for the key to be fixed.
    """
    if isinstance(exc, PermanentBackendError):
        return exc.status not in (401, 403)
    if isinstance(exc, PolicyError):
        return True
    # Transient errors, a server's garbled answer and OS errors pass; an unexpected bug does not.
    return not isinstance(exc, DreamerError | OSError | TimeoutError)


class TurnWriter:
    """Spools turns and stores them from one daemon thread, in order, every ``every_n`` turns."""

    def __init__(
        self,
        store: Store,
        spool: TurnSpool,
        *,
        every_n: int = 1,
        retry: RetryPolicy = TURN_RETRY,
        rand: Callable[[], float] = random.random,
        poll_s: float = POLL_S,
    ) -> None:
        self._store = store
        self.spool = spool
        self._every_n = max(1, every_n)
        self._retry = retry
        self._rand = rand
        self._poll_s = poll_s
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._closing = threading.Event()
        self._thread: threading.Thread | None = None
        self._deadline = float("inf")
        #: The session of the last turn added here: its turns are sealed when it changes.
        self._session: str | None = None
        #: Turns dropped since the spool last overflowed with no store between (one warning each time).
        self._overflow = 0
        self._lost_warned = False
        self._spool_warned = False
        self._close_called = False
        #: Whether this writer became the one that sends the spool's batches.
        self._sender = False
        self.stats = TurnStats()

    def depth(self) -> SpoolDepth:
        """What waits in the spool now (this process's turns and any other's)."""
        return self.spool.depth()

    @property
    def running(self) -> bool:
        """Whether the writer thread still runs (after :meth:`close`, a store that hangs holds it)."""
        thread = self._thread
        return thread is not None and thread.is_alive()

    def start(self) -> None:
        """Start the writer: turns a killed or timed-out process left are sealed and stored first,
        batches set aside get one more try. :meth:`add` starts it too."""
        with self._lock:
            if self._thread is not None or self._close_called:
                return
            self._thread = threading.Thread(target=self._run, name="dreamer-turns", daemon=True)
        try:
            self.spool.seal_open(self._every_n)
            unparked = self.spool.unpark()
            waiting = self.spool.depth().turns
        except (sqlite3.Error, OSError) as exc:
            log.warning("Dreamer memory: the turn spool %s cannot be read: %s", self.spool, exc)
        else:
            if waiting:
                log.info(
                    "Dreamer memory: %d conversation turn(s) from an earlier run wait in %s (%d set "
                    "aside before); storing them first",
                    waiting,
                    self.spool,
                    unparked,
                )
        self._thread.start()

    def add(self, text: str, session_id: str) -> None:
        """Spool one turn and return; never raises. After :meth:`close` the turn is spooled for the
        next start."""
        if self._thread is None and not self._close_called:
            self.start()
        with self._lock:
            previous, self._session = self._session, session_id
        try:
            dropped = self.spool.add(session_id, text, every_n=self._every_n, previous_session=previous)
        except (sqlite3.Error, OSError) as exc:
            with self._lock:
                self.stats.lost += 1
                first, self._lost_warned = not self._lost_warned, True
            if first:
                log.warning(
                    "Dreamer memory: a conversation turn could not be spooled in %s and is lost (%s); "
                    "the next ones are counted until one is spooled again",
                    self.spool,
                    exc,
                )
            return
        with self._lock:
            recovered, self._lost_warned, lost = self._lost_warned, False, self.stats.lost
        if recovered:
            log.warning("Dreamer memory: conversation turns are spooled again (%d lost in all)", lost)
        if dropped:
            self._dropped(dropped)
        thread = self._thread
        if self._close_called and (thread is None or not thread.is_alive()):
            self.spool.close()  # kept for the next start; no open file left behind
        self._wake.set()

    def close(self, timeout_s: float = 5.0) -> None:
        """Store what the spool holds, waiting at most ``timeout_s`` and not at all once a store
        fails; what is left stays in the spool, counted (``unsaved_at_close``) and logged. A writer
        whose spool another process sends from leaves its turns to that process at once."""
        with self._lock:
            if self._close_called:
                return
            self._close_called = True
            self._deadline = time.monotonic() + timeout_s
            thread, session = self._thread, self._session
        try:
            if thread is not None and session is not None:
                self.spool.seal_open(self._every_n, [session])
        except (sqlite3.Error, OSError) as exc:
            log.warning("Dreamer memory: the turn spool %s cannot be written: %s", self.spool, exc)
        self._closing.set()
        if thread is None:
            self.spool.close()
            return
        self._wake.set()
        thread.join(max(0.0, self._deadline - time.monotonic()))
        try:
            left = self.spool.depth()
        except (sqlite3.Error, OSError):
            left = SpoolDepth()
        with self._lock:
            self.stats.unsaved_at_close = left.turns
            overflow, self._overflow = self._overflow, 0
        if overflow:
            self._overflow_ended(overflow)
        if left.turns and not self.spool.durable:
            log.warning(
                "Dreamer memory: %d conversation turn(s) were not stored: the turn spool is in memory "
                "only, so they are lost with this process",
                left.turns,
            )
        elif left.turns and not self._sender:
            log.info(
                "Dreamer memory: %d conversation turn(s) wait in %s, which another agent process sends "
                "from; it, or the next start, stores them",
                left.turns,
                self.spool,
            )
        elif left.turns:
            log.warning(
                "Dreamer memory: %d conversation turn(s) kept in %s; they are stored at the next start",
                left.turns,
                self.spool,
            )
        if not thread.is_alive():
            self.spool.close()

    # --- the writer thread --------------------------------------------------------------------------

    def _run(self) -> None:
        try:
            while not self.spool.claim_sending():
                # Another process sends, and stores these turns too; at a shutdown, one last look.
                if self._closing.wait(self._poll_s):
                    if not self.spool.claim_sending():
                        return
                    break
            self._sender = True
            self._drain()
        except Exception:  # the agent must never see the writer fail; the turns stay spooled
            log.exception("Dreamer memory: the turn writer stopped; the turns stay in %s", self.spool)
        finally:
            self.spool.release_sending()
            if self._closing.is_set():
                self.spool.close()

    def _drain(self) -> None:
        failures = 0
        down_since = 0.0
        while time.monotonic() < self._deadline:
            batch = self._next()
            if batch is None:
                if self._closing.is_set():
                    return
                self._wake.wait(self._poll_s)
                self._wake.clear()
                continue
            closing = self._closing.is_set()
            try:
                self._store(batch)
            except Exception as exc:  # the agent's turn must never see a memory failure
                failures += 1
                if failures == 1:
                    down_since = time.monotonic()
                delay = backoff_delay(self._retry, failures, getattr(exc, "retry_after", None), self._rand)
                self._failed(batch, exc, failures, delay)
                # At shutdown nothing waits for a server that just failed: the turns stay spooled.
                # A shutdown during the backoff gets one more try.
                if closing:
                    return
                self._closing.wait(delay)
                continue
            self._stored(batch, failures, down_since)
            failures = 0

    def _next(self) -> Batch | None:
        try:
            return self.spool.next_batch()
        except (sqlite3.Error, OSError) as exc:
            with self._lock:
                first, self._spool_warned = not self._spool_warned, True
            (log.warning if first else log.debug)(
                "Dreamer memory: the turn spool %s cannot be read: %s", self.spool, exc
            )
            return None

    def _stored(self, batch: Batch, failures: int, down_since: float) -> None:
        try:
            self.spool.done(batch.id)
        except (sqlite3.Error, OSError) as exc:  # sent again later under the same document id: no copy
            log.warning("Dreamer memory: the turn spool %s cannot be written: %s", self.spool, exc)
        with self._lock:
            self.stats.stored += 1
            overflow, self._overflow = self._overflow, 0
        if failures:
            log.warning(
                "Dreamer memory: conversation turns are stored again, after %d failed attempt(s) over %.0f s",
                failures,
                time.monotonic() - down_since,
            )
        if overflow:
            self._overflow_ended(overflow)

    def _failed(self, batch: Batch, exc: Exception, failures: int, delay: float) -> None:
        message = str(exc) or type(exc).__name__
        park = refused(exc) and batch.attempts + 1 >= PARK_AFTER
        try:
            self.spool.failed(batch.id, message, park=park)
        except (sqlite3.Error, OSError) as spool_exc:
            log.warning("Dreamer memory: the turn spool %s cannot be written: %s", self.spool, spool_exc)
        with self._lock:
            self.stats.failed_attempts += 1
            self.stats.failed += batch.attempts == 0
            self.stats.parked += park
            self.stats.errors = [*self.stats.errors[-(ERRORS_KEPT - 1) :], message]
        if park:
            log.warning(
                "Dreamer memory: %d conversation turn(s) of session %r were refused %d times (%s); they "
                "are set aside in %s and tried again at the next start",
                len(batch.texts),
                batch.session,
                batch.attempts + 1,
                message,
                self.spool,
            )
        elif failures == 1:
            log.warning(
                "Dreamer memory: conversation turns are not being stored (%s); they wait in %s and are "
                "retried, next in %.1f s",
                message,
                self.spool,
                delay,
            )
        else:
            log.debug("Dreamer memory: turn store failed again (%s); next try in %.1f s", message, delay)

    def _dropped(self, count: int) -> None:
        with self._lock:
            self.stats.dropped += count
            first = self._overflow == 0
            self._overflow += count
        if first:
            log.warning(
                "Dreamer memory: the turn spool %s is full (%d turns or %d MiB): the oldest turns are "
                "dropped until the memory server takes turns again",
                self.spool,
                self.spool.max_turns,
                self.spool.max_bytes // (1024 * 1024),
            )

    def _overflow_ended(self, count: int) -> None:
        log.warning(
            "Dreamer memory: %d conversation turn(s) were dropped, oldest first, while the turn spool %s "
            "was full",
            count,
            self.spool,
        )
