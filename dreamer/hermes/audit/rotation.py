"""Canary rotation: both memory files get a new canary token in one locked step, recorded in the ledger.

Holding the audit's lock and the sidecar locks of MEMORY.md and USER.md (the locks Hermes'
MemoryStore takes, in the audit's order), a rotation appends a ROTATING block (the new token, both
files' canary fingerprints before and after), replaces each file atomically, then appends a
ROTATED block. A rotation that dies between the two files leaves ROTATING as the last canary block,
which the audit reports as CRITICAL until a new rotation finishes the job; it is never accepted
silently. A rotation refuses to run over canaries that already disagree with the ledger, which
would launder a hand edit or a restored stale copy. Why: docs/design/hermes-audit.md.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta

from dreamer.errors import AuditError
from dreamer.hermes.audit.canary import (
    CANARY_MARKER,
    ROTATED,
    ROTATING,
    canary_breach,
    canary_fingerprint,
    canary_lines,
    is_own_canary_line,
    last_canary_block,
    new_canary_token,
    with_canary_token,
)
from dreamer.hermes.audit.ledger import LedgerEntry, RotationRecord, append_rotation, read_ledger
from dreamer.hermes.audit.settings import AgentFiles, AuditSettings, with_hermes_limits
from dreamer.hermes.memory.disk import read_memory_text, write_memory_file
from dreamer.hermes.memory.entries import Target, joined_length, parse_entries
from dreamer.hermes.memory.limits import MemoryLimitsError
from dreamer.hermes.memory.locking import exclusive_lock, lock_path_for, open_no_follow
from dreamer.hermes.memory.store import find_external_edit

__all__ = [
    "CanaryRotation",
    "RotationRefusedError",
    "memory_files_locked",
    "rotate_canaries",
    "rotation_due",
    "waiting_for_writers",
]


class RotationRefusedError(AuditError, OSError):
    """The canaries could not be rotated; the message says why and what to do. Nothing was changed.
    Catch it (or `OSError`, which a rotation raises too) where a rotation is asked for, to report it."""


@dataclass(frozen=True)
class CanaryRotation:
    """A finished rotation: the new token, both files' new canary fingerprints, and what it finished."""

    token: str
    canary_memory: str
    canary_user: str
    finished_interrupted: bool = False


@contextlib.contextmanager
def memory_files_locked(agent: AgentFiles) -> Iterator[None]:
    """Hold the sidecar locks of MEMORY.md then USER.md (the order every multi-file holder uses)."""
    with exclusive_lock(agent.memory_path), exclusive_lock(agent.user_path):
        yield


@contextlib.contextmanager
def waiting_for_writers(agent: AgentFiles) -> Iterator[None]:
    """Hold the sidecar locks of MEMORY.md and USER.md that exist, creating none (a dry run writes
    nothing): a rotation in progress has created both, so a reader inside sees it whole."""
    with contextlib.ExitStack() as held:
        for path in (agent.memory_path, agent.user_path):
            try:
                fd = open_no_follow(lock_path_for(path), os.O_RDWR)
            except FileNotFoundError:
                continue
            held.callback(os.close, fd)
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield


def rotation_due(settings: AuditSettings, ledger: tuple[LedgerEntry, ...], now: datetime) -> bool:
    """Whether a scheduled rotation is due: `canary_rotation_days` since the last rotation, or since
    the first block that recorded canaries when there was none."""
    days = settings.canary_rotation_days
    if days is None:
        return False
    rotations = [e for e in ledger if e.status == ROTATED]
    since = rotations[-1] if rotations else next((e for e in ledger if "canary_memory" in e.fields), None)
    return since is not None and now - since.timestamp >= timedelta(days=days)


def rotate_canaries(
    agent: AgentFiles,
    settings: AuditSettings,
    now: datetime,
    *,
    trigger: str = "requested",
    holding_audit_lock: bool = False,
    between_files: Callable[[], None] | None = None,
) -> CanaryRotation:
    """Give both memory files of `agent` a new canary token; raises `RotationRefusedError` (nothing
    changed) or `OSError`. `between_files` runs after MEMORY.md is written (tests inject a crash)."""
    with contextlib.ExitStack() as held:
        if not holding_audit_lock:
            held.enter_context(exclusive_lock(agent.state_path))
        held.enter_context(memory_files_locked(agent))
        return _rotate(agent, settings, now, trigger, between_files)


def _rotate(
    agent: AgentFiles,
    settings: AuditSettings,
    now: datetime,
    trigger: str,
    between_files: Callable[[], None] | None,
) -> CanaryRotation:
    try:  # the limits Hermes enforces on the files
        settings = with_hermes_limits(settings, agent)
    except MemoryLimitsError as exc:
        raise RotationRefusedError(f"{exc}; nothing was rotated") from exc
    raws: dict[Target, str] = {}
    for target in Target:
        path = agent.path_for(target)
        try:
            raw = read_memory_text(path) or ""
        except (OSError, UnicodeDecodeError) as exc:
            raise RotationRefusedError(f"cannot read {path}: {exc}; nothing was rotated") from exc
        if not canary_lines(raw):
            raise RotationRefusedError(f"{path} has no canary line; restore it, then rotate")
        if not any(is_own_canary_line(line) for line in raw.split("\n")):
            raise RotationRefusedError(
                f"{path} only quotes the canary marker inside other text; put a line of its own "
                f"holding '{CANARY_MARKER}' back, then rotate"
            )
        if find_external_edit(raw, settings.limit_for(target)):
            raise RotationRefusedError(
                f"{path} was edited outside the memory store; run the audit first, then rotate"
            )
        raws[target] = raw
    before = {t: canary_fingerprint(canary_lines(raws[t])) for t in Target}
    ledger = read_ledger(agent.ledger_path)
    breach = canary_breach(before[Target.MEMORY], before[Target.USER], ledger)
    interrupted = _interrupted_rotation(ledger, before)
    if breach and not interrupted:
        raise RotationRefusedError(f"not rotating: {breach}")

    token = new_canary_token()
    rotated = {t: with_canary_token(raws[t], token) for t in Target}
    for target in Target:
        size, limit = joined_length(parse_entries(rotated[target])), settings.limit_for(target)
        if size > limit:
            raise RotationRefusedError(
                f"the new canary would put {target.filename} at {size:,}/{limit:,} chars; "
                "free some room first"
            )
    after = {t: canary_fingerprint(canary_lines(rotated[t])) for t in Target}
    note = "finishes the interrupted rotation before it" if interrupted else ""

    def record(status: str) -> RotationRecord:
        return RotationRecord(
            now, status, trigger, token, after[Target.MEMORY], after[Target.USER],
            before[Target.MEMORY], before[Target.USER], note,
        )  # fmt: skip

    append_rotation(agent.ledger_path, record(ROTATING))  # the intent first: a crash below is visible
    for target in Target:
        # Written as the store writes it: through a link the folder's owner owns, mode 0600.
        write_memory_file(agent.path_for(target), rotated[target])
        if target is Target.MEMORY and between_files is not None:
            between_files()
    append_rotation(agent.ledger_path, record(ROTATED))
    return CanaryRotation(token, after[Target.MEMORY], after[Target.USER], bool(interrupted))


def _interrupted_rotation(ledger: tuple[LedgerEntry, ...], current: dict[Target, str]) -> bool:
    """True when the last canary block is an unfinished rotation and each file holds its old or new canary."""
    last = last_canary_block(ledger)
    if last is None or last.status != ROTATING:
        return False
    return all(
        current[t] in (last.fields.get(f"canary_{key}"), last.fields.get(f"canary_{key}_before"))
        for t, key in ((Target.MEMORY, "memory"), (Target.USER, "user"))
    )
