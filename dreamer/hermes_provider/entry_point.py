"""What the ``hermes_agent.memory_providers`` entry point ``dreamer`` names: a module with ``register(ctx)``.

Hermes releases after 0.19.0 find pip-installed memory providers through that entry-point group, so
``pip install dreamer`` is enough for them, without ``dreamer hermes install`` (0.19.0 has no such
discovery and needs the plugin directory; where both exist, Hermes prefers the directory). Hermes
loads the entry point and, for a module with ``register``, calls it with a collector whose
``register_memory_provider`` keeps the provider.

Hermes first resolves the module's file without importing it, to look for a plugin directory beside
it: a package (``__init__.py``) would be taken for one and loaded as a directory, a plain module is
loaded as the entry point. So this is a module of its own, and it imports nothing of Hermes: the
provider, which subclasses Hermes' ``MemoryProvider``, is imported when ``register`` is called.
"""

from __future__ import annotations

from typing import Protocol

__all__ = ["ENTRY_POINT_GROUP", "register"]

#: The entry-point group Hermes after 0.19.0 reads memory providers from.
ENTRY_POINT_GROUP = "hermes_agent.memory_providers"


class ProviderRegistry(Protocol):
    """The part of Hermes' plugin context a memory provider uses."""

    def register_memory_provider(self, provider: object) -> None: ...


def register(ctx: ProviderRegistry) -> None:
    """Give Hermes the provider; it reads Hermes' ``hindsight/config.json`` (no Dreamer TOML: for one,
    install the plugin directory with ``dreamer hermes install --use-config``)."""
    from dreamer.hermes_provider.provider import DreamerMemoryProvider

    ctx.register_memory_provider(DreamerMemoryProvider())
