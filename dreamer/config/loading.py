"""Loading a configuration: the TOML file read and decoded, validated into :class:`Config`, and the
paths and secrets it names resolved.

Relative paths are resolved here, once, so no other part of Dreamer depends on the directory it
was started from: ``state_dir`` against the config file's directory, the embedded store and the
slot lock against ``state_dir``. API keys are read here from their variable or file, never from the
TOML itself.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from dreamer.config.files import expand_path, read_config_bytes
from dreamer.config.messages import format_validation_error
from dreamer.config.models import Config
from dreamer.config.secrets import read_key
from dreamer.errors import ConfigError

__all__ = [
    "DEFAULT_CONFIG_PATHS",
    "SERVICE_STATE_DIR",
    "SYSTEM_CONFIG_DIR",
    "default_config_path",
    "default_state_dir",
    "load_config",
    "parse_config",
]

DEFAULT_CONFIG_PATHS = (Path("/etc/dreamer/config.toml"),)

#: The system-wide configuration's directory and the state directory the shipped unit gives the
#: service (``ConfigurationDirectory=dreamer``, ``StateDirectory=dreamer``): with ``state_dir``
#: unset, a configuration in the first keeps its state in the second, from a shell as under systemd.
SYSTEM_CONFIG_DIR = Path("/etc/dreamer")
SERVICE_STATE_DIR = Path("/var/lib/dreamer")


def default_state_dir(base_dir: Path | None, environ: Mapping[str, str]) -> Path | None:
    """Where the state goes when the configuration does not say: systemd's ``$STATE_DIRECTORY``
    (its first entry) under the service; ``SERVICE_STATE_DIR`` for the system-wide configuration
    (``/etc/dreamer``), so a shell's ``dreamer status`` reads what the service wrote; else None
    (``state`` beside the configuration file)."""
    if environ.get("STATE_DIRECTORY"):
        return Path(environ["STATE_DIRECTORY"].split(":")[0])
    if base_dir is not None and os.path.normpath(base_dir) == str(SYSTEM_CONFIG_DIR):
        return SERVICE_STATE_DIR
    return None


def _resolve_paths(cfg: Config, base_dir: Path, source: str, environ: Mapping[str, str]) -> Config:
    """``cfg`` with every path expanded (``~``, ``${VAR}``) and made absolute: ``state_dir`` against
    ``base_dir``, the embedded store and the slot lock against ``state_dir``, the rest against
    ``base_dir``; so the daemon reads the same files whatever directory it was started in."""
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
    """``cfg`` with the API keys of the backend, the embedder and the LLM read from their variable
    or file (:func:`~dreamer.config.secrets.read_key`), each refused as unsendable only when its
    table's provider will send it."""
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
    st = cfg.state
    password = read_key(
        st.password_env,
        st.password_file,
        "state",
        source,
        environ,
        used=st.backend == "postgres",
        names=("password_env", "password_file"),
        header=False,
    )
    hindsight = hs.model_copy(update={"api_key": hs_key})
    return cfg.model_copy(
        update={
            "state": st.model_copy(update={"password": password}),
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
    state = data.get("state")
    if isinstance(state, Mapping) and "password" in state:
        raise ConfigError(
            f"{source}: state.password: secrets are not read from the config file; use "
            "password_env (an environment variable) or password_file (e.g. a systemd credential)"
        )
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
        raise ConfigError(format_validation_error(exc, source)) from None
    if "state_dir" not in data:
        default = default_state_dir(base_dir, env)
        if default is not None:
            cfg = cfg.model_copy(update={"state_dir": default})
    cfg = _resolve_paths(cfg, base_dir or Path.cwd(), source, env)
    return _resolve_secret(cfg, source, env)


def load_config(path: Path, *, environ: Mapping[str, str] | None = None) -> Config:
    """Read, parse and validate a TOML config file."""
    source = str(path)
    data = _read_toml(path, source)
    return parse_config(data, source=source, base_dir=path.resolve().parent, environ=environ)


def _read_toml(path: Path, source: str) -> dict[str, Any]:
    """The decoded TOML of the file at ``path``. Every way reading or decoding can fail becomes a
    :class:`ConfigError` naming the file and the fix: a traceback from ``tomllib`` or the file
    system tells an operator neither."""
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
    return data


def default_config_path(environ: Mapping[str, str] | None = None) -> Path:
    """``$DREAMER_CONFIG``, else ``$CONFIGURATION_DIRECTORY/config.toml`` (systemd), else /etc."""
    env = os.environ if environ is None else environ
    if env.get("DREAMER_CONFIG"):
        return Path(env["DREAMER_CONFIG"])
    if env.get("CONFIGURATION_DIRECTORY"):
        return Path(env["CONFIGURATION_DIRECTORY"].split(":")[0]) / "config.toml"
    return DEFAULT_CONFIG_PATHS[0]
