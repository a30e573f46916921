"""The provider's work, without Hermes: tool schemas, tool calls, the system-prompt block and the
per-turn recall, all through the read side's policy and router.

Hermes calls a provider from its own threads and expects strings back; each call here runs the
async router on a fresh event loop in a thread of its own, opening and closing a backend around
it, so no loop or connection is shared between Hermes' threads. Why, and what the agent sees:
``docs/design/hermes-provider.md``.
"""

from __future__ import annotations

import json
import logging
import os
import re
import sqlite3
import stat
import threading
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import anyio

from dreamer.backends.base import MemoryBackend
from dreamer.config import Config
from dreamer.errors import BackendError, DreamerError, PolicyError
from dreamer.hermes_provider.logscrub import scrub_http_logs
from dreamer.hermes_provider.settings import ProviderSettings
from dreamer.hermes_provider.spool import Batch, TurnSpool, spool_path
from dreamer.hermes_provider.turns import TURN_RETRY, TurnWriter, turn_text
from dreamer.jobs.open import StateNeed, open_for
from dreamer.readside.answers import RecallAnswer, ReflectAnswer, RetainAnswer, failure_reason
from dreamer.readside.policy import BankPolicy
from dreamer.readside.prelude import prelude
from dreamer.readside.router import BankRouter
from dreamer.readside.tools import HINDSIGHT_TOOLS, policy_tool_schemas, run_tool_call
from dreamer.retry import RetryPolicy
from dreamer.threats import withhold_lines

__all__ = ["DeadlineExceeded", "DreamerMemory", "TurnRecall"]

_T = TypeVar("_T")
#: What a session id may keep in its ``session:<id>`` tag.
_SESSION_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")

#: How long the per-turn recall may take in all: Hermes waits 8 s for a provider, and a turn
#: should not wait that long for memory.
PREFETCH_TIMEOUT_S = 3.0
#: Each bank's share of a recall tool call; a slower bank is reported missing.
RECALL_BANK_TIMEOUT_S = 30.0
#: A query longer than this is cut before the per-turn recall (Hermes cuts at 800).
PREFETCH_QUERY_CHARS = 800
#: The peer card read from its file is cut at this many characters beyond its budget (the frame).
_CARD_FRAME_CHARS = 400

BackendOpener = Callable[[Config], MemoryBackend]

log = logging.getLogger("dreamer.hermes_provider")


class DeadlineExceeded(Exception):
    """The whole call missed its deadline; it goes on in the background and its answer is dropped."""


@dataclass(frozen=True, slots=True)
class TurnRecall:
    """What the per-turn recall injects: its text ("" for nothing) and how many memories the text
    shows; a withheld hit, a missing bank's note and the note of a recall skipped at its deadline
    are not memories."""

    text: str = ""
    memories: int = 0


class DreamerMemory:
    """Dreamer's banks as Hermes' memory tools, for one configuration and one profile."""

    def __init__(
        self,
        settings: ProviderSettings,
        *,
        opener: BackendOpener | None = None,
        prefetch_timeout_s: float = PREFETCH_TIMEOUT_S,
        recall_bank_timeout_s: float = RECALL_BANK_TIMEOUT_S,
        turn_retry: RetryPolicy = TURN_RETRY,
        store_turns: bool = True,
    ) -> None:
        """``store_turns`` False: no turn spool is opened and no turn is stored (an instance that
        only shows its tools and prompt block, Hermes' ``initialize_for_inspection``)."""
        self.settings = settings
        scrub_http_logs(settings.config.secrets())
        self.policy = BankPolicy(settings.config, settings.profile)
        self.opener = opener
        self.prefetch_timeout_s = prefetch_timeout_s
        self.recall_bank_timeout_s = recall_bank_timeout_s
        self.turns: TurnWriter | None = None
        self._no_turns = "not stored (auto_retain is off, or no writable default bank)"
        if not store_turns:
            self._no_turns = "not stored by this instance (it only shows the tools and the prompt block)"
        elif settings.auto_retain and self.policy.default_for("retain") is not None:
            self.turns = TurnWriter(
                self._store_turns,
                self._turn_spool(),
                every_n=settings.retain_every_n_turns,
                retry=turn_retry,
            )
        elif settings.auto_retain:
            log.warning(
                "Dreamer memory: conversation turns will not be stored (%s); name a writable bank "
                "as the profile's bank or topology.default_bank, or set auto_retain to false",
                self.policy.no_default_reason("retain"),
            )

    @property
    def config(self) -> Config:
        return self.settings.config

    def _turn_spool(self) -> TurnSpool:
        """The spool of the default bank: in the Hermes home, else in Dreamer's state directory; in
        memory only (said so) when neither can be written."""
        default = self.policy.resolve(None, "retain")
        settings = self.settings
        directory = settings.hermes_home / "dreamer" if settings.hermes_home else settings.config.state_dir
        spool = TurnSpool(spool_path(directory, default.bank_id))
        try:
            spool.open()
        except (OSError, sqlite3.Error) as exc:
            log.warning(
                "Dreamer memory: the turn spool %s cannot be used (%s); conversation turns are kept in "
                "memory only, so an exit loses those not yet stored: make %s writable, or move the file "
                "aside",
                spool.path,
                getattr(exc, "strerror", None) or exc,
                directory,
            )
            return TurnSpool(None)
        return spool

    # --- what the model is offered ---------------------------------------------------------------

    def tool_schemas(self) -> list[dict[str, Any]]:
        """The bare function schemas (``{"name", "description", "parameters"}``) Hermes wraps itself."""
        return [tool["function"] for tool in policy_tool_schemas(self.policy, False, HINDSIGHT_TOOLS)]

    def tool_names(self) -> tuple[str, ...]:
        return tuple(schema["name"] for schema in self.tool_schemas())

    def system_prompt_block(self) -> str:
        """The prelude (or, without a profile, the banks offered) and the profile's peer card; a line
        that reads like an instruction to the agent is withheld (``dreamer.threats``)."""
        parts = ["# Dreamer memory", self._orientation().rstrip()]
        card = self.peer_card()
        if card:
            parts.append(card)
        return withhold_lines("\n\n".join(parts))[0]

    def peer_card(self) -> str:
        """The profile's peer card as the daemon last wrote it, bounded; empty when there is none."""
        profile = self.settings.profile
        if profile is None:
            return ""
        path = self.config.profiles[profile].peer_card_path
        if path is None:
            return ""
        limit = self.config.peer_card.budget_chars + _CARD_FRAME_CHARS
        try:
            # Without blocking, a regular file only: a FIFO there would hang the agent's start.
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
            with os.fdopen(fd, "rb") as handle:
                if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                    return ""
                raw = handle.read(limit * 4)
        except OSError:
            return ""
        text = raw.decode("utf-8", "replace").strip()
        if len(text) > limit:
            text = text[:limit].rsplit("\n", 1)[0] + "\n(peer card cut at its budget)"
        return withhold_lines("\n".join(text.splitlines()))[0]

    def _orientation(self) -> str:
        if self.settings.profile is not None:
            return prelude(self.config, self.settings.profile)
        readable = self.policy.aliases_for("recall")
        writable = self.policy.aliases_for("retain")
        lines = [f"- [{alias}] {self.policy.summary(alias)}" for alias in readable]
        lines.append(f"You may read: {', '.join(readable) or 'no bank'}.")
        lines.append(f"You may write: {', '.join(writable) or 'no bank'}.")
        default = self.policy.default_for("retain")
        if default is not None:
            lines.append(f"Storing without naming a bank goes to [{default}].")
        return "Memory banks:\n" + "\n".join(lines) + "\n"

    # --- calls -------------------------------------------------------------------------------------

    def call_tool(self, name: str, arguments: Any) -> str:
        """Run one tool call; the JSON string Hermes hands back to the model (``result`` or ``error``)."""
        if name not in self.tool_names():
            return _error(f"unknown tool {name!r} (known: {', '.join(self.tool_names())})")
        if not isinstance(arguments, Mapping):
            return _error(f"{name}: the arguments must be a JSON object")
        timeout = self.recall_bank_timeout_s if name == HINDSIGHT_TOOLS.recall else None
        try:
            answer = self._run(
                lambda router: run_tool_call(router, name, arguments, HINDSIGHT_TOOLS), timeout
            )
        except PolicyError as exc:
            return _error(str(exc))
        except BackendError as exc:
            what = "nothing may have been stored" if name == HINDSIGHT_TOOLS.retain else "no answer"
            return _error(
                f"{name}: the memory server failed ({failure_reason(exc)}); {what}; try again later"
            )
        except DreamerError as exc:
            return _error(f"{name}: {exc}")
        return json.dumps(_result(answer), ensure_ascii=False)

    def prefetch(self, query: str) -> str:
        """What the profile's banks hold about ``query``, labelled, within ``prefetch_timeout_s``.

        A bank that misses the deadline or fails is named; the others' hits are kept. When the
        whole recall misses the deadline, the turn goes on without it and says so.
        """
        return self.recall_for_turn(query).text

    def recall_for_turn(self, query: str) -> TurnRecall:
        """:meth:`prefetch`'s text and how many memories it shows."""
        query = " ".join(query.split())[:PREFETCH_QUERY_CHARS]
        if not query or not self.policy.aliases_for("recall"):
            return TurnRecall()

        async def recall(router: BankRouter) -> RecallAnswer:
            if router.profile is not None and router.policy.union_aliases():
                return await router.read_union(query)
            return await router.recall(query)

        try:
            answer = self._run(recall, self.prefetch_timeout_s, deadline_s=self.prefetch_timeout_s + 1.0)
        except DeadlineExceeded:
            return TurnRecall(
                f"# Dreamer memory\n(memory recall skipped: no answer within {self.prefetch_timeout_s:g} s)"
            )
        except (PolicyError, BackendError):
            return TurnRecall()
        if not answer.items and answer.complete:
            return TurnRecall()
        # Not asked for by the model: a hit that reads like an instruction is withheld, not shown.
        recalled = answer.render(withhold=True)
        shown = sum(1 for item in answer.items if not item.threats)
        return TurnRecall(
            "# Dreamer memory (recalled for this turn; each line names its bank)\n" + recalled, shown
        )

    def sync_turn(self, user: str, assistant: str, session_id: str = "") -> None:
        """Queue a finished turn for the default bank (``auto_retain``); never blocks, never raises."""
        if self.turns is not None and (user.strip() or assistant.strip()):
            self.turns.add(turn_text(user, assistant), _SESSION_UNSAFE.sub("-", session_id)[:64])

    def start(self) -> None:
        """Start storing turns; those an earlier process left in the spool go first (Hermes'
        ``initialize``). A first turn starts it too."""
        if self.turns is not None:
            self.turns.start()

    def turn_status(self) -> dict[str, str]:
        """The turn spool as ``hermes memory status`` shows it: where, and what waits there."""
        if self.turns is None:
            return {"turns": self._no_turns}
        try:
            depth = self.turns.depth()
        except (OSError, sqlite3.Error) as exc:
            return {"turn spool": str(self.turns.spool), "turns waiting": f"unknown ({exc})"}
        waiting = f"{depth.turns}"
        if depth.parked:
            waiting += f" ({depth.parked} set aside after refusals, tried again at the next start)"
        return {"turn spool": str(self.turns.spool), "turns waiting": waiting}

    def close(self, timeout_s: float = 5.0) -> None:
        """Store what the turn spool holds and stop the turn writer (Hermes' ``shutdown``)."""
        if self.turns is not None:
            self.turns.close(timeout_s)

    def _store_turns(self, batch: Batch) -> None:
        # The batch's own document id: a batch sent again after a crash is stored once, not twice.
        self._run(
            lambda router: router.retain(
                batch.content,
                context="conversation",
                tags=batch.tags,
                document_id=batch.document_id,
                timestamp=batch.started_at,
            ),
            None,
        )

    # --- running the router ------------------------------------------------------------------------

    def _run(
        self,
        call: Callable[[BankRouter], Awaitable[_T]],
        bank_timeout_s: float | None,
        *,
        deadline_s: float | None = None,
    ) -> _T:
        """``call`` on a router over a freshly opened backend, in a thread with its own event loop."""
        settings = self.settings

        async def main() -> _T:
            # A test's opener wraps the backend to inject a fault; it is closed here, as opened here.
            injected = self.opener(settings.config) if self.opener is not None else None
            # A Dreamer TOML names a state file: its ledger marks cards superseded by newer ones.
            need: StateNeed | None = "read" if settings.profile is not None else None
            try:
                async with open_for(
                    settings.config, backend=True, use_backend=injected, state=need
                ) as opened:
                    router = BankRouter(
                        settings.config,
                        opened.backend,
                        profile=settings.profile,
                        bank_timeout_s=bank_timeout_s,
                        ledger=opened.ledger,
                    )
                    return await call(router)
            finally:
                if injected is not None:
                    await injected.aclose()

        return _in_thread(lambda: anyio.run(main), deadline_s)


def _in_thread(work: Callable[[], _T], deadline_s: float | None) -> _T:
    """``work()`` in a daemon thread; DeadlineExceeded when it has not finished by ``deadline_s``."""
    box: dict[str, Any] = {}
    done = threading.Event()

    def target() -> None:
        try:
            box["value"] = work()
        except BaseException as exc:
            box["error"] = exc
        finally:
            done.set()

    thread = threading.Thread(target=target, name="dreamer-memory", daemon=True)
    thread.start()
    if not done.wait(deadline_s):
        raise DeadlineExceeded(f"no answer within {deadline_s} s")
    if "error" in box:
        raise box["error"]
    value: _T = box["value"]
    return value


def _result(answer: RecallAnswer | ReflectAnswer | RetainAnswer) -> dict[str, Any]:
    doc: dict[str, Any] = {"result": answer.render()}
    if isinstance(answer, RecallAnswer | ReflectAnswer):
        doc["banks"] = list(answer.banks)
        doc["missing"] = [{"bank": m.alias, "reason": m.reason} for m in answer.missing]
    else:
        doc["bank"] = answer.alias
    return doc


def _error(message: str) -> str:
    """Hermes' tool-error shape (``tools.registry.tool_error``)."""
    return json.dumps({"error": message}, ensure_ascii=False)
