"""``DreamerMemoryProvider``: Hermes' ``MemoryProvider`` over :class:`DreamerMemory`.

Importable only where Hermes (``hermes-agent``) is installed; the plugin directory that
``dreamer hermes install`` writes imports it. Hermes asks for the tool schemas before it calls
``initialize``, so the settings are read on first use from ``$HERMES_HOME`` and read again with
what ``initialize`` tells (the Hermes home and profile).
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

from agent.memory_provider import MemoryProvider  # type: ignore[import-not-found, unused-ignore]

from dreamer.errors import ConfigError
from dreamer.hermes_provider.memory import DreamerMemory
from dreamer.hermes_provider.settings import load_settings

__all__ = ["PROVIDER_NAME", "DreamerMemoryProvider"]

PROVIDER_NAME = "dreamer"

log = logging.getLogger("dreamer.hermes_provider")


def _hermes_home() -> Path:
    """``$HERMES_HOME`` as Hermes resolves it (its own function when importable)."""
    try:
        from hermes_constants import get_hermes_home  # type: ignore[import-not-found, unused-ignore]

        return Path(get_hermes_home())
    except ImportError:
        return Path(os.environ.get("HERMES_HOME", "").strip() or Path.home() / ".hermes")


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

    @property
    def name(self) -> str:
        return PROVIDER_NAME

    # --- settings -----------------------------------------------------------------------------------

    def _load(self, hermes_home: Path | None = None, identity: str | None = None) -> DreamerMemory | None:
        try:
            settings = load_settings(
                hermes_home=hermes_home or _hermes_home(),
                config_path=self._config_path,
                profile=self._profile,
                identity=identity,
            )
            if self._memory is not None:
                self._memory.close()
            self._memory, self._problem = DreamerMemory(settings), None
        except ConfigError as exc:
            self._memory, self._problem = None, str(exc)
            log.warning("Dreamer memory is not configured: %s", exc)
        return self._memory

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

    def initialize(self, session_id: str, **kwargs: Any) -> None:
        home = kwargs.get("hermes_home")
        identity = kwargs.get("agent_identity")
        self._agent_context = str(kwargs.get("agent_context") or "primary")
        memory = self._load(Path(home) if home else None, str(identity) if identity else None)
        if memory is not None:
            memory.start()  # turns a killed or timed-out process left in the spool are stored now

    def system_prompt_block(self) -> str:
        memory = self._ready()
        if memory is None:
            return f"# Dreamer memory\nUnavailable: {self._problem}"
        return memory.system_prompt_block()

    def prefetch(self, query: str, *, session_id: str = "") -> str:
        memory = self._ready()
        return memory.prefetch(query) if memory is not None else ""

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
