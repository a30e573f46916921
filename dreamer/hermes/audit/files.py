"""An agent's two memory files as an audit reads them, and how full they are."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from dreamer.hermes.audit.report import Utilisation
from dreamer.hermes.audit.settings import AgentFiles, AuditSettings
from dreamer.hermes.memory.disk import read_memory_text
from dreamer.hermes.memory.entries import dedupe, joined_length, parse_entries
from dreamer.hermes.memory.store import StoreReadError

__all__ = ["MemoryFiles", "read_memory_files", "read_utilisation", "utilisation"]


@dataclass(frozen=True)
class MemoryFiles:
    """The raw text of MEMORY.md and USER.md (empty when a file does not exist), and their entries."""

    memory_raw: str
    user_raw: str

    @property
    def memory_entries(self) -> list[str]:
        return dedupe(parse_entries(self.memory_raw))

    @property
    def user_entries(self) -> list[str]:
        return dedupe(parse_entries(self.user_raw))


def _read_text(path: Path) -> str:
    try:  # through a link only to the folder owner's file, as the store reads it
        return read_memory_text(path) or ""
    except (OSError, UnicodeDecodeError) as exc:
        raise StoreReadError(f"cannot read {path}: {exc}; fix its permissions or encoding (UTF-8)") from exc


def read_memory_files(agent: AgentFiles) -> MemoryFiles:
    """Both memory files of `agent`; raises StoreReadError when one exists but cannot be read."""
    return MemoryFiles(_read_text(agent.memory_path), _read_text(agent.user_path))


def utilisation(memory: Sequence[str], user: Sequence[str], settings: AuditSettings) -> Utilisation:
    """How full files holding these entries are, by the store's measure and the configured limits."""
    return Utilisation(
        joined_length(memory), settings.max_memory_chars, joined_length(user), settings.max_user_chars
    )


def read_utilisation(agent: AgentFiles, settings: AuditSettings) -> Utilisation:
    """How full the agent's two memory files are now, by the store's measure."""
    files = read_memory_files(agent)
    return utilisation(files.memory_entries, files.user_entries, settings)
