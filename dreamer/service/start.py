"""Starting the service: ``dreamer run`` from a configuration file to a serving :class:`Daemon`.

An invalid configuration exits 78 before anything starts; a state file that needs an upgrade asks
systemd for the time first; a state file that cannot be opened exits 73. Logging is set up from the
configuration, and set up again (its secrets kept masked) on every reload.
"""

from __future__ import annotations

import asyncio
import faulthandler
import logging
import sys
from collections.abc import Iterable
from pathlib import Path

from dreamer.config import Config, load_config
from dreamer.embeddings.factory import check_embeddings
from dreamer.errors import ConfigError, ExitCode
from dreamer.jobs.open import open_state, state_name
from dreamer.jobs.spec import JobRunner
from dreamer.log import LogFormat, LogLevel, configure_logging, get_logger, is_journal_stream
from dreamer.service.daemon import Daemon, log_embedder
from dreamer.service.notify import Notifier
from dreamer.service.runner import default_runner
from dreamer.state import StateStore
from dreamer.state.schema import needs_upgrade

log = get_logger("dreamer.daemon")

#: How long an upgrade of the state file at start may take before READY (asked of systemd).
STATE_UPGRADE_TIMEOUT_US = 30 * 60 * 1_000_000


#: The page cache of the service's own state connection, open for the daemon's life (SQLite's
#: default is 2 MiB): the pages of the run records it writes filled it, and bench.daemon saw the
#: daemon grow by 2.1 MiB over 1,000 idle cycles; with 256 KiB, by 0.08 MiB.
RECORDER_CACHE_KIB = 256


def open_recorder(config: Config) -> StateStore:
    """The state the service keeps open to record runs (:func:`open_state`), with a small cache;
    its commits leave the checkpoint to the daemon, as its runs' do (`jobs.upkeep.after_run`)."""
    store = open_state(config)
    try:
        store.limit_page_cache(RECORDER_CACHE_KIB)
        store.defer_checkpoints()
    except BaseException:
        store.close()
        raise
    return store


def _quiet_scheduler_logs(level: LogLevel) -> None:
    # APScheduler narrates every run at info level and reports missed or skipped runs as plain
    # warnings; the daemon logs those itself with the job's profile and bank (see
    # _on_scheduler_event), so below debug only the scheduler's errors get through.
    logging.getLogger("apscheduler").setLevel(logging.NOTSET if level == "debug" else logging.ERROR)


def _say(lines: Iterable[str]) -> None:
    """Print to stderr for a person at a terminal; under the journal the JSON record says it already."""
    if is_journal_stream(sys.stderr):
        return
    for line in lines:
        print(line, file=sys.stderr)


def run_daemon(
    config_path: Path,
    *,
    runner: JobRunner | None = None,
    log_format: LogFormat = "auto",
    log_level: LogLevel | None = None,
) -> int:
    """Run the service until stopped; returns the process exit status (0, 78, 73 or 70).

    Before READY it logs which embedder the dedup uses and why
    (:func:`~dreamer.service.daemon.log_embedder`; again after each reload).

    ``runner`` replaces the default job body (see :mod:`dreamer.service.runner`); ``log_level`` overrides the
    configuration's ``log.level``.
    """
    faulthandler.enable()
    configure_logging(log_format=log_format, level=log_level or "info")
    _quiet_scheduler_logs(log_level or "info")
    try:
        config = load_config(config_path)
        embedder = check_embeddings(config, str(config_path))
    except ConfigError as exc:
        log.error("invalid configuration; not starting", config=str(config_path), problems=exc.problems)
        _say(exc.problems)
        return ExitCode.CONFIG

    secrets: set[str] = set()

    def apply_logging(cfg: Config) -> None:
        # Keep masking earlier keys too: a run that started before a reload may still hold one.
        secrets.update(cfg.secrets())
        level = log_level or cfg.log.level
        configure_logging(log_format=log_format, level=level, secrets=secrets)
        _quiet_scheduler_logs(level)

    apply_logging(config)
    log_embedder(config, embedder)
    notifier = Notifier.from_environ()
    if config.state.backend == "sqlite" and needs_upgrade(config.state_path):
        # The upgrade runs in one transaction before READY: about a minute per million ledger cards
        # for schema 5. Ask systemd for the time, or TimeoutStartSec would kill it and the restart
        # would begin again from the start, every time. (`open_state` logs the upgrade.)
        notifier.send(
            {"EXTEND_TIMEOUT_USEC": STATE_UPGRADE_TIMEOUT_US, "STATUS": "upgrading the state file"}
        )
    try:
        store = open_recorder(config)
    except Exception as exc:
        where = state_name(config)
        fix = "check [state]" if config.state.backend == "postgres" else "check state_dir and its permissions"
        message = f"cannot open the state database {where}: {exc}; {fix}"
        log.error("cannot open the state database; not starting", path=str(where), error=str(exc))
        _say([message])
        return ExitCode.CANTCREAT

    daemon = Daemon(
        config,
        config_path,
        runner=runner or default_runner(),
        recorder=store,
        notifier=notifier,
        open_recorder=open_recorder,
        on_config=apply_logging,
    )
    try:
        return asyncio.run(daemon.serve())
    except Exception:
        log.exception("daemon crashed")
        return ExitCode.SOFTWARE
    finally:
        store.close()
        for held in {id(r): r for r in (daemon.recorder, *daemon.retired_recorders)}.values():
            if isinstance(held, StateStore) and held is not store:
                held.close()
