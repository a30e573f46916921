"""Configuration: a TOML file validated into frozen pydantic models.

Every error names the file, the key path and what is allowed, e.g.::

    config.toml: profiles.research.upstream: unknown bank alias 'globl' (known: global, research, shared)

Paths may use ``~`` and ``${VAR}``. ``state_dir`` is resolved against the config file's directory;
the other relative paths (embedded store, slot lock) against ``state_dir``.
The Hindsight API key is never read from the TOML itself: only from an environment variable or a
file (such as a systemd credential under ``${CREDENTIALS_DIRECTORY}``).
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)

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
from dreamer.config.files import expand_path, read_config_bytes
from dreamer.config.llm import LLMConfig
from dreamer.config.secrets import is_header_safe_key as is_header_safe_key
from dreamer.config.secrets import read_key
from dreamer.errors import ConfigError

DEFAULT_CONFIG_PATHS = (Path("/etc/dreamer/config.toml"),)

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
            raise _CrossReferenceError(
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
        problems: list[tuple[str, str]] = []
        known = sorted(self.banks)
        known_text = ", ".join(known) if known else "none defined under [banks]"

        def check_alias(key: str, alias: str | None) -> None:
            if alias is not None and alias not in self.banks:
                problems.append((key, f"unknown bank alias {alias!r} (known: {known_text})"))

        if self.banks or self.profiles:  # an audit-only install needs no banks at all
            check_alias("topology.global", self.topology.global_bank)
            check_alias("topology.shared", self.topology.shared)
            check_alias("topology.default_bank", self.topology.default_bank)
        seen: dict[str, str] = {}
        for alias, bank in self.banks.items():
            if bank.bank_id in seen:
                problems.append(
                    (
                        f"banks.{alias}.bank_id",
                        f"bank id {bank.bank_id!r} is already used by banks.{seen[bank.bank_id]}; "
                        "each bank id may appear once",
                    )
                )
            seen.setdefault(bank.bank_id, alias)
        check_alias("audit.compress_bank", self.audit.compress_bank)
        for name, profile in self.profiles.items():
            check_alias(f"profiles.{name}.bank", profile.bank)
            check_alias(f"profiles.{name}.upstream", profile.upstream)
            for i, alias in enumerate(profile.read_union or ()):
                check_alias(f"profiles.{name}.read_union[{i}]", alias)
            upstream = profile.upstream or self.topology.global_bank
            if profile.bank == upstream:
                problems.append(
                    (
                        f"profiles.{name}.upstream",
                        f"the profile's own bank {profile.bank!r} cannot also be its upstream bank",
                    )
                )
            if profile.bank == self.topology.shared:
                problems.append((f"profiles.{name}.bank", "the shared bank cannot be a profile bank"))
        if problems:
            raise _CrossReferenceError(problems)
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
    def embedded_path(self) -> Path:
        return self.backend.embedded.path

    def secrets(self) -> list[str]:
        """Every secret the configuration holds, for the log redactor (never to be printed)."""
        keys = (self.backend.hindsight.api_key, self.embeddings.api_key, self.llm.api_key)
        return [key.get_secret_value() for key in keys if key is not None]

    def redacted(self) -> dict[str, Any]:
        """The normalised configuration as plain data, with every secret replaced by a marker."""
        data = self.model_dump(mode="json", by_alias=True)
        key = self.backend.hindsight.api_key
        data["backend"]["hindsight"]["api_key"] = "**********" if key is not None else None
        data["embeddings"]["api_key"] = "**********" if self.embeddings.api_key is not None else None
        data["llm"]["api_key"] = "**********" if self.llm.api_key is not None else None
        return data


class _CrossReferenceError(ValueError):
    def __init__(self, problems: list[tuple[str, str]]) -> None:
        self.problems = problems
        super().__init__("; ".join(f"{k}: {m}" for k, m in problems))


# --- loading ------------------------------------------------------------------------------------

def _loc_to_key(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out or "(top level)"


def _format_validation_error(exc: ValidationError, source: str) -> list[str]:
    lines: list[str] = []
    for err in exc.errors():
        ctx_error = (err.get("ctx") or {}).get("error")
        if isinstance(ctx_error, _CrossReferenceError):
            lines.extend(f"{source}: {k}: {m}" for k, m in ctx_error.problems)
            continue
        loc = tuple(err["loc"])
        if loc and loc[-1] == "[key]":
            # An invalid table name (a bank, profile or agent alias), reported on its parent table.
            parent = _loc_to_key(loc[:-2])
            lines.append(
                f"{source}: {parent}: {str(loc[-2])!r} is not a valid name (use lowercase letters, "
                "digits, '_' and '-', starting with a letter)"
            )
            continue
        key = _loc_to_key(loc)
        kind = err["type"]
        if kind == "extra_forbidden":
            parent = _loc_to_key(tuple(err["loc"][:-1]))
            where = f"[{parent}]" if err["loc"][:-1] else "the top level"
            msg = f"unknown key (not allowed in {where}; check the spelling against config.example.toml)"
        elif kind == "literal_error":
            expected = (err.get("ctx") or {}).get("expected", "")
            msg = f"got {err.get('input')!r}; allowed: {expected}"
        elif kind == "string_pattern_mismatch":
            msg = (
                f"{err.get('input')!r} is not a valid name "
                f"(must match {(err.get('ctx') or {}).get('pattern')})"
            )
        elif kind == "missing":
            msg = "required key is missing"
        elif kind in ("model_type", "dict_type"):
            msg = f"must be a table ([{key}]), got {err.get('input')!r}"
        elif kind == "value_error":
            msg = str(err["msg"]).removeprefix("Value error, ")
        else:
            msg = f"{err['msg']} (got {err.get('input')!r})"
        lines.append(f"{source}: {key}: {msg}")
    return lines


def _resolve_paths(cfg: Config, base_dir: Path, source: str, environ: Mapping[str, str]) -> Config:
    state_dir = expand_path(cfg.state_dir, "state_dir", source, environ)
    if not state_dir.is_absolute():
        state_dir = base_dir / state_dir
    state_dir = Path(os.path.normpath(state_dir))

    def under_state(p: Path, key: str) -> Path:
        p = expand_path(p, key, source, environ)
        return p if p.is_absolute() else state_dir / p

    def absolute(p: Path | None, key: str) -> Path | None:
        if p is None:
            return None
        p = expand_path(p, key, source, environ)
        return p if p.is_absolute() else Path(os.path.normpath(base_dir / p))

    backend = cfg.backend.model_copy(
        update={
            "embedded": cfg.backend.embedded.model_copy(
                update={"path": under_state(cfg.backend.embedded.path, "backend.embedded.path")}
            ),
        }
    )
    profiles = {
        name: p.model_copy(
            update={"peer_card_path": absolute(p.peer_card_path, f"profiles.{name}.peer_card_path")}
        )
        for name, p in cfg.profiles.items()
    }
    agents = {
        name: a.model_copy(
            update={
                "memories_dir": absolute(a.memories_dir, f"agents.{name}.memories_dir"),
                "config_yaml": absolute(a.config_yaml, f"agents.{name}.config_yaml"),
                "skills_dir": absolute(a.skills_dir, f"agents.{name}.skills_dir"),
                "soul_md": absolute(a.soul_md, f"agents.{name}.soul_md"),
                "default_soul_md": absolute(a.default_soul_md, f"agents.{name}.default_soul_md"),
            }
        )
        for name, a in cfg.agents.items()
    }
    peer_card = cfg.peer_card.model_copy(
        update={"global_path": absolute(cfg.peer_card.global_path, "peer_card.global_path")}
    )
    return cfg.model_copy(
        update={
            "state_dir": state_dir,
            "backend": backend,
            "slot": cfg.slot.model_copy(
                update={"lock_path": under_state(cfg.slot.lock_path, "slot.lock_path")}
            ),
            "profiles": profiles,
            "agents": agents,
            "peer_card": peer_card,
            "metrics": cfg.metrics.model_copy(
                update={"textfile": absolute(cfg.metrics.textfile, "metrics.textfile")}
            ),
            "embeddings": cfg.embeddings.model_copy(
                update={"model_path": absolute(cfg.embeddings.model_path, "embeddings.model_path")}
            ),
        }
    )


def _resolve_secret(cfg: Config, source: str, environ: Mapping[str, str]) -> Config:
    hs, emb = cfg.backend.hindsight, cfg.embeddings
    hs_key = read_key(
        hs.api_key_env,
        hs.api_key_file,
        "backend.hindsight",
        source,
        environ,
        used=cfg.backend.kind == "hindsight",
    )
    emb_key = read_key(
        emb.api_key_env, emb.api_key_file, "embeddings", source, environ, used=emb.provider == "openai"
    )
    llm = cfg.llm
    llm_key = read_key(
        llm.api_key_env, llm.api_key_file, "llm", source, environ, used=llm.provider == "openai"
    )
    hindsight = hs.model_copy(update={"api_key": hs_key})
    return cfg.model_copy(
        update={
            "backend": cfg.backend.model_copy(update={"hindsight": hindsight}),
            "embeddings": emb.model_copy(update={"api_key": emb_key}),
            "llm": llm.model_copy(update={"api_key": llm_key}),
        }
    )


def parse_config(
    data: Mapping[str, Any],
    *,
    source: str = "<config>",
    base_dir: Path | None = None,
    environ: Mapping[str, str] | None = None,
) -> Config:
    """Validate already-parsed TOML data. Raises :class:`ConfigError` listing every problem."""
    env = os.environ if environ is None else environ
    backend = data.get("backend")
    hindsight = backend.get("hindsight") if isinstance(backend, Mapping) else None
    tables = (
        ("backend.hindsight", hindsight),
        ("embeddings", data.get("embeddings")),
        ("llm", data.get("llm")),
    )
    for key, table in tables:
        if isinstance(table, Mapping) and "api_key" in table:
            raise ConfigError(
                f"{source}: {key}.api_key: secrets are not read from the config file; use "
                "api_key_env (an environment variable) or api_key_file (e.g. a systemd credential)"
            )
    try:
        cfg = Config.model_validate(dict(data))
    except ValidationError as exc:
        raise ConfigError(_format_validation_error(exc, source)) from None
    if "state_dir" not in data and env.get("STATE_DIRECTORY"):
        # Under systemd, StateDirectory= tells us where state belongs (first entry if several).
        cfg = cfg.model_copy(update={"state_dir": Path(env["STATE_DIRECTORY"].split(":")[0])})
    cfg = _resolve_paths(cfg, base_dir or Path.cwd(), source, env)
    return _resolve_secret(cfg, source, env)


def load_config(path: Path, *, environ: Mapping[str, str] | None = None) -> Config:
    """Read, parse and validate a TOML config file."""
    source = str(path)
    try:
        raw = read_config_bytes(path, source)
    except FileNotFoundError:
        raise ConfigError(
            f"{source}: file not found; pass --config PATH or copy config.example.toml there"
        ) from None
    except OSError as exc:
        raise ConfigError(f"{source}: cannot read: {exc.strerror or exc}") from None
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{source}: not UTF-8 text (byte {exc.start}); save it as UTF-8") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{source}: invalid TOML: {exc}") from None
    except (ValueError, RecursionError) as exc:  # a number of thousands of digits, nesting too deep
        raise ConfigError(f"{source}: invalid TOML ({type(exc).__name__}: {exc})"[:300]) from None
    return parse_config(data, source=source, base_dir=path.resolve().parent, environ=environ)


def default_config_path(environ: Mapping[str, str] | None = None) -> Path:
    """``$DREAMER_CONFIG``, else ``$CONFIGURATION_DIRECTORY/config.toml`` (systemd), else /etc."""
    env = os.environ if environ is None else environ
    if env.get("DREAMER_CONFIG"):
        return Path(env["DREAMER_CONFIG"])
    if env.get("CONFIGURATION_DIRECTORY"):
        return Path(env["CONFIGURATION_DIRECTORY"].split(":")[0]) / "config.toml"
    return DEFAULT_CONFIG_PATHS[0]
