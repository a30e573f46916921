"""The package's shape: rooms in layers, data flowing one way, no import cycles.

Read from the source with ``ast``, so a new import that breaks the layering fails here before
anyone has to notice it in review.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "dreamer"

# Lower ranks are used by higher ones, never the other way round. Rooms of one rank never import
# each other. ``dreamer`` itself (the version) is at the bottom.
RANKS: dict[str, int] = {
    "dreamer": 0,
    "dreamer.errors": 0,
    "dreamer.text": 0,
    "dreamer.log": 0,
    "dreamer.cardtags": 0,
    "dreamer.cardrank": 0,
    "dreamer.diskfaults": 0,
    "dreamer.heap": 0,
    "dreamer.sqlitestats": 0,
    "dreamer.config": 1,
    "dreamer.details": 1,
    "dreamer.outcomes": 1,
    "dreamer.slot": 1,
    "dreamer.threats": 1,
    "dreamer.state": 2,
    "dreamer.retry": 2,
    "dreamer.embeddings": 3,
    "dreamer.llm": 3,
    "dreamer.backends": 4,
    "dreamer.rollup": 5,
    "dreamer.hermes": 5,
    "dreamer.readside": 5,
    "dreamer.peercard": 6,
    "dreamer.jobs": 7,
    "dreamer.service": 8,
    "dreamer.hermes_provider": 8,
    "dreamer.commands": 9,
    "dreamer.cli": 10,
    "dreamer.__main__": 11,
}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def room(module: str) -> str:
    """``dreamer.rollup.dedup`` -> ``dreamer.rollup``; ``dreamer.cli`` -> ``dreamer.cli``."""
    return ".".join(module.split(".")[:2])


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in PACKAGE.rglob("*.py")}


def imports(path: Path, *, top_level_only: bool) -> Iterator[str]:
    """The dreamer modules ``path`` imports (``from dreamer.x import y`` counts ``dreamer.x.y`` too
    when that is a module). With ``top_level_only``, imports inside functions and under
    ``TYPE_CHECKING`` are left out: those cannot form an import cycle."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    nodes = _top_level(tree) if top_level_only else ast.walk(tree)
    known = modules()
    for node in nodes:
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("dreamer"):
            yield node.module
            for alias in node.names:
                if f"{node.module}.{alias.name}" in known:
                    yield f"{node.module}.{alias.name}"
        elif isinstance(node, ast.Import):
            yield from (a.name for a in node.names if a.name.startswith("dreamer"))


def _top_level(tree: ast.Module) -> Iterator[ast.AST]:
    for node in tree.body:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            continue
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        elif isinstance(node, ast.If | ast.Try):
            yield from (n for n in ast.walk(node) if isinstance(n, ast.Import | ast.ImportFrom))


class TestLayers:
    def test_every_room_has_a_rank(self) -> None:
        """A new top-level module or subpackage must be placed in the layering on purpose."""
        unranked = sorted({room(m) for m in modules()} - set(RANKS))
        assert unranked == []

    @pytest.mark.parametrize("module", sorted(modules()))
    def test_imports_only_go_down(self, module: str) -> None:
        """Config → daemon → job → pipeline → backend: no room imports one of its own rank or above,
        lazy imports included (``service`` reaches ``commands`` never; ``backends`` never reach the
        pipeline; ``hermes`` never reaches the roll-up)."""
        own = room(module)
        upward = sorted(
            target
            for target in set(imports(modules()[module], top_level_only=False))
            if room(target) != own and RANKS[room(target)] >= RANKS[own]
        )
        assert upward == [], f"{module} imports {upward}"


class TestCycles:
    def test_no_import_cycles_between_modules(self) -> None:
        known = modules()
        graph = {
            m: {t for t in imports(p, top_level_only=True) if t in known and t != m} for m, p in known.items()
        }
        cycles: list[list[str]] = []
        state: dict[str, int] = {}

        def visit(node: str, path: list[str]) -> None:
            state[node] = 1
            for nxt in sorted(graph[node]):
                if state.get(nxt) == 1:
                    cycles.append([*path[path.index(nxt) :], nxt])
                elif nxt not in state:
                    visit(nxt, [*path, nxt])
            state[node] = 2

        for start in sorted(graph):
            if start not in state:
                visit(start, [start])
        assert cycles == []


#: A module past this many lines is holding more than one concept.
MAX_MODULE_LINES = 450
#: A function past this many lines (``def`` to its last line, docstring included) is a pipeline
#: hiding inside one name: its steps want names of their own.
MAX_FUNCTION_LINES = 80


def long_functions(path: Path) -> Iterator[tuple[str, int]]:
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.end_lineno is not None:
            length = node.end_lineno - node.lineno + 1
            if length > MAX_FUNCTION_LINES:
                yield node.name, length


class TestSize:
    @pytest.mark.parametrize("module", sorted(modules()))
    def test_modules_stay_small(self, module: str) -> None:
        """One concept per module: a module past MAX_MODULE_LINES lines is holding more than one."""
        lines = len(modules()[module].read_text(encoding="utf-8").splitlines())
        assert lines <= MAX_MODULE_LINES, f"{module}: {lines} lines"

    @pytest.mark.parametrize("module", sorted(modules()))
    def test_functions_stay_short(self, module: str) -> None:
        """No function is longer than MAX_FUNCTION_LINES lines: a long one becomes named steps."""
        assert list(long_functions(modules()[module])) == []

    def test_the_length_check_sees_a_long_function(self, tmp_path: Path) -> None:
        """The function-length check counts from ``def`` to the last line, nested bodies included."""
        body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES))
        source = tmp_path / "long.py"
        source.write_text(f"def short():\n    return 1\n\n\nasync def long():\n{body}\n", encoding="utf-8")
        assert list(long_functions(source)) == [("long", MAX_FUNCTION_LINES + 1)]


#: The calls that wire a run (open a backend, an embedder, the state file; build a lock), and the
#: room that defines each. Outside that room they are made in ``dreamer.jobs`` only, so every
#: caller gets the same wiring (the embedder handed to the backend, the state directory made, the
#: locks named alike).
WIRING = {
    "open_backend": "dreamer.backends",
    "make_embedder": "dreamer.embeddings",
    "SlotLock": "dreamer.slot",
    "StateStore.open": "dreamer.state",
}


def wiring_calls(path: Path) -> Iterator[tuple[int, str]]:
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Name) and func.id in WIRING:
            yield node.lineno, func.id
        elif (
            isinstance(func, ast.Attribute)
            and func.attr == "open"
            and isinstance(func.value, ast.Name)
            and func.value.id == "StateStore"
        ):
            yield node.lineno, "StateStore.open"


class TestWiring:
    def test_runs_are_wired_in_one_room(self) -> None:
        """``open_backend(``, ``make_embedder(``, ``StateStore.open(`` and ``SlotLock(`` are called
        from ``dreamer.jobs`` only (and where each is defined): a command, the service or the Hermes
        provider that opens its own would drift from the others' wiring."""
        stray = sorted(
            f"{module}:{line} {call}("
            for module, path in modules().items()
            for line, call in wiring_calls(path)
            if room(module) not in ("dreamer.jobs", WIRING[call])
        )
        assert stray == []
