"""The configuration's models: one frozen pydantic model per TOML table, and :class:`Config`, the
whole file.

A model checks what one table can say by itself (types, bounds, names); what holds across tables
(every alias names a bank, no bank id twice) is :mod:`.checks`, and the paths and secrets a loaded
file resolves are :mod:`.loading`. Build a :class:`Config` with :func:`~dreamer.config.load_config`,
never by hand in production.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, SecretStr, field_validator, model_validator

from dreamer.config.checks import cross_reference_problems
from dreamer.config.embeddings import EmbeddingsConfig
from dreamer.config.fields import (
    MINUTE,
    WEEK,
    Count,
    Hours,
    HourSeconds,
    IntervalMinutes,
    NonNegativeFloat,
    PositiveFloat,
    ShortSeconds,
    StrictModel,
    http_url,
    verify_host,
)
from dreamer.config.llm import LLMConfig
from dreamer.config.messages import CrossReferenceError
from dreamer.config.state import StateConfig

__all__ = [
    "Access",
    "AgentConfig",
    "Alias",
    "AuditConfig",
    "BackendConfig",
    "BankConfig",
    "BankId",
    "Budget",
    "Config",
    "ConflictPolicy",
    "EmbeddedBackendConfig",
    "HindsightBackendConfig",
    "LogConfig",
    "MetricsConfig",
    "PeerCardConfig",
    "ProfileConfig",
    "RetryConfig",
    "RollupConfig",
    "ScheduleConfig",
    "SlotConfig",
    "TokenCap",
    "TopologyConfig",
]

Access = Literal["read_only", "read_write"]
Budget = Literal["low", "mid", "high"]
ConflictPolicy = Literal["recency_wins", "keep_both"]
Alias = Annotated[str, Field(pattern=r"^[a-z][a-z0-9_-]{0,62}$")]
BankId = Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$")]


class BankConfig(StrictModel):
    """A named bank: an alias that agents and the CLI use, mapped to a backend bank id."""

    bank_id: BankId
    description: str = ""
    access: Access = "read_only"
    budget: Budget = "mid"
    enabled: bool = True


class TopologyConfig(StrictModel):
    """Which aliases play the global roll-up and the shared cross-agent role."""

    global_bank: Alias = Field("global", alias="global")
    shared: Alias | None = "shared"
    default_bank: Alias | None = None
    allow_raw_bank_ids: bool = False

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)


class ProfileConfig(StrictModel):
    """One agent profile: its own bank, where its roll-up goes, and how it reads."""

    bank: Alias
    upstream: Alias | None = None
    read_union: tuple[Alias, ...] | None = None
    conflict_policy: ConflictPolicy = "recency_wins"
    directive: str = ""
    top_n: Annotated[int, Field(ge=1, le=500)] = 20
    min_new_units: Count = 1
    max_quiet_hours: Hours = 24.0
    peer_card_path: Path | None = None
    enabled: bool = True


class EmbeddedBackendConfig(StrictModel):
    path: Path = Path("memory.sqlite3")


class HindsightBackendConfig(StrictModel):
    url: str = "http://127.0.0.1:8888"
    api_key_env: str | None = "HINDSIGHT_API_KEY"
    api_key_file: Path | None = None
    connect_timeout_s: PositiveFloat = 5.0
    read_timeout_s: PositiveFloat = 60.0
    reflect_timeout_s: PositiveFloat = 900.0
    page_size: Annotated[int, Field(ge=1, le=1000)] = 100
    # Resolved from api_key_env / api_key_file at load time; never accepted from the file.
    api_key: SecretStr | None = Field(default=None, exclude=True)

    @field_validator("url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        return http_url(value)


class BackendConfig(StrictModel):
    kind: Literal["embedded", "hindsight"] = "embedded"
    embedded: EmbeddedBackendConfig = EmbeddedBackendConfig()
    hindsight: HindsightBackendConfig = HindsightBackendConfig()


class ScheduleConfig(StrictModel):
    interval_minutes: IntervalMinutes = 60.0
    jitter_s: Annotated[int, Field(ge=0, le=int(WEEK))] = 120
    misfire_grace_s: Annotated[int, Field(ge=1, le=int(WEEK))] = 900
    job_timeout_s: PositiveFloat = 1800.0
    drain_timeout_s: HourSeconds = 30.0
    first_run_delay_s: NonNegativeFloat = 10.0

    @model_validator(mode="after")
    def _jitter_within_interval(self) -> ScheduleConfig:
        interval_s = self.interval_minutes * MINUTE
        if self.jitter_s > interval_s:
            raise CrossReferenceError(
                [("schedule.jitter_s", f"{self.jitter_s} s is longer than the interval ({interval_s:g} s)")]
            )
        return self


class SlotConfig(StrictModel):
    lock_path: Path = Path("slot.lock")
    acquire_timeout_s: NonNegativeFloat = 300.0
    poll_interval_s: ShortSeconds = 0.25


class RetryConfig(StrictModel):
    max_attempts: Annotated[int, Field(ge=1, le=50)] = 5
    base_delay_s: NonNegativeFloat = 2.0
    max_delay_s: NonNegativeFloat = 120.0
    retry_after_cap_s: NonNegativeFloat = 300.0
    warn_after_deferrals: Annotated[int, Field(ge=1, le=10_000)] = 3


TokenCap = Annotated[int, Field(ge=1, le=10**12)]


class RollupConfig(StrictModel):
    semantic_top_k: Annotated[int, Field(ge=5, le=50)] = 8
    use_reflect: Literal["auto", "never"] = "auto"
    reflect_budget: Budget = "low"
    post_consolidate: bool = True
    watermark_overlap_s: NonNegativeFloat = 300.0
    #: How many batches of ``top_n`` units one run summarises before it leaves the rest pending.
    max_batches_per_run: Annotated[int, Field(ge=1, le=100)] = 5
    #: How many units a batch holds when it is summarised extractively (no model): the fold meets
    #: every unit of its batch, so a fact told twice in a run is one card. A model's batch is top_n.
    extractive_batch: Annotated[int, Field(ge=1, le=1000)] = 100
    #: LLM tokens (prompt and completion) one run, or all runs of a UTC day, may use; once
    #: reached, the remaining batches are summarised extractively. None: no cap.
    max_llm_tokens_per_run: TokenCap | None = None
    max_llm_tokens_per_day: TokenCap | None = None


class PeerCardConfig(StrictModel):
    enabled: bool = True
    budget_chars: Annotated[int, Field(ge=200, le=20000)] = 1375
    max_entries: Annotated[int, Field(ge=1, le=40)] = 40
    max_entry_chars: Annotated[int, Field(ge=20, le=200)] = 200
    global_path: Path | None = None
    #: Rewrite each card with one LLM reflect (merge overlaps, shorten, no new facts) before writing
    #: it; only when the backend's reflect uses an LLM. The unpolished card is written either way.
    polish: bool = False
    polish_budget: Budget = "low"


class AgentConfig(StrictModel):
    memories_dir: Path
    config_yaml: Path | None = None
    skills_dir: Path | None = None
    #: The profile's SOUL.md (default: beside memories_dir, as Hermes keeps it) and the default
    #: profile's, to compare with (default: <hermes home>/SOUL.md for a profile under profiles/).
    soul_md: Path | None = None
    default_soul_md: Path | None = None
    enabled: bool = True


class AuditConfig(StrictModel):
    enabled: bool = True
    check_every_minutes: IntervalMinutes = 60.0
    interval_days: Annotated[int, Field(ge=1, le=3650)] = 14
    threshold_pct: Annotated[float, Field(gt=0, le=100)] = 85.0
    skip_below_pct: Annotated[float, Field(gt=0, le=100)] = 75.0
    stale_days: Annotated[int, Field(ge=1, le=3650)] = 14
    url_timeout_s: ShortSeconds = 2.0
    #: The hosts whose URLs (in technical-config entries) the audit may check, ``host`` (any port) or
    #: ``host:port``; none by default: a URL in memory text is never requested unless its host is here.
    verify_hosts: Annotated[tuple[str, ...], Field(max_length=256)] = ()
    #: Rotate both canaries during an audit once this many days passed since the last rotation;
    #: 0: only on request (``dreamer audit --rotate-canary``).
    canary_rotation_days: Annotated[int, Field(ge=0, le=3650)] = 0
    #: Reword entries longer than ``compress_min_chars`` shorter, keeping every number, name, path
    #: and URL; by rules, or by one reflect of ``compress_bank`` when set (an LLM-backed backend).
    compress_entries: bool = True
    compress_min_chars: Annotated[int, Field(ge=20, le=100_000)] = 120
    compress_bank: Alias | None = None
    compress_budget: Budget = "low"

    @field_validator("verify_hosts")
    @classmethod
    def _verify_hosts(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for number, entry in enumerate(value, start=1):
            try:
                verify_host(entry)
            except ValueError as exc:
                raise ValueError(f"entry {number}: {exc}") from None
        return value


class MetricsConfig(StrictModel):
    """Operator metrics as a Prometheus text file (node_exporter's textfile collector); off unless
    ``textfile`` is set."""

    textfile: Path | None = None


class LogConfig(StrictModel):
    level: Literal["debug", "info", "warning", "error"] = "info"


class Config(StrictModel):
    """The whole configuration. Build it with :func:`load_config`, never by hand in production."""

    state_dir: Path = Path("state")
    state: StateConfig = StateConfig()
    backend: BackendConfig = BackendConfig()
    topology: TopologyConfig = TopologyConfig()
    banks: dict[Alias, BankConfig] = Field(default_factory=dict)
    profiles: dict[Alias, ProfileConfig] = Field(default_factory=dict)
    schedule: ScheduleConfig = ScheduleConfig()
    slot: SlotConfig = SlotConfig()
    retry: RetryConfig = RetryConfig()
    rollup: RollupConfig = RollupConfig()
    peer_card: PeerCardConfig = PeerCardConfig()
    agents: dict[Alias, AgentConfig] = Field(default_factory=dict)
    audit: AuditConfig = AuditConfig()
    log: LogConfig = LogConfig()
    metrics: MetricsConfig = MetricsConfig()
    embeddings: EmbeddingsConfig = EmbeddingsConfig()
    llm: LLMConfig = LLMConfig()

    @model_validator(mode="after")
    def _cross_references(self) -> Config:
        """What no single table can check (:mod:`.checks`), all of it reported at once."""
        problems = cross_reference_problems(self)
        if problems:
            raise CrossReferenceError(problems)
        return self

    # --- derived views -------------------------------------------------------------------------

    def upstream_alias(self, profile: str) -> str:
        return self.profiles[profile].upstream or self.topology.global_bank

    def read_union(self, profile: str) -> tuple[str, ...]:
        """The aliases a profile reads, in order: its own bank, its upstream, shared (unless set)."""
        p = self.profiles[profile]
        if p.read_union is not None:
            return p.read_union
        order = [p.bank, self.upstream_alias(profile)]
        if self.topology.shared is not None:
            order.append(self.topology.shared)
        return tuple(dict.fromkeys(order))

    def bank_id(self, alias: str) -> str:
        return self.banks[alias].bank_id

    def profile_bank_id(self, profile: str) -> str:
        """The bank id of a profile's own bank."""
        return self.bank_id(self.profiles[profile].bank)

    def upstream_bank_id(self, profile: str) -> str:
        """The bank id of the bank a profile's cards are promoted into."""
        return self.bank_id(self.upstream_alias(profile))

    def enabled_profiles(self) -> dict[str, ProfileConfig]:
        return {name: p for name, p in self.profiles.items() if p.enabled}

    @property
    def state_path(self) -> Path:
        """Dreamer's own SQLite state: watermarks, the promotion ledger, run records."""
        return self.state_dir / "state.sqlite3"

    @property
    def vector_index_dir(self) -> Path:
        """The judge's on-disk vector segments, one folder per bank and model: a cache of the
        state's vectors, rebuilt when lost (docs/design/dedup.md, Vectors on disk)."""
        return self.state_dir / "vectors"

    @property
    def embedded_path(self) -> Path:
        return self.backend.embedded.path

    def secrets(self) -> list[str]:
        """Every secret the configuration holds, for the log redactor (never to be printed)."""
        hs, state = self.backend.hindsight, self.state
        keys = (hs.api_key, self.embeddings.api_key, self.llm.api_key, state.password)
        return [key.get_secret_value() for key in keys if key is not None]

    def redacted(self) -> dict[str, Any]:
        """The normalised configuration as plain data, with every secret replaced by a marker."""
        data = self.model_dump(mode="json", by_alias=True)
        key = self.backend.hindsight.api_key
        data["backend"]["hindsight"]["api_key"] = "**********" if key is not None else None
        data["embeddings"]["api_key"] = "**********" if self.embeddings.api_key is not None else None
        data["llm"]["api_key"] = "**********" if self.llm.api_key is not None else None
        data["state"]["password"] = "**********" if self.state.password is not None else None
        return data
