"""``DreamerMemoryProvider``: Hermes' ``MemoryProvider`` over :class:`DreamerMemory`.

Importable only where Hermes (``hermes-agent``) is installed; the plugin directory that
``dreamer hermes install`` writes imports it, and so does the ``hermes_agent.memory_providers``
entry point (:mod:`dreamer.hermes_provider.entry_point`). Hermes asks for the tool schemas before
it calls ``initialize``, so the settings are read on first use from ``$HERMES_HOME`` and read again
with what ``initialize`` tells (the Hermes home and profile).

Written against 0.19.0's ABC; the optional methods of later releases (``recall_status``,
``initialize_for_inspection``, ``unavailable_reason``) are implemented too and work on 0.19.0,
which never calls them.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import agent.memory_provider as hermes_abc  # type: ignore[import-not-found, unused-ignore]
from agent.memory_provider import MemoryProvider  # type: ignore[import-not-found, unused-ignore]

from dreamer.errors import ConfigError
from dreamer.hermes_provider.memory import DreamerMemory
from dreamer.hermes_provider.settings import load_settings

__all__ = ["PROVIDER_NAME", "RECALL_LABEL", "DreamerMemoryProvider", "DreamerRecallStatus"]

PROVIDER_NAME = "dreamer"
#: How Hermes' "recalled N memories" line names the provider.
RECALL_LABEL = "Dreamer"
#: Hermes' glyph for that line (``INDICATOR_GLYPH`` after 0.19.0; the same default before).
RECALL_GLYPH: str = getattr(hermes_abc, "INDICATOR_GLYPH", "\N{BRAIN}")

log = logging.getLogger("dreamer.hermes_provider")


def _hermes_home() -> Path:
    """``$HERMES_HOME`` as Hermes resolves it (its own function when importable)."""
    try:
        from hermes_constants import get_hermes_home  # type: ignore[import-not-found, unused-ignore]

        return Path(get_hermes_home())
    except ImportError:
        return Path(os.environ.get("HERMES_HOME", "").strip() or Path.home() / ".hermes")


@dataclass(frozen=True, slots=True)
class DreamerRecallStatus:
    """Hermes' ``RecallStatus`` where ``agent.memory_provider`` has none (0.19.0): the same fields,
    meaning the same (what the last prefetch injected)."""

    provider_label: str
    count: int
    glyph: str = RECALL_GLYPH


class DreamerMemoryProvider(MemoryProvider):  # type: ignore[misc, unused-ignore]
    """Dreamer's named banks, policy and labelled read-union as Hermes' ``hindsight_*`` tools.

    ``config_path`` (a Dreamer TOML) and ``profile`` are what ``dreamer hermes install`` recorded;
    without them Hermes' ``hindsight/config.json`` is read.
    """

    def __init__(self, config_path: str | None = None, profile: str | None = None) -> None:
        self._config_path = Path(config_path) if config_path else None
        self._profile = profile
        self._memory: DreamerMemory | None = None
        self._problem: str | None = None
        self._agent_context = "primary"
        #: Memories the last prefetch injected (0: none, or no prefetch yet).
        self._last_recalled = 0

    @property
    def name(self) -> str:
        return PROVIDER_NAME

    # --- settings -----------------------------------------------------------------------------------

    def _load(
        self, hermes_home: Path | None = None, identity: str | None = None, *, store_turns: bool = True
    ) -> DreamerMemory | None:
        try:
            settings = load_settings(
                hermes_home=hermes_home or _hermes_home(),
                config_path=self._config_path,
                profile=self._profile,
                identity=identity,
            )
            if settings.no_server is not None:
                raise ConfigError(settings.no_server)
            if self._memory is not None:
                self._memory.close()
            self._memory, self._problem = DreamerMemory(settings, store_turns=store_turns), None
        except ConfigError as exc:
            if self._memory is not None:
                self._memory.close()
            self._memory, self._problem = None, str(exc)
            log.warning("Dreamer memory is not configured: %s", exc)
        return self._memory

    def _load_for(self, kwargs: dict[str, Any], *, store_turns: bool) -> DreamerMemory | None:
        """The memory for what Hermes' ``initialize`` tells: the Hermes home and its profile."""
        home = kwargs.get("hermes_home")
        identity = kwargs.get("agent_identity")
        self._agent_context = str(kwargs.get("agent_context") or "primary")
        return self._load(
            Path(home) if home else None, str(identity) if identity else None, store_turns=store_turns
        )

    def _ready(self) -> DreamerMemory | None:
        return self._memory if self._memory is not None or self._problem is not None else self._load()

    @property
    def memory(self) -> DreamerMemory | None:
        """The configured memory, or None when the configuration is unusable (see ``problem``)."""
        return self._ready()

    @property
    def problem(self) -> str | None:
        self._ready()
        return self._problem

    # --- MemoryProvider -----------------------------------------------------------------------------

    def is_available(self) -> bool:
        return self._ready() is not None

    def unavailable_reason(self) -> str:
        """Why :meth:`is_available` is False, for the warning Hermes (after 0.19.0) prints then:
        the configuration that is missing (no ``hindsight/config.json`` and no ``HINDSIGHT_*``
        variable naming a server), or the file and key that are wrong. Empty when available."""
        if self._ready() is not None:
            return ""
        return f"Dreamer memory is not configured: {self._problem}"

    def initialize(self, session_id: str, **kwargs: Any) -> None:
        memory = self._load_for(kwargs, store_turns=True)
        if memory is not None:
            memory.start()  # turns a killed or timed-out process left in the spool are stored now

    def initialize_for_inspection(self, session_id: str, **kwargs: Any) -> None:
        """Hermes' ``initialize`` for an agent that is only inspected (after 0.19.0): the settings
        are read, so :meth:`get_tool_schemas` and :meth:`system_prompt_block` answer, but no turn
        spool is opened, no writer thread started and no server asked; :meth:`sync_turn` then
        stores nothing. ``initialize`` afterwards makes a full one."""
        self._load_for(kwargs, store_turns=False)

    def system_prompt_block(self) -> str:
        memory = self._ready()
        if memory is None:
            return f"# Dreamer memory\nUnavailable: {self._problem}"
        return memory.system_prompt_block()

    def prefetch(self, query: str, *, session_id: str = "") -> str:
        self._last_recalled = 0
        memory = self._ready()
        if memory is None:
            return ""
        recalled = memory.recall_for_turn(query)
        self._last_recalled = recalled.memories
        return recalled.text

    def recall_status(self) -> Any:
        """What the last :meth:`prefetch` injected, for Hermes' "recalled N memories" line (Hermes
        after 0.19.0 asks right after the prefetch, on the same thread): Hermes'
        ``RecallStatus("Dreamer", N, glyph)`` where ``agent.memory_provider`` has it, else a
        :class:`DreamerRecallStatus` with the same fields (0.19.0, which never asks). None when that
        prefetch injected no memory: nothing found, no query, the recall skipped at its deadline,
        every hit withheld, or no prefetch yet; never an earlier prefetch's count."""
        count = self._last_recalled
        if count <= 0:
            return None
        status = getattr(hermes_abc, "RecallStatus", DreamerRecallStatus)
        return status(provider_label=RECALL_LABEL, count=count, glyph=RECALL_GLYPH)

    def sync_turn(
        self, user_content: str, assistant_content: str, *, session_id: str = "", **kwargs: Any
    ) -> None:
        memory = self._ready()
        if memory is not None:
            memory.sync_turn(str(user_content or ""), str(assistant_content or ""), str(session_id or ""))

    def shutdown(self) -> None:
        if self._memory is not None:
            self._memory.close()

    def get_tool_schemas(self) -> list[dict[str, Any]]:
        memory = self._ready()
        return memory.tool_schemas() if memory is not None else []

    def handle_tool_call(self, tool_name: str, args: dict[str, Any], **kwargs: Any) -> str:
        memory = self._ready()
        if memory is None:
            return json.dumps({"error": f"Dreamer memory is not configured: {self._problem}"})
        return memory.call_tool(tool_name, args)

    def get_config_schema(self) -> list[dict[str, Any]]:
        return []

    def get_status_config(self, provider_config: dict[str, Any]) -> dict[str, Any]:
        """What ``hermes memory status`` shows: Hermes' settings for the provider, then where the
        turn spool is and how many turns wait in it (read only: nothing is sent)."""
        shown = dict(provider_config) if isinstance(provider_config, dict) else {}
        memory = self._ready()
        if memory is None:
            shown["problem"] = self._problem
            return shown
        shown.update(memory.turn_status())
        return shown
