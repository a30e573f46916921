"""What a memory audit needs to know: the agent's files and the audit's thresholds.

`AgentFiles` names everything that belongs to one agent. An audit reads and writes only these
paths, which is what keeps agents isolated: the memories directory (MEMORY.md, USER.md and the
audit's own files next to them), the agent's Hermes `config.yaml`, and its skills directory.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from dreamer.errors import AuditError
from dreamer.hermes.audit.hosts import HostAllowList
from dreamer.hermes.memory.entries import (
    DEFAULT_MEMORY_CHAR_LIMIT,
    DEFAULT_USER_CHAR_LIMIT,
    MEMORY_FILENAME,
    USER_FILENAME,
    Target,
)
from dreamer.hermes.memory.limits import MemoryLimits, hermes_config_path, read_memory_limits
from dreamer.hermes.memory.locking import lock_path_for

__all__ = [
    "LEDGER_FILENAME",
    "RULES_SKILL_NAME",
    "STATE_FILENAME",
    "WRITERS_FILENAME",
    "AgentFiles",
    "AuditSettings",
    "InvalidAuditSettingsError",
    "with_hermes_limits",
]

LEDGER_FILENAME = "MEMORY_AUDIT_LEDGER.md"
WRITERS_FILENAME = "MEMORY_WRITERS.md"
STATE_FILENAME = "MEMORY_AUDIT_STATE.json"
RULES_SKILL_NAME = "memory-operating-rules"


class InvalidAuditSettingsError(AuditError, ValueError):
    """An audit setting is out of range; the message names the setting and the allowed values.
    Catch it where settings are built from what a person wrote, to tell them which one to fix."""


@dataclass(frozen=True)
class AuditSettings:
    """Thresholds and switches of the memory audit (defaults are the contract's)."""

    interval_days: int = 14
    threshold_pct: float = 85.0
    skip_below_pct: float = 75.0
    max_memory_chars: int = DEFAULT_MEMORY_CHAR_LIMIT
    max_user_chars: int = DEFAULT_USER_CHAR_LIMIT
    stale_days: int = 14
    url_timeout_s: float = 2.0
    #: Hosts whose URLs may be checked (``host`` or ``host:port``); none: no URL is requested.
    verify_hosts: tuple[str, ...] = ()
    #: Check the listed hosts' URLs in a requested dry run too (a dry run sends nothing otherwise).
    verify_urls: bool = False
    writer_name: str = "dreamer"
    dry_run: bool = False
    force: bool = False
    #: Rotate both canaries at the end of an audit once this many days passed since the last
    #: rotation; None: only on request (`dreamer audit --rotate-canary`).
    canary_rotation_days: int | None = None
    #: Rewrite entries longer than `compress_min_chars` shorter, keeping every protected detail.
    compress_entries: bool = True
    compress_min_chars: int = 120

    def __post_init__(self) -> None:
        if self.interval_days < 1:
            raise InvalidAuditSettingsError("interval_days must be at least 1")
        if self.stale_days < 1:
            raise InvalidAuditSettingsError("stale_days must be at least 1")
        if not 0 < self.skip_below_pct <= self.threshold_pct <= 100:
            raise InvalidAuditSettingsError(
                "need 0 < skip_below_pct <= threshold_pct <= 100 "
                f"(got skip_below_pct={self.skip_below_pct}, threshold_pct={self.threshold_pct})"
            )
        if self.max_memory_chars < 1 or self.max_user_chars < 1:
            raise InvalidAuditSettingsError("max_memory_chars and max_user_chars must be positive")
        if self.canary_rotation_days is not None and not 1 <= self.canary_rotation_days <= 3650:
            raise InvalidAuditSettingsError("canary_rotation_days must be between 1 and 3650 (or unset)")
        if not 20 <= self.compress_min_chars <= 100_000:
            raise InvalidAuditSettingsError("compress_min_chars must be between 20 and 100000")
        if not self.url_timeout_s > 0:
            raise InvalidAuditSettingsError("url_timeout_s must be positive")
        try:
            HostAllowList.parse(self.verify_hosts)
        except ValueError as exc:
            raise InvalidAuditSettingsError(f"verify_hosts: {exc}") from None
        if not self.writer_name.strip() or any(ch.isspace() for ch in self.writer_name):
            raise InvalidAuditSettingsError("writer_name must be one word, e.g. 'dreamer'")

    @property
    def allowed_hosts(self) -> HostAllowList:
        """The hosts whose URLs the audit may check."""
        return HostAllowList.parse(self.verify_hosts)

    @property
    def checks_urls(self) -> bool:
        """Whether this audit may send any request: a listed host, and not a dry run unless asked."""
        return bool(self.verify_hosts) and (not self.dry_run or self.verify_urls)

    def limit_for(self, target: Target) -> int:
        """The character limit the audit applies to `target`."""
        return self.max_user_chars if target is Target.USER else self.max_memory_chars


@dataclass(frozen=True)
class AgentFiles:
    """One agent's files: its memories directory, Hermes config, skills directory and SOUL.md."""

    name: str
    memories_dir: Path
    config_yaml: Path | None = None
    skills_dir: Path | None = None
    #: The profile's SOUL.md, and the default profile's (None: not audited / not compared).
    soul_path: Path | None = None
    default_soul_path: Path | None = None

    @property
    def memory_path(self) -> Path:
        """The agent's MEMORY.md."""
        return self.memories_dir / MEMORY_FILENAME

    @property
    def user_path(self) -> Path:
        """The agent's USER.md."""
        return self.memories_dir / USER_FILENAME

    def path_for(self, target: Target) -> Path:
        """The file backing `target`."""
        return self.memories_dir / target.filename

    @property
    def ledger_path(self) -> Path:
        """The append-only audit ledger."""
        return self.memories_dir / LEDGER_FILENAME

    @property
    def writers_path(self) -> Path:
        """The registry of who may write the memory files."""
        return self.memories_dir / WRITERS_FILENAME

    @property
    def state_path(self) -> Path:
        """The audit's own state (when each entry was first seen)."""
        return self.memories_dir / STATE_FILENAME

    @property
    def rules_skill_path(self) -> Path | None:
        """The skill file operating rules are moved to, or None without a skills directory."""
        if self.skills_dir is None:
            return None
        return self.skills_dir / RULES_SKILL_NAME / "SKILL.md"

    def written_paths(self) -> tuple[Path, ...]:
        """Every path an audit may create or write apart from MEMORY.md and USER.md themselves."""
        paths = [self.ledger_path, self.state_path]
        paths += [
            lock_path_for(p) for p in (self.ledger_path, self.state_path, self.memory_path, self.user_path)
        ]
        if self.soul_path is not None:
            paths.append(lock_path_for(self.soul_path))
        skill = self.rules_skill_path
        if skill is not None:
            paths += [skill.parent, skill, lock_path_for(skill)]
        return tuple(paths)


def with_hermes_limits(settings: AuditSettings, agent: AgentFiles) -> AuditSettings:
    """`settings` with the file limits the agent's Hermes config.yaml sets, which Hermes enforces.

    Raises `MemoryLimitsError` when config.yaml cannot be read or sets an invalid limit.
    """
    defaults = MemoryLimits(settings.max_memory_chars, settings.max_user_chars)
    limits = read_memory_limits(hermes_config_path(agent.memories_dir, agent.config_yaml), defaults)
    return replace(settings, max_memory_chars=limits.memory, max_user_chars=limits.user)
