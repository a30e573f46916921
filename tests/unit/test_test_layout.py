"""Where a module's tests are: ``tests/unit`` mirrors the package, and every exception says why.

``dreamer/<room>/<module>.py`` is tested in ``tests/unit/<room>/test_<module>.py``, or, when its
tests need servers, subprocesses or real files, in ``tests/integration/<room>/test_<module>.py``.
A package's ``__init__.py`` is tested as the package: ``dreamer/config/__init__.py`` in
``tests/unit/test_config.py``. A module without such a file is listed in ``WITHOUT_OWN_FILE`` with
the reason and the test files that exercise it; a module holding no logic may say so instead.

A test file exercises a module when it imports it, or imports a module that imports it (the store's
tests exercise the helpers the store calls), or one that reaches it through the imports of the
module's own room (``dreamer.state`` -> ``state.store`` -> ``state.ledger`` -> ``state.base``); or
when it runs ``python -m dreamer`` in a subprocess, itself or through a ``tests`` helper it imports,
and the module is one the command can load.

Read from the source with ``ast``, so a reason cannot go stale: a listed file that stops importing
its module, a listed module that is gone or has since got its own file, and a module that gains
logic after being listed as holding none each fail here.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "dreamer"
TESTS = REPO / "tests"

NO_LOGIC = "no logic: "

# The module, why it has no test file of its own, and the test files that exercise it (none when
# the reason starts with NO_LOGIC). Shrinks as tests are written: an entry whose module gets its own
# file fails below until it is removed.
WITHOUT_OWN_FILE: dict[str, tuple[str, tuple[str, ...]]] = {
    # Holding no logic.
    "dreamer": ("no logic: the version", ()),
    "dreamer.__main__": ("no logic: `python -m dreamer` calls dreamer.cli.main", ()),
    "dreamer.backends.base": ("no logic: the MemoryBackend protocol and the values it passes", ()),
    "dreamer.backends.embedded": ("no logic: the room's docstring", ()),
    "dreamer.backends.hindsight": ("no logic: the room's docstring", ()),
    "dreamer.commands": ("no logic: the room's docstring", ()),
    "dreamer.embeddings": ("no logic: re-exports the Embedder protocol", ()),
    "dreamer.hermes": ("no logic: the room's docstring", ()),
    "dreamer.hermes.audit": ("no logic: the room's docstring", ()),
    "dreamer.hermes.memory": ("no logic: the room's docstring", ()),
    "dreamer.hermes_provider": ("no logic: the room's docstring", ()),
    "dreamer.llm": ("no logic: the room's docstring", ()),
    "dreamer.peercard": ("no logic: the room's docstring", ()),
    "dreamer.readside": ("no logic: the room's docstring", ()),
    "dreamer.rollup": ("no logic: the room's docstring", ()),
    "dreamer.rollup.dedup_values": (
        "no logic: the dedup's values in and out (split out of dreamer.rollup.dedup)",
        (),
    ),
    "dreamer.service": ("no logic: the room's docstring", ()),
    "dreamer.state": ("no logic: re-exports the records and StateStore", ()),
    # Tested through the module that calls them, or the command that runs them.
    "dreamer.backends": (
        "open_backend, as the jobs open a configured backend",
        ("tests/integration/rollup/test_semantic.py", "tests/integration/hermes_provider/test_provider.py"),
    ),
    "dreamer.backends.embedded.reflect": (
        "the extractive reflect answer, through EmbeddedBackend.reflect",
        ("tests/integration/backends/embedded/test_backend.py",),
    ),
    "dreamer.backends.embedded.retain": (
        "a retained batch checked and written, through EmbeddedBackend.retain",
        ("tests/integration/backends/embedded/test_backend.py",),
    ),
    "dreamer.backends.embedded.schema": (
        "the store file (schema, upgrades, the write transaction), through the backend",
        ("tests/integration/backends/embedded/test_backend.py", "tests/integration/test_embedded_scale.py"),
    ),
    "dreamer.backends.embedded.search": (
        "the bank-scoped full-text search, through EmbeddedBackend.recall",
        ("tests/integration/backends/embedded/test_backend.py", "tests/integration/test_embedded_scale.py"),
    ),
    "dreamer.backends.hindsight.statuses": (
        "failed answers mapped onto the error tree, through HindsightBackend",
        ("tests/unit/backends/hindsight/test_backend.py",),
    ),
    "dreamer.backends.reflect_schema": (
        "the reflect answer schema the card, polish and compression requests send",
        ("tests/unit/rollup/test_cards.py", "tests/unit/peercard/test_polish.py"),
    ),
    "dreamer.cardrank": (
        "the order of a peer card's entries, through build_peer_card and the rank rows",
        ("tests/unit/peercard/test_build.py", "tests/integration/test_peercard_ranks.py"),
    ),
    "dreamer.cardtags": (
        "the tags a promoted card carries and the read side reads",
        ("tests/unit/rollup/test_promote.py", "tests/unit/readside/test_answers.py"),
    ),
    "dreamer.cli.banks": (
        "a group's arguments: build_parser builds every group; the e2e flow runs them",
        ("tests/unit/test_cli.py", "tests/e2e/test_cli_flow.py"),
    ),
    "dreamer.cli.base": (
        "the global options and error reporting every subcommand shares",
        ("tests/unit/test_cli.py", "tests/e2e/test_cli_flow.py"),
    ),
    "dreamer.cli.hermes": (
        "a group's arguments: build_parser builds every group",
        ("tests/unit/test_cli.py",),
    ),
    "dreamer.cli.rollup": (
        "a group's arguments: build_parser builds every group; the e2e flow runs them",
        ("tests/unit/test_cli.py", "tests/e2e/test_cli_flow.py"),
    ),
    "dreamer.commands.audit": (
        "the body of `dreamer audit` and `dreamer memory`, run in a subprocess",
        ("tests/integration/hermes/audit/test_probe.py", "tests/e2e/test_cli_flow.py"),
    ),
    "dreamer.commands.banks": (
        "the bodies of `dreamer banks`, `recall`, `reflect` and `retain`, run in a subprocess",
        ("tests/e2e/test_cli_flow.py", "tests/integration/test_current_recall.py"),
    ),
    "dreamer.commands.card": (
        "the body of `dreamer card`",
        ("tests/integration/test_peercard_polish.py", "tests/e2e/test_cli_flow.py"),
    ),
    "dreamer.commands.demo": (
        "the body of `dreamer demo`, run in a subprocess",
        ("tests/e2e/test_cli_flow.py",),
    ),
    "dreamer.commands.output": (
        "the output helpers the command bodies share",
        ("tests/integration/test_rollup_backlog.py", "tests/e2e/test_cli_flow.py"),
    ),
    "dreamer.commands.status": (
        "the body of `dreamer status`",
        ("tests/integration/test_rollup_backlog.py", "tests/integration/test_rollup_llm.py"),
    ),
    "dreamer.config.files": (
        "reading the file and key files, through load_config",
        ("tests/unit/test_config.py",),
    ),
    "dreamer.config.llm": (
        "the [llm] table, through parse_config",
        ("tests/unit/test_config.py", "tests/integration/test_rollup_llm.py"),
    ),
    "dreamer.embeddings.base": (
        "the Embedder protocol and require_numpy",
        ("tests/integration/backends/embedded/test_hybrid.py", "tests/unit/embeddings/test_cache.py"),
    ),
    "dreamer.errors": (
        "the error tree; the table from an error to an outcome and an exit code is tested",
        ("tests/unit/test_outcomes.py",),
    ),
    "dreamer.hermes.audit.apply": (
        "applying an audit's plan, a step of audit_agent",
        ("tests/integration/hermes/audit/test_run.py",),
    ),
    "dreamer.hermes.audit.context": (
        "what a plan is decided from, a step of audit_agent",
        ("tests/integration/hermes/audit/test_run.py",),
    ),
    "dreamer.hermes.audit.files": (
        "the memory files read for an audit, a step of audit_agent",
        ("tests/integration/hermes/audit/test_run.py",),
    ),
    "dreamer.hermes.audit.leftovers": (
        "temp files a crash left, removed by audit_agent",
        ("tests/integration/hermes/test_hermes_adversarial.py", "tests/integration/hermes/audit/test_run.py"),
    ),
    "dreamer.hermes.audit.record": (
        "the ledger block and state an audit writes, a step of audit_agent",
        ("tests/integration/hermes/audit/test_run.py",),
    ),
    "dreamer.hermes.audit.report": (
        "the audit's report values",
        ("tests/integration/hermes/audit/test_run.py",),
    ),
    "dreamer.hermes.audit.soul_file": (
        "SOUL.md read and edited under its lock, through the audit",
        ("tests/integration/hermes/audit/test_soul_audit.py",),
    ),
    "dreamer.hermes.memory.disk": (
        "an agent's memory folder opened with its config.yaml limits",
        ("tests/integration/hermes/test_hermes_interop.py", "tests/integration/hermes/test_hermes_limits.py"),
    ),
    "dreamer.hermes.memory.entries": (
        "entries split and joined at Hermes' delimiter, through the store",
        ("tests/unit/hermes/memory/test_store.py", "tests/unit/hermes/memory/test_render.py"),
    ),
    "dreamer.hermes_provider.logscrub": (
        "the key kept out of the HTTP library's log lines",
        ("tests/integration/hermes/test_hermes_provider_keys.py",),
    ),
    "dreamer.llm.usage": (
        "a call's token counts, reported or estimated",
        ("tests/unit/backends/hindsight/test_backend.py", "tests/integration/llm/test_openai.py"),
    ),
    "dreamer.rollup.summarise": (
        "the summariser a roll-up calls (extractive or a model)",
        ("tests/integration/test_rollup_llm.py", "tests/integration/rollup/test_pipeline.py"),
    ),
    "dreamer.service.plan": ("the job plan (was dreamer.service.jobs)", ("tests/unit/test_jobs.py",)),
    "dreamer.service.runner": ("one run of a job, its record and outcome", ("tests/unit/test_jobs.py",)),
    "dreamer.state.ranks": ("the peer cards' rank rows", ("tests/integration/test_peercard_ranks.py",)),
    "dreamer.state.rows": (
        "ledger rows read back as cards, through StateStore",
        ("tests/unit/state/test_store.py", "tests/integration/test_peercard_ranks.py"),
    ),
    # Split out of a bigger module, or new with a feature: tested there until they get their own file.
    "dreamer.backends.embedded.embedding": (
        "split out of dreamer.backends.embedded.backend",
        ("tests/integration/backends/embedded/test_hybrid.py",),
    ),
    "dreamer.backends.embedded.reads": (
        "split out of dreamer.backends.embedded.backend",
        ("tests/integration/backends/embedded/test_backend.py",),
    ),
    "dreamer.backends.embedded.rows": (
        "split out of dreamer.backends.embedded.backend",
        ("tests/integration/backends/embedded/test_backend.py",),
    ),
    "dreamer.backends.hindsight.convert": (
        "split out of dreamer.backends.hindsight.backend",
        ("tests/unit/backends/hindsight/test_backend.py",),
    ),
    "dreamer.cli.audit": ("split out of dreamer.cli.agents (renamed)", ("tests/unit/test_cli.py",)),
    "dreamer.cli.card": ("split out of dreamer.cli.banks", ("tests/unit/test_cli.py",)),
    "dreamer.cli.explain": ("new with `dreamer explain`", ("tests/integration/commands/test_explain.py",)),
    "dreamer.cli.demo": (
        "split out of dreamer.cli.rollup",
        ("tests/unit/test_cli.py", "tests/e2e/test_cli_flow.py"),
    ),
    "dreamer.cli.status": ("split out of dreamer.cli.rollup", ("tests/unit/test_cli.py",)),
    "dreamer.config.checks": ("split out of dreamer.config", ("tests/unit/test_config.py",)),
    "dreamer.config.loading": ("split out of dreamer.config", ("tests/unit/test_config.py",)),
    "dreamer.config.messages": ("split out of dreamer.config", ("tests/unit/test_config.py",)),
    "dreamer.config.models": ("split out of dreamer.config", ("tests/unit/test_config.py",)),
    "dreamer.details.dates": ("split out of dreamer.details", ("tests/unit/test_details.py",)),
    "dreamer.details.kinds": ("split out of dreamer.details", ("tests/unit/test_details.py",)),
    "dreamer.details.locations": ("split out of dreamer.details", ("tests/unit/test_details.py",)),
    "dreamer.details.matches": ("split out of dreamer.details", ("tests/unit/test_details.py",)),
    "dreamer.details.names": ("split out of dreamer.details", ("tests/unit/test_details.py",)),
    "dreamer.details.negations": ("split out of dreamer.details", ("tests/unit/test_details.py",)),
    "dreamer.details.numbers": ("split out of dreamer.details", ("tests/unit/test_details.py",)),
    "dreamer.details.versions": ("split out of dreamer.details", ("tests/unit/test_details.py",)),
    "dreamer.hermes.audit.changes": (
        "split out of dreamer.hermes.audit.run",
        ("tests/integration/hermes/audit/test_run.py",),
    ),
    "dreamer.hermes.memory.operations": (
        "split out of dreamer.hermes.memory.store",
        ("tests/unit/hermes/memory/test_store.py",),
    ),
    "dreamer.hermes.memory.refusals": (
        "split out of dreamer.hermes.memory.store",
        ("tests/unit/hermes/memory/test_store.py",),
    ),
    "dreamer.hermes.memory.results": (
        "split out of dreamer.hermes.memory.store",
        ("tests/unit/hermes/memory/test_store.py",),
    ),
    "dreamer.jobs.audit": (
        "split out of dreamer.hermes.configured (moved)",
        ("tests/integration/hermes/test_hermes_compress_audit.py",),
    ),
    "dreamer.jobs.locks": ("split out of dreamer.service.runner", ("tests/integration/test_adversarial.py",)),
    "dreamer.jobs.open": (
        "split out of dreamer.service.runner",
        ("tests/integration/test_peercard_polish.py",),
    ),
    "dreamer.jobs.spec": ("split out of dreamer.service.jobs", ("tests/unit/service/test_status.py",)),
    "dreamer.rollup.context": (
        "split out of dreamer.rollup.pipeline",
        ("tests/integration/rollup/test_pipeline.py",),
    ),
    "dreamer.rollup.dedup_rules": ("split out of dreamer.rollup.dedup", ("tests/unit/rollup/test_dedup.py",)),
    "dreamer.rollup.planning": (
        "split out of dreamer.rollup.pipeline",
        ("tests/integration/rollup/test_pipeline.py",),
    ),
    "dreamer.rollup.verdicts": ("split out of dreamer.rollup.dedup", ("tests/unit/rollup/test_dedup.py",)),
    "dreamer.service.start": (
        "split out of dreamer.service.daemon",
        ("tests/integration/service/test_daemon.py",),
    ),
    "dreamer.state.base": ("split out of dreamer.state.store", ("tests/unit/state/test_store.py",)),
    "dreamer.state.decisions": (
        "new with `dreamer explain`",
        ("tests/integration/commands/test_explain.py",),
    ),
    "dreamer.state.dialect": (
        "the SQL each database spells its own way, through the store's contract on both",
        ("tests/integration/state/test_contract.py",),
    ),
    "dreamer.state.leases": (
        "a part of the store, in its contract on both databases",
        ("tests/integration/state/test_contract.py",),
    ),
    "dreamer.state.pgconn": (
        "the PostgreSQL store's connection, through the store's contract and its opening",
        ("tests/integration/state/test_contract.py", "tests/integration/state/test_pgstore.py"),
    ),
    "dreamer.state.pgschema": (
        "the PostgreSQL store's tables and identity, through its opening",
        ("tests/integration/state/test_pgstore.py",),
    ),
    "dreamer.state.ledger": ("split out of dreamer.state.store", ("tests/unit/state/test_store.py",)),
    "dreamer.state.peerranks": (
        "split out of dreamer.state.store",
        ("tests/integration/test_peercard_ranks.py",),
    ),
    "dreamer.state.vectors": (
        "split out of dreamer.state.store",
        ("tests/integration/test_state_vectors.py",),
    ),
    "dreamer.state.watermarks": ("split out of dreamer.state.store", ("tests/unit/state/test_store.py",)),
    "dreamer.state.wordindex": (
        "split out of dreamer.state.store",
        ("tests/integration/test_word_ranges.py",),
    ),
}


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@cache
def modules() -> dict[str, Path]:
    return {module_name(p): p for p in PACKAGE.rglob("*.py")}


def own_test_files(module: str) -> list[Path]:
    """``dreamer.rollup.gate`` -> ``tests/unit/rollup/test_gate.py`` and the same under
    ``tests/integration``; the package itself (``dreamer/__init__.py``) -> ``test___init__.py``."""
    *room, name = module.split(".")[1:] or ["__init__"]
    return [TESTS.joinpath(tier, *room, f"test_{name}.py") for tier in ("unit", "integration")]


def has_own_test_file(module: str) -> bool:
    return any(path.is_file() for path in own_test_files(module))


@cache
def imported(path: Path) -> frozenset[str]:
    """The package modules ``path`` imports, lazy imports included: ``import dreamer.x.y``,
    ``from dreamer.x.y import ...`` and ``from dreamer.x import y``; a name imported from a package
    that re-exports it counts as imported from the module defining it (not from the package)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name in modules())
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module in modules():
            defining = [defining_modules(node.module, alias.name) for alias in node.names]
            found.update(*defining)
            if not all(defining):  # a name the module itself defines
                found.add(node.module)
    return frozenset(found)


def defining_modules(module: str, name: str) -> set[str]:
    """``from module import name``: ``module.name`` when that is a module, the module the package
    ``module`` re-exports ``name`` from, or nothing more."""
    if f"{module}.{name}" in modules():
        return {f"{module}.{name}"}
    path = modules()[module]
    if path.name != "__init__.py":
        return set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if (
            isinstance(node, ast.ImportFrom)
            and node.module in modules()
            and node.module != module
            and any((alias.asname or alias.name) == name for alias in node.names)
        ):
            return {node.module} | defining_modules(node.module, name)
    return set()


def room(module: str) -> str:
    """``dreamer.rollup.dedup`` -> ``dreamer.rollup``; ``dreamer.cli`` -> ``dreamer.cli``."""
    return ".".join(module.split(".")[:2])


def exercises(test_file: Path, module: str) -> bool:
    """``test_file`` imports ``module``; or imports a module that imports it, directly or through
    modules of ``module``'s room; or runs ``python -m dreamer``, which can load ``module``."""
    direct = imported(test_file)
    if module in direct:
        return True
    seen = {m for used in direct for m in imported(modules()[used]) if room(m) == room(module)}
    todo = list(seen)
    while todo:
        current = todo.pop()
        if current == module:
            return True
        fresh = {m for m in imported(modules()[current]) if room(m) == room(module)} - seen
        seen |= fresh
        todo.extend(fresh)
    return runs_dreamer(test_file) and module in loadable_by_the_command()


def runs_dreamer(test_file: Path) -> bool:
    """An argument list holding ``"-m", "dreamer"``, in the file or in a ``tests`` module it imports."""
    tree = ast.parse(test_file.read_text(encoding="utf-8"))
    helpers = [
        REPO.joinpath(*node.module.split(".")).with_suffix(".py")
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("tests.")
    ]
    return _runs_dreamer(tree) or any(
        path.is_file() and _runs_dreamer(ast.parse(path.read_text(encoding="utf-8"))) for path in helpers
    )


def _runs_dreamer(tree: ast.AST) -> bool:
    argv = "-m dreamer".split()  # not written as a list, or this file would match itself
    for node in ast.walk(tree):
        if isinstance(node, ast.List | ast.Tuple):
            values = [e.value if isinstance(e, ast.Constant) else None for e in node.elts]
            if any(values[i : i + 2] == argv for i in range(len(values) - 1)):
                return True
    return False


@cache
def loadable_by_the_command() -> frozenset[str]:
    """Every module ``python -m dreamer`` can import, lazy imports included."""
    seen = {"dreamer.__main__"}
    todo = ["dreamer.__main__"]
    while todo:
        fresh = set(imported(modules()[todo.pop()])) - seen
        seen |= fresh
        todo.extend(fresh)
    return frozenset(seen)


def holds_logic(path: Path) -> bool:
    """A function or lambda anywhere, other than the ``...`` stubs of a Protocol."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    stubs: set[ast.AST] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and any(ast.unparse(b).endswith("Protocol") for b in node.bases):
            stubs.update(
                item
                for item in node.body
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef) and _is_stub(item)
            )
    return any(
        isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) and node not in stubs
        for node in ast.walk(tree)
    )


def _is_stub(function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    body = function.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]  # the docstring
    return all(isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant) for s in body)


class TestEveryModuleHasItsTests:
    def test_a_module_without_its_own_test_file_is_listed_with_a_reason(self) -> None:
        """Each package module has ``tests/unit/<room>/test_<module>.py`` (or the same under
        ``tests/integration``) or an entry in WITHOUT_OWN_FILE saying why not."""
        missing = sorted(m for m in modules() if not has_own_test_file(m) and m not in WITHOUT_OWN_FILE)
        assert missing == [], f"no test file of their own and no reason: {missing}"

    def test_a_listed_module_exists_and_still_has_no_test_file_of_its_own(self) -> None:
        """An entry whose module is gone, or now has its own test file, is removed from the table."""
        gone = sorted(m for m in WITHOUT_OWN_FILE if m not in modules())
        assert gone == [], f"listed but no longer in the package: {gone}"
        tested = sorted(m for m in WITHOUT_OWN_FILE if m in modules() and has_own_test_file(m))
        assert tested == [], f"listed but now with a test file of their own: {tested}"

    def test_each_listed_test_file_exists_and_exercises_its_module(self) -> None:
        """A reason names the test files that exercise the module; each exists and imports the
        module (or a module reaching it), or runs ``python -m dreamer``."""
        wrong = [
            f"{module}: {name}"
            for module, (_, names) in sorted(WITHOUT_OWN_FILE.items())
            for name in names
            if module in modules() and not ((REPO / name).is_file() and exercises(REPO / name, module))
        ]
        assert wrong == [], f"test files that do not exist or do not exercise the module: {wrong}"

    def test_only_a_module_holding_no_logic_goes_without_a_test_file(self) -> None:
        """An entry names at least one test file unless its reason is "no logic: ...", and a module
        so listed holds no function (Protocol stubs aside), so it cannot quietly grow some."""
        unnamed = sorted(
            m for m, (why, names) in WITHOUT_OWN_FILE.items() if not names and not why.startswith(NO_LOGIC)
        )
        assert unnamed == [], f"listed without a test file and not as holding no logic: {unnamed}"
        with_logic = sorted(
            m
            for m, (why, _) in WITHOUT_OWN_FILE.items()
            if why.startswith(NO_LOGIC) and m in modules() and holds_logic(modules()[m])
        )
        assert with_logic == [], f"listed as holding no logic but define functions: {with_logic}"
