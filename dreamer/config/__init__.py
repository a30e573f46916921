"""Configuration: a TOML file validated into frozen pydantic models.

Every error names the file, the key path and what is allowed, e.g.::

    config.toml: profiles.research.upstream: unknown bank alias 'globl' (known: global, research, shared)

Paths may use ``~`` and ``${VAR}``. ``state_dir`` is resolved against the config file's directory;
the other relative paths (embedded store, slot lock) against ``state_dir``.
The Hindsight API key is never read from the TOML itself: only from an environment variable or a
file (such as a systemd credential under ``${CREDENTIALS_DIRECTORY}``).

The room's modules: :mod:`.models` (the tables and :class:`Config`), :mod:`.loading` (reading,
validating and resolving a file), :mod:`.checks` (what holds across tables), :mod:`.messages` (the
wording of a refused file), and the building blocks :mod:`.fields`, :mod:`.files`,
:mod:`.secrets`, :mod:`.embeddings` and :mod:`.llm`. Import from here: the split is this package's
own business.
"""

from __future__ import annotations

from dreamer.config.embeddings import EmbeddingsConfig
from dreamer.config.llm import LLMConfig
from dreamer.config.loading import (
    DEFAULT_CONFIG_PATHS,
    SERVICE_STATE_DIR,
    SYSTEM_CONFIG_DIR,
    default_config_path,
    load_config,
    parse_config,
)
from dreamer.config.models import (
    Access,
    AgentConfig,
    Alias,
    AuditConfig,
    BackendConfig,
    BankConfig,
    BankId,
    Budget,
    Config,
    ConflictPolicy,
    EmbeddedBackendConfig,
    HindsightBackendConfig,
    LogConfig,
    MetricsConfig,
    PeerCardConfig,
    ProfileConfig,
    RetryConfig,
    RollupConfig,
    ScheduleConfig,
    SlotConfig,
    TokenCap,
    TopologyConfig,
)
from dreamer.config.secrets import is_header_safe_key

__all__ = [
    "DEFAULT_CONFIG_PATHS",
    "SERVICE_STATE_DIR",
    "SYSTEM_CONFIG_DIR",
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
    "EmbeddingsConfig",
    "HindsightBackendConfig",
    "LLMConfig",
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
    "default_config_path",
    "is_header_safe_key",
    "load_config",
    "parse_config",
]
