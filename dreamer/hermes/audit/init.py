"""Setting an agent up for the audit: a canary line in each memory file, Dreamer in its registry.

A fresh agent has neither, so every audit of it is CRITICAL (no canary line) and, with canaries
placed, a dry run (Dreamer is not a registered writer). `init_agent` adds what is missing and
nothing else, so a second run changes nothing:

- MEMORY.md and USER.md without a canary line of their own get one, appended as a last entry in the
  format a rotation writes (``CANARY: Do not modify this line (token <12 hex>)``, one token for the
  run); every byte before it is kept, bar trailing whitespace, which Hermes' store strips anyway;
- MEMORY_WRITERS.md without the writer gets the line ``- dreamer`` appended (created if absent).

Everything is read and judged first while waiting on the lock files that exist (creating none), so
a refusal (`InitRefusedError`), a dry run and a run with nothing to add leave the folder as it was.
Only then does it take the locks a rotation takes (the audit's, then MEMORY.md's and USER.md's
sidecar locks), judge again under them and write each file as the store does (`write_memory_file`:
atomically, mode 0600, the owner kept).

It refuses to write through a symbolic link, to read what is not UTF-8 text, to register the writer
in a registry that names it without registering it ("- ~~dreamer~~"), to push a file over its
limit, and to add a canary where the ledger has already recorded one: a canary lost since is the
breach the audit reports, never something to paper over. Why: docs/design/hermes-audit.md.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from dreamer.config.files import read_text_file
from dreamer.errors import AuditError
from dreamer.hermes.audit.canary import CANARY_MARKER, is_own_canary_line, last_canary_block, new_canary_token
from dreamer.hermes.audit.ledger import LedgerEntry, read_ledger
from dreamer.hermes.audit.rotation import memory_files_locked, waiting_for_writers
from dreamer.hermes.audit.settings import AgentFiles, AuditSettings, with_hermes_limits
from dreamer.hermes.audit.writers import registered_writers
from dreamer.hermes.memory.disk import read_memory_text, write_memory_file
from dreamer.hermes.memory.entries import ENTRY_DELIMITER, Target, joined_length, parse_entries
from dreamer.hermes.memory.limits import MemoryLimitsError
from dreamer.hermes.memory.locking import exclusive_lock, lock_path_for, refuse_symlink

__all__ = ["AgentInit", "InitRefusedError", "InitStep", "init_agent", "init_hint", "new_agent_fix"]

#: What a dry run shows in place of the token a real run draws.
TOKEN_PLACEHOLDER = "<12 random hex digits>"


def init_hint(agent_name: str) -> str:
    """The command that sets `agent_name` up for the audit (for the audit's messages)."""
    return f"dreamer audit --init --agent {agent_name}"


def new_agent_fix(agent_name: str) -> str:
    """What the audit of an agent that lacks a canary line, and has never recorded one, tells to do."""
    return (
        f"a new agent has none yet: run `{init_hint(agent_name)}` to add them (it registers Dreamer "
        "too); otherwise restore the canary line, then rerun the audit"
    )


class InitRefusedError(AuditError, OSError):
    """The agent could not be set up for the audit; the message names the file and the fix, and
    nothing was changed. Catch it (or `OSError`) where `init_agent` is called, to report it."""


@dataclass(frozen=True)
class InitStep:
    """One file of the set-up: the line added to it (or that a dry run would add), or why none."""

    path: Path
    line: str = ""
    unchanged: str = ""
    new_text: str = ""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (the new text is left out: the line is what changes)."""
        return {"file": str(self.path), "line": self.line or None, "unchanged": self.unchanged or None}


@dataclass(frozen=True)
class AgentInit:
    """What `init_agent` did to one agent (or, for a dry run, would do)."""

    agent: str
    dry_run: bool
    steps: tuple[InitStep, ...]

    @property
    def changed(self) -> bool:
        """Whether a line was (or, in a dry run, would be) added anywhere."""
        return any(step.line for step in self.steps)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "agent": self.agent,
            "dry_run": self.dry_run,
            "changed": self.changed and not self.dry_run,
            "would_change": self.changed if self.dry_run else None,
            "files": [step.to_dict() for step in self.steps],
        }


def init_agent(agent: AgentFiles, settings: AuditSettings, *, dry_run: bool = False) -> AgentInit:
    """Add the canary lines and the registry entry `agent` lacks; raises `InitRefusedError` (or
    `OSError` from a lock or a write) with nothing changed by the refusal."""
    if not agent.memories_dir.is_dir():
        raise InitRefusedError(
            f"memory directory {agent.memories_dir} of agent {agent.name} not found; check "
            f"agents.{agent.name}.memories_dir in the config (init creates no directory)"
        )
    try:  # the limits Hermes enforces on the files
        settings = with_hermes_limits(settings, agent)
    except MemoryLimitsError as exc:
        raise InitRefusedError(f"{exc}; nothing was changed") from exc
    for path in (agent.state_path, agent.memory_path, agent.user_path):
        refuse_symlink(lock_path_for(path))  # before any lock is taken (and created)
    token = new_canary_token()
    with waiting_for_writers(agent):  # judged first without creating a lock: a refusal leaves no trace
        steps = _plan(agent, settings, token)
    if dry_run:  # the line is shown without the token: a real run draws its own
        shown = (replace(s, line=s.line.replace(token, TOKEN_PLACEHOLDER), new_text="") for s in steps)
        return AgentInit(agent.name, True, tuple(shown))
    if not any(step.line for step in steps):
        return AgentInit(agent.name, False, steps)  # set up already: not even a lock file is created
    with exclusive_lock(agent.state_path), memory_files_locked(agent):
        steps = _plan(agent, settings, token)  # again under the locks: a writer may have come between
        for step in steps:
            if step.line:
                write_memory_file(step.path, step.new_text)
    return AgentInit(agent.name, False, steps)


def _plan(agent: AgentFiles, settings: AuditSettings, token: str) -> tuple[InitStep, ...]:
    try:
        ledger = read_ledger(agent.ledger_path)
    except OSError as exc:
        raise InitRefusedError(f"{exc}; fix it or move it aside, then rerun") from exc
    line = f"{CANARY_MARKER} (token {token})"
    steps = [_canary_step(agent.path_for(t), settings.limit_for(t), line, ledger) for t in Target]
    steps.append(_registry_step(agent.writers_path, settings.writer_name))
    return tuple(steps)


def _canary_step(path: Path, limit: int, line: str, ledger: tuple[LedgerEntry, ...]) -> InitStep:
    """MEMORY.md or USER.md: unchanged when it has a canary line of its own, else the line appended."""
    try:
        raw = read_memory_text(path) or ""
    except (OSError, UnicodeDecodeError) as exc:
        raise InitRefusedError(
            f"cannot read {path}: {exc}; make it a readable UTF-8 text file (or move it aside), then rerun"
        ) from exc
    if any(is_own_canary_line(text) for text in raw.split("\n")):
        return InitStep(path, unchanged="has a canary line")
    recorded = last_canary_block(ledger)
    if recorded is not None:
        stamp = recorded.timestamp.isoformat(timespec="seconds")
        raise InitRefusedError(
            f"{path} has no canary line of its own, but the audit ledger recorded its canary at {stamp}: "
            "a lost canary is what the audit reports as CRITICAL, and init does not replace one; restore "
            "the line by hand, then rerun the audit"
        )
    _refuse_link(path, line)
    new_text = f"{raw.rstrip()}{ENTRY_DELIMITER}{line}" if raw.strip() else line
    size = joined_length(parse_entries(new_text))
    if size > limit:
        raise InitRefusedError(
            f"the canary line would put {path} at {size:,}/{limit:,} chars; remove or shorten an entry "
            "(dreamer memory remove), then rerun"
        )
    return InitStep(path, line=line, new_text=new_text)


def _registry_step(path: Path, writer: str) -> InitStep:
    """MEMORY_WRITERS.md: unchanged when `writer` is registered, else ``- writer`` appended."""
    try:
        text = read_text_file(path)  # a regular file only: a FIFO would hang
    except FileNotFoundError:
        text = ""
    except (OSError, UnicodeDecodeError) as exc:
        raise InitRefusedError(
            f"cannot read the writer registry {path}: {exc}; make it a UTF-8 text file (or move it "
            "aside), then rerun"
        ) from exc
    if writer.lower() in registered_writers(text):
        return InitStep(path, unchanged=f"{writer} is registered")
    line = f"- {writer}"
    _refuse_link(path, line)
    mention = re.compile(rf"(?<![\w.-]){re.escape(writer)}(?![\w-])", re.IGNORECASE)
    for number, existing in enumerate(text.splitlines(), 1):
        if mention.search(existing):
            raise InitRefusedError(
                f"{path} line {number} names {writer} without registering it ({existing.strip()!r}), "
                f"so whether {writer} may write is unclear; make that line read '- {writer}' or delete "
                "it, then rerun"
            )
    separator = "\n" if text and not text.endswith("\n") else ""
    return InitStep(path, line=line, new_text=f"{text}{separator}{line}\n")


def _refuse_link(path: Path, line: str) -> None:
    """Refuse to write through a symbolic link: the line goes into the file it points to by hand."""
    if path.is_symlink():
        raise InitRefusedError(
            f"{path} is a symbolic link to {os.readlink(path)}, and init writes only regular files in "
            f"the memories folder; add the line '{line}' to the file it points to by hand (or put "
            "that file in place of the link), then rerun"
        )
