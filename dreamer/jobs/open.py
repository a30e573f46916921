"""The one place that opens what a run or a command works on: the backend the configuration names,
the embedder for the semantic dedup or a hybrid recall, and the state file.

Every caller (the roll-up job, the audit job, ``status``, ``card``, ``banks``, ``recall``,
``reflect``, ``retain``, ``explain``, the demo, the Hermes provider) asks :func:`open_for` for what it
needs and gets it closed again, in the reverse order, when its block ends, also on an error; the
service, which keeps its state file open for its whole life, opens it with :func:`open_state`. A
second state backend plugs in here, in :func:`open_state`, and nowhere else.
"""

from __future__ import annotations

import functools
import tempfile
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from dreamer.backends import MemoryBackend, open_backend
from dreamer.config import Config
from dreamer.embeddings import Embedder
from dreamer.errors import StateFileError
from dreamer.log import get_logger
from dreamer.state import SCHEMA_VERSION, StateStore

#: The recall's logger: a ledger that will not open is the recall's news.
log = get_logger("dreamer.readside")
#: The state's: an upgrade before use.
state_log = get_logger("dreamer.state")

#: ``"write"``: the state file, created when there is none (a run). ``"there"``: the state file,
#: an error when there is none (the daemon's runs: the daemon made it at start and checks before
#: each run that it is still there, so a run never starts a new, empty one beside a removed one).
#: ``"present"``: the state file when there is one (an error when it will not open), else None: a
#: command that only reads (``status``, ``card``) never creates one. ``"read"``: the state file when
#: there is one and it opens, else None (a recall goes on without the ledger's marks; the failure
#: is logged).
StateNeed = Literal["write", "there", "present", "read"]


@dataclass(frozen=True, slots=True)
class Opened:
    """What :func:`open_for` opened. ``backend`` and ``state`` are there when they were asked for
    (asking for one that was not is a bug, said so); ``embedder`` and ``ledger`` may be None."""

    opened_backend: MemoryBackend | None
    embedder: Embedder | None
    ledger: StateStore | None

    @property
    def backend(self) -> MemoryBackend:
        if self.opened_backend is None:
            raise RuntimeError("open_for was not asked for a backend")
        return self.opened_backend

    @property
    def state(self) -> StateStore:
        if self.ledger is None:
            raise RuntimeError("open_for was not asked for the state file (state='write')")
        return self.ledger


@asynccontextmanager
async def open_for(
    config: Config,
    *,
    backend: bool = False,
    search: bool = False,
    embedder: Embedder | None = None,
    use_backend: MemoryBackend | None = None,
    state: StateNeed | None = None,
    reading: bool = False,
    judging: bool = False,
) -> AsyncIterator[Opened]:
    """Open what a caller needs from ``config``, and close what was opened here when the block ends.

    - ``backend``: the backend ``backend.kind`` names (:func:`dreamer.backends.open_backend`).
    - ``search``: with ``backend``, the configured embedder too when the backend is the embedded
      store, so its recall is hybrid and a retained unit gets its vector (Hindsight embeds on its
      own server). The embedder is closed with the block.
    - ``embedder``: an embedder the caller keeps (the roll-up's semantic judge), handed to the
      backend and not closed here.
    - ``use_backend``: a backend the caller keeps (the demo's store, a test's fault injector),
      used instead of opening one and not closed here.
    - ``state``: the state file, see :data:`StateNeed`.
    - ``reading``: the caller only reads the backend (``status``, ``banks``, ``recall``): an
      embedded store that is not there yet is read as the empty store it would be, from a
      throwaway file, instead of being created where the configuration puts it.
    - ``judging``: the configured embedder whatever the backend (``dreamer explain --text`` judges
      as a run does); handed to an embedded store as with ``search``, closed with the block.
    """
    async with AsyncExitStack() as stack:
        ledger = None
        if state == "write" or (state == "present" and state_there(config)):
            ledger = stack.enter_context(open_state(config))
        elif state == "there":
            ledger = stack.enter_context(open_state(config, existing=True))
        elif state == "read":
            ledger = open_ledger(config)
            if ledger is not None:
                stack.callback(ledger.close)
        opened: MemoryBackend | None = use_backend
        searching = search and use_backend is None and config.backend.kind == "embedded"
        if embedder is None and (searching or judging):
            embedder = _searching_embedder(config)
            if embedder is not None:
                stack.push_async_callback(embedder.aclose)
        if backend and opened is None:
            if reading and config.backend.kind == "embedded" and not _there(config.embedded_path):
                config = _with_empty_store(config, Path(stack.enter_context(tempfile.TemporaryDirectory())))
            opened = open_backend(config, embedder=embedder)
            stack.push_async_callback(opened.aclose)
        yield Opened(opened, embedder, ledger)


def _with_empty_store(config: Config, directory: Path) -> Config:
    """``config`` with its embedded store moved to a new, empty file in ``directory``."""
    embedded = config.backend.embedded.model_copy(update={"path": directory / "empty.sqlite3"})
    backend = config.backend.model_copy(update={"embedded": embedded})
    return config.model_copy(update={"backend": backend})


def _there(path: Path) -> bool:
    """A file or a link (dangling too): a link is refused by name when opened, never taken as none."""
    return path.is_symlink() or path.exists()


def _searching_embedder(config: Config) -> Embedder | None:
    from dreamer.embeddings.factory import make_embedder  # the embedding packages load on use

    return make_embedder(config)


def open_state(config: Config, *, existing: bool = False) -> StateStore:
    """The state ``[state]`` names: the file at ``config.state_path``, created (with its directory)
    when there is none (``existing``: a missing file is a StateFileError), or the PostgreSQL
    schema, its tables made when it has none."""
    if config.state.backend == "postgres":
        from dreamer.state.pgstore import open_postgres  # the driver loads only when it is used

        return open_postgres(config.state)
    if not existing:
        config.state_dir.mkdir(parents=True, exist_ok=True)
    upgrading = functools.partial(_upgrading, config.state_path)
    return StateStore.open(config.state_path, on_upgrade=upgrading, existing=existing)


def _upgrading(path: Path, schema: int) -> None:
    """Say, before it starts, that the state file is being upgraded: with a large ledger it takes
    minutes (about 2.6 per million cards to schema 9), during which a command prints nothing else."""
    state_log.warning(
        "upgrading the state file to this Dreamer's schema first; with a large ledger this takes "
        "minutes (stopped, it is undone and starts again next time)",
        path=str(path),
        schema=schema,
        to=SCHEMA_VERSION,
    )


def state_there(config: Config) -> bool:
    """Whether there is a state to read: the file (or a link, refused by name when opened), or,
    on PostgreSQL, always (a schema with no tables yet reads as an empty state)."""
    return config.state.backend == "postgres" or _there(config.state_path)


def state_name(config: Config) -> str:
    """How messages name the configured state: its file, or its PostgreSQL database and schema."""
    if config.state.backend == "postgres":
        from dreamer.state.pgstore import describe

        return describe(config.state)
    return str(config.state_path)


def missing_state(config: Config) -> str:
    """What a reading command says when the state file it looked for is not there: where it
    looked, and how to point it at the state a service keeps elsewhere."""
    return (
        f"no state file at {config.state_path}: nothing has run with this configuration yet, or "
        "its state is kept elsewhere (a service keeps it in its $STATE_DIRECTORY, /var/lib/dreamer "
        "for the shipped unit); set state_dir in the configuration to that directory"
    )


def open_ledger(config: Config) -> StateStore | None:
    """The state file, for the ledger's supersession marks; None when there is none yet (a recall
    never creates one) or it cannot be opened (logged: the recall goes on without those marks)."""
    path = config.state_path
    if config.state.backend == "sqlite" and not path.is_file():
        return None
    try:
        return open_state(config)
    except StateFileError as exc:
        log.warning("recall without the ledger's supersession marks", reason=str(exc))
        return None
