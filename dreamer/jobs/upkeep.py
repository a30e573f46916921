"""What the daemon does with the state once a run has finished, outside the run's time.

- **Checkpoint** (:func:`checkpoint_state`): the daemon's connections leave SQLite's checkpoint to
  this point instead of the commit that takes the log past 1,000 pages (a roll-up writes about that
  many: at 100k cards 0.16 s of a run's 0.19 s commit). Why: ``docs/design/state.md``.
- **Older rows upgraded** (:func:`upgrade_ledger`): the ledger's rows written before, a bounded
  batch at a time, given the stored sketch this code writes, with its analysis
  (:func:`dreamer.rollup.judging.upgrade_sketches`), so the judge compares such a card without
  analysing its text. A 1M-card ledger written before is done within a day of hourly runs.

Both run in a worker thread on a connection of their own, so the event loop (which records runs on
the service's connection) never waits for them; a failure is a warning, never a run's.
"""

from __future__ import annotations

import time

import anyio

from dreamer.config import Config
from dreamer.errors import StateFileError
from dreamer.jobs.open import open_state, state_name
from dreamer.log import get_logger
from dreamer.state import StateStore

log = get_logger("dreamer.jobs")

#: Rows read and written in one transaction (a few MiB of texts and sketches at once).
UPGRADE_BATCH = 2_000
#: Batches after one run: 20,000 rows, about 3 s of one core where every row needs its analysis,
#: a fraction of that where none does.
UPGRADE_BATCHES = 10

#: The states this process found upgraded: not opened again after each run (a daemon of many idle
#: profiles would open its state once a run for nothing).
_UPGRADED: set[str] = set()


async def after_run(config: Config, recorder: object) -> None:
    """The state's upkeep once a run has finished: the checkpoint, then a bounded upgrade of
    older rows. Nothing without a state the daemon holds (``recorder``)."""
    if isinstance(recorder, StateStore):
        await checkpoint_state(recorder)
        await upgrade_ledger(config)


async def checkpoint_state(state: StateStore) -> None:
    """Write the state file's log back into it (:meth:`StateStore.checkpoint`), logged with what it
    wrote and how long it took. A failure is a warning: the log keeps every page, and the next
    checkpoint, or closing the file, writes them back. Nothing on PostgreSQL, whose server
    checkpoints on its own."""
    if state.path is None:
        return
    started = time.monotonic()
    try:
        pages = await anyio.to_thread.run_sync(state.checkpoint)
    except StateFileError as exc:
        log.warning("could not checkpoint the state file", error=str(exc))
        return
    log.info("state file checkpointed", pages=pages, seconds=round(time.monotonic() - started, 3))


async def upgrade_ledger(
    config: Config, *, batch: int = UPGRADE_BATCH, batches: int = UPGRADE_BATCHES
) -> None:
    """Upgrade up to ``batches`` batches of ``batch`` older ledger rows; logged when it upgraded
    some. A state that fails is a warning: the rows keep what they had, and the judge analyses
    their texts as before."""
    where = state_name(config)
    if where in _UPGRADED:
        return
    started = time.monotonic()
    try:
        upgraded, done = await anyio.to_thread.run_sync(_upgrade, config, batch, batches)
    except StateFileError as exc:
        log.warning("could not upgrade the ledger's older cards", error=str(exc))
        return
    if done:
        _UPGRADED.add(where)
    if upgraded:
        seconds = round(time.monotonic() - started, 3)
        log.info("ledger cards given their analyses", cards=upgraded, done=done, seconds=seconds)


def _upgrade(config: Config, batch: int, batches: int) -> tuple[int, bool]:
    from dreamer.rollup.judging import upgrade_sketches  # the roll-up room loads with the first run

    upgraded, done = 0, False
    # Never a new file: the state may have been removed since the run (the daemon then runs no
    # more until it is back; a new, empty one here would make it start over).
    with open_state(config, existing=True) as state:
        for _ in range(batches):
            count, done = upgrade_sketches(state, batch)
            upgraded += count
            if done:
                break
    return upgraded, done
