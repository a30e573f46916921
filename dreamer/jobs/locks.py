"""The run locks: one roll-up of a profile at a time, and one roll-up into an upstream bank at a
time, across the daemon and the CLI. Each is a flock under ``<state_dir>/locks/``, never unlinked
and never a followed link (:class:`dreamer.slot.SlotLock`)."""

from __future__ import annotations

import urllib.parse

from dreamer.config import Config
from dreamer.errors import RunBusyError
from dreamer.slot import SlotLock

#: How long a roll-up waits for another run of the same profile before it reports ``busy``.
RUN_LOCK_WAIT_S = 2.0


def profile_run_lock(config: Config, profile: str) -> SlotLock:
    """The lock that makes runs of one profile one at a time, across the daemon and the CLI: a
    flock on ``<state_dir>/locks/rollup-<profile>.lock``."""
    return _run_lock(config, "rollup-" + profile, f"roll-up of profile {profile!r}", "its run lock")


def upstream_run_lock(config: Config, profile: str) -> SlotLock:
    """The lock that makes runs into one upstream bank one at a time, across processes: two
    profiles judged at once would each miss the other's new cards and promote the same fact twice
    into an append-only bank. A flock on ``<state_dir>/locks/upstream-<bank id>.lock``."""
    bank_id = config.upstream_bank_id(profile)
    return _run_lock(config, "upstream-" + bank_id, f"roll-up into the upstream bank {bank_id!r}", "its lock")


def _run_lock(config: Config, name: str, what: str, lock: str) -> SlotLock:
    """A run lock under ``<state_dir>/locks/``: waited for ``RUN_LOCK_WAIT_S``, then ``busy``."""
    return SlotLock(
        config.state_dir / "locks" / (urllib.parse.quote(name, safe="") + ".lock"),
        acquire_timeout_s=RUN_LOCK_WAIT_S,
        poll_interval_s=0.1,
        busy=lambda path, waited: RunBusyError(
            f"another {what} is running ({lock} {path} stayed taken for {waited:g}s); "
            "this one is skipped and the next cycle runs it"
        ),
        follow_symlinks=False,
    )
