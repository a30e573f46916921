"""The ``hermes_agent.memory_providers`` entry point, found and loaded as Hermes after 0.19.0 does.

Hermes' discovery (``plugins/memory/__init__.py`` there) selects the group from
``importlib.metadata``, resolves the module's file without importing it (a package would be loaded
as a plugin directory instead), then loads the entry point and takes the provider from what it gets:
an instance, a subclass, or something with ``register(ctx)``, called with a collector that keeps what
``register_memory_provider`` is given. That is done here with the installed metadata and the
installed ``hermes-agent`` 0.19.0, whose ``MemoryProvider`` the provider must be.
"""

from __future__ import annotations

import ast
import importlib.metadata
import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip(
    "agent.memory_provider", reason="hermes-agent is not installed (pip install -e '.[test]')"
)

from agent.memory_provider import MemoryProvider

from dreamer.hermes_provider.entry_point import ENTRY_POINT_GROUP
from dreamer.hermes_provider.provider import PROVIDER_NAME


class Collector:
    """What Hermes' ``_ProviderCollector`` does for a memory provider: keeps each provider registered."""

    def __init__(self) -> None:
        self.registered: list[Any] = []

    def register_memory_provider(self, provider: Any) -> None:
        self.registered.append(provider)


def dreamer_entry_point() -> importlib.metadata.EntryPoint:
    found = list(importlib.metadata.entry_points().select(group=ENTRY_POINT_GROUP))
    mine = [ep for ep in found if ep.name == PROVIDER_NAME]
    assert len(mine) == 1, f"{PROVIDER_NAME!r} not in {ENTRY_POINT_GROUP}: {found} (pip install -e .)"
    return mine[0]


def origin_without_import(module: str) -> Path | None:
    """The file of ``module`` as Hermes' ``resolve_module_origin`` finds it: ``find_spec`` of the
    top-level name only, the rest walked through the search paths by hand, nothing imported."""
    top, *rest = module.split(".")
    spec = importlib.util.find_spec(top)
    if spec is None or spec.origin is None:
        return None
    origin, paths = Path(spec.origin), list(spec.submodule_search_locations or ())
    for part in rest:
        for base in map(Path, paths):
            if (base / part / "__init__.py").is_file():
                origin, paths = base / part / "__init__.py", [str(base / part)]
                break
            if (base / f"{part}.py").is_file():
                origin, paths = base / f"{part}.py", []
                break
        else:
            return None
    return origin


def module_level_imports(path: Path) -> set[str]:
    """The top-level names a module imports when it is imported (not inside a function)."""
    names: set[str] = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def provider_as_hermes_takes_it(loaded: Any) -> Any:
    """The provider from a loaded entry point, tried in Hermes' order (an instance, a subclass, a
    ``register(ctx)``); the register path must register exactly one."""
    if isinstance(loaded, MemoryProvider):
        return loaded
    if isinstance(loaded, type) and issubclass(loaded, MemoryProvider):
        return loaded()
    assert hasattr(loaded, "register"), f"{loaded!r} offers Hermes no provider"
    collector = Collector()
    loaded.register(collector)
    assert len(collector.registered) == 1, collector.registered
    return collector.registered[0]


class TestEntryPoint:
    def test_the_installed_metadata_names_dreamer_in_hermes_group(self) -> None:
        """``entry_points().select(group="hermes_agent.memory_providers")`` holds ``dreamer``, the
        name Hermes' ``memory.provider`` selects, pointing at the entry-point module."""
        entry_point = dreamer_entry_point()
        assert entry_point.name == PROVIDER_NAME == "dreamer"
        assert entry_point.value == "dreamer.hermes_provider.entry_point"

    def test_its_module_is_a_plain_module_whose_import_needs_no_hermes(self) -> None:
        """Resolved as Hermes resolves it (nothing imported), the entry point's module is a ``.py``
        file, not a package Hermes would load as a plugin directory; it, and the packages above it,
        import only the standard library when imported, so Hermes' ABC is imported only by
        ``register``."""
        module = dreamer_entry_point().value.split(":")[0]
        origin = origin_without_import(module)
        assert origin is not None and origin.name == "entry_point.py", origin
        parents = [origin.parent / "__init__.py", origin.parent.parent / "__init__.py"]
        for path in [origin, *parents]:
            outside = module_level_imports(path) - set(sys.stdlib_module_names) - {"__future__"}
            assert outside == set(), f"{path} imports {outside} at import time"

    def test_loading_it_yields_a_real_hermes_memory_provider_named_dreamer(self) -> None:
        """``.load()`` with the installed hermes-agent gives a module with ``register(ctx)``; called
        with a collector, it registers one provider, an ``agent.memory_provider.MemoryProvider``
        named ``dreamer``."""
        loaded = dreamer_entry_point().load()
        assert not isinstance(loaded, type) and callable(loaded.register)
        provider = provider_as_hermes_takes_it(loaded)
        assert isinstance(provider, MemoryProvider)
        assert provider.name == "dreamer"

    def test_the_provider_it_yields_reads_the_hermes_home(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """The provider the entry point gives reads ``$HERMES_HOME/hindsight/config.json`` like the
        plugin directory's: available, offering the three ``hindsight_*`` tools over its banks."""
        home = tmp_path / "hermes"
        (home / "hindsight").mkdir(parents=True)
        config = {"mode": "local_external", "api_url": "http://127.0.0.1:9", "bank_id": "notes"}
        (home / "hindsight" / "config.json").write_text(json.dumps(config), encoding="utf-8")
        monkeypatch.setenv("HERMES_HOME", str(home))
        provider = provider_as_hermes_takes_it(dreamer_entry_point().load())
        try:
            assert provider.is_available(), provider.problem
            names = sorted(schema["name"] for schema in provider.get_tool_schemas())
            assert names == ["hindsight_recall", "hindsight_reflect", "hindsight_retain"]
            assert "[notes]" in provider.system_prompt_block()
        finally:
            provider.shutdown()
