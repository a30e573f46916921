"""What the provider reads: Hermes' ``hindsight/config.json`` (or its environment fallback) turned
into a Dreamer :class:`~dreamer.config.Config`, or a Dreamer TOML file when pointed at one.

The JSON shape is the one Hermes' Hindsight plugin writes, with the named banks and policies of
seed 003::

    {"bank_id": "default", "recall_budget": "mid",
     "banks": {"default": {"bankId": "hermes", "budget": "mid", "enabled": true,
                           "description": "...", "access": "read_write"}},
     "read_banks": ["default", "code"], "write_banks": ["default"]}

Every problem is a :class:`~dreamer.errors.ConfigError` naming the file, the key and the fix. How
each key maps onto Dreamer's banks and topology: ``docs/design/hermes-provider.md``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dreamer.config import Config, load_config, parse_config
from dreamer.config.files import read_config_bytes
from dreamer.errors import ConfigError

__all__ = [
    "ProviderSettings",
    "hermes_json_paths",
    "load_settings",
    "settings_from_hermes_json",
]

#: Hermes' defaults (``plugins/memory/hindsight``): the bank and budget without any configuration.
HERMES_DEFAULT_BANK = "hermes"
HERMES_CLOUD_URL = "https://api.hindsight.vectorize.io"
HERMES_LOCAL_URL = "http://localhost:8888"
HERMES_TIMEOUT_S = 120.0
#: The environment name the synthesised configuration reads the API key from; only ever set in
#: the mapping handed to ``parse_config``, never in the process environment.
_KEY_VAR = "DREAMER_HERMES_PROVIDER_API_KEY"
#: The alias of the stand-in roll-up bank when the JSON names none: disabled, so never offered.
_ABSENT_GLOBAL_ID = "dreamer-no-global-bank"
_ALIAS = re.compile(r"^[a-z][a-z0-9_-]{0,62}$")
_BUDGETS = ("low", "mid", "high")
_MAX_JSON_BYTES = 1_000_000


@dataclass(frozen=True, slots=True)
class ProviderSettings:
    """A validated configuration, the profile the agent acts as (None: none), and where it came from."""

    config: Config
    profile: str | None
    source: str
    #: Hermes' ``auto_retain``: store each conversation turn in the default bank.
    auto_retain: bool = True
    #: Hermes' ``retain_every_n_turns``: turns are stored together, every N turns (1 to 100).
    retain_every_n_turns: int = 1
    #: The Hermes home the agent runs in (its turn spool lives there); None outside an agent.
    hermes_home: Path | None = None
    #: Why these valid settings still reach no server, as Hermes' own Hindsight plugin judges it
    #: (Hindsight Cloud without a key, and no URL): the provider is then unavailable. None: usable.
    no_server: str | None = None


def hermes_json_paths(hermes_home: Path, environ: Mapping[str, str]) -> tuple[Path, Path]:
    """Where Hermes looks for the Hindsight configuration, in order: the profile's, then the legacy one."""
    home = Path(environ.get("HOME") or Path.home())
    return hermes_home / "hindsight" / "config.json", home / ".hindsight" / "config.json"


def load_settings(
    *,
    hermes_home: Path,
    config_path: Path | None = None,
    profile: str | None = None,
    identity: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> ProviderSettings:
    """The settings the provider runs with.

    ``config_path`` (a Dreamer TOML file) wins; else Hermes' ``hindsight/config.json`` of
    ``hermes_home``, else the legacy ``~/.hindsight/config.json``, else Hermes' environment
    variables (``HINDSIGHT_BANK_ID``, ``HINDSIGHT_BUDGET``, ``HINDSIGHT_API_URL``, ...).
    ``profile`` names the Dreamer profile to act as; without it, ``identity`` (Hermes' profile
    name) is used when the configuration has a profile of that name.
    """
    env = os.environ if environ is None else environ
    if config_path is not None:
        config = load_config(config_path, environ=env)
        chosen = profile or (identity if identity in config.profiles else None)
        if chosen is not None and chosen not in config.profiles:
            known = ", ".join(sorted(config.profiles)) or "none defined under [profiles]"
            raise ConfigError(f"{config_path}: profile {chosen!r} is not under [profiles] (known: {known})")
        return ProviderSettings(config, chosen, str(config_path), hermes_home=hermes_home)
    settings = None
    for path in hermes_json_paths(hermes_home, env):
        if os.path.lexists(path):  # never raises: a name too long is read below, as a ConfigError
            data = _read_json(path)
            settings = settings_from_hermes_json(data, source=str(path), identity=identity, environ=env)
            break
    if settings is None:
        settings = settings_from_hermes_json(
            _environment_fallback(env), source="environment", identity=identity, environ=env
        )
        if settings.no_server is not None:
            first, legacy = hermes_json_paths(hermes_home, env)
            settings = dataclasses.replace(
                settings,
                no_server=(
                    f"no Hindsight configuration: neither {first} nor {legacy} exists, and neither "
                    f"HINDSIGHT_API_URL nor HINDSIGHT_API_KEY is set; write {first} with api_url (and "
                    f"bank_id), or set HINDSIGHT_API_URL (or HINDSIGHT_API_KEY for Hindsight Cloud) in "
                    f"{hermes_home / '.env'}"
                ),
            )
    return dataclasses.replace(settings, hermes_home=hermes_home)


def settings_from_hermes_json(
    data: Mapping[str, Any],
    *,
    source: str,
    identity: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> ProviderSettings:
    """Translate Hermes' Hindsight configuration into Dreamer's; ConfigError names ``source`` and the key."""
    env = os.environ if environ is None else environ
    merged = dict(data)
    nested = data.get("hindsight")
    if isinstance(nested, Mapping):  # seed 003's second shape: the policy under "hindsight"
        merged.update(nested)
    reader = _Reader(merged, source)

    template = reader.string("bank_id_template")
    if template:
        reader.fail(
            "bank_id_template",
            "is not supported by the Dreamer provider; name the banks under banks and the default in bank_id",
        )
    budget = reader.budget("recall_budget") or reader.budget("budget") or "mid"
    banks = _banks(reader, budget)
    default = _default_alias(reader, banks)
    _apply_read_write(reader, banks)

    global_alias = reader.alias_of(banks, "global_bank") or ("global" if "global" in banks else None)
    shared_alias = reader.alias_of(banks, "shared_bank") or ("shared" if "shared" in banks else None)
    if global_alias is None:
        global_alias = "global"
        banks["global"] = {"bank_id": _ABSENT_GLOBAL_ID, "enabled": False}
    profile_name = identity if identity and _ALIAS.match(identity) else HERMES_DEFAULT_BANK
    profiles: dict[str, Any] = {}
    if default not in (global_alias, shared_alias):
        profiles[profile_name] = {"bank": default}

    key = reader.string("apiKey") or reader.string("api_key") or env.get("HINDSIGHT_API_KEY", "")
    mode = reader.string("mode") or env.get("HINDSIGHT_MODE", "cloud")
    fallback_url = HERMES_LOCAL_URL if mode.startswith("local") else HERMES_CLOUD_URL
    given_url = reader.string("api_url") or env.get("HINDSIGHT_API_URL", "")
    url = given_url or fallback_url
    timeout = reader.number("timeout") or _env_number(env.get("HINDSIGHT_TIMEOUT")) or HERMES_TIMEOUT_S
    no_server = None
    if not key and not given_url and not mode.startswith("local"):
        # Hermes' Hindsight plugin is unavailable here too: its cloud needs a key, no URL names another.
        no_server = (
            f"{source}: mode {mode!r} (Hindsight Cloud) needs apiKey, or api_url for a server of your own "
            "(or HINDSIGHT_API_KEY / HINDSIGHT_API_URL in Hermes' .env)"
        )
    toml_like: dict[str, Any] = {
        "backend": {
            "kind": "hindsight",
            "hindsight": {"url": url, "api_key_env": _KEY_VAR, "read_timeout_s": timeout},
        },
        "topology": {
            "global": global_alias,
            "shared": shared_alias,
            "default_bank": default,
        },
        "banks": banks,
        "profiles": profiles,
    }
    config_env = {k: v for k, v in env.items() if k != _KEY_VAR}
    if key:
        config_env[_KEY_VAR] = key
    base = Path(source).parent if source != "environment" else Path.cwd()
    config = parse_config(toml_like, source=source, base_dir=base, environ=config_env)
    return ProviderSettings(
        config,
        profile_name if profiles else None,
        source,
        auto_retain=reader.flag("auto_retain", True),
        retain_every_n_turns=reader.count("retain_every_n_turns", 1, maximum=100),
        no_server=no_server,
    )


# --- the pieces ----------------------------------------------------------------------------------


class _Reader:
    """Typed reads of the JSON mapping, each failure a ConfigError naming the source and key."""

    def __init__(self, data: Mapping[str, Any], source: str) -> None:
        self.data = data
        self.source = source

    def fail(self, key: str, message: str) -> None:
        raise ConfigError(f"{self.source}: {key}: {message}")

    def string(self, key: str) -> str:
        value = self.data.get(key)
        if value is None:
            return ""
        if not isinstance(value, str):
            self.fail(key, f"must be a string, not {type(value).__name__}")
        return str(value).strip()

    def number(self, key: str) -> float | None:
        value = self.data.get(key)
        if value is None or value == "":
            return None
        number = _env_number(str(value)) if isinstance(value, str) else value
        if isinstance(number, bool) or not isinstance(number, int | float) or not 0 < number <= 86_400:
            self.fail(key, "must be a number of seconds between 0 and 86400")
        return float(number)  # type: ignore[arg-type]

    def flag(self, key: str, default: bool) -> bool:
        value = self.data.get(key)
        if value is None:
            return default
        if not isinstance(value, bool):
            self.fail(key, f"must be true or false, not {value!r}")
        return bool(value)

    def count(self, key: str, default: int, *, maximum: int) -> int:
        value = self.data.get(key)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= maximum:
            self.fail(key, f"must be a whole number from 1 to {maximum}, not {value!r}")
        return int(value)

    def budget(self, key: str, data: Mapping[str, Any] | None = None, where: str = "") -> str | None:
        value = (self.data if data is None else data).get(key)
        if value is None or value == "":
            return None
        if value not in _BUDGETS:
            self.fail(where + key, f"{value!r} is not a budget; use one of {', '.join(_BUDGETS)}")
        return str(value)

    def aliases(self, key: str, banks: Mapping[str, Any]) -> list[str] | None:
        value = self.data.get(key)
        if value is None:
            return None
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            self.fail(key, "must be a list of bank aliases")
        unknown = [v for v in value if v not in banks]
        if unknown:
            self.fail(key, f"unknown bank alias {unknown[0]!r} (known: {', '.join(banks)})")
        return list(value)

    def alias_of(self, banks: Mapping[str, Any], key: str) -> str | None:
        alias = self.string(key)
        if alias and alias not in banks:
            self.fail(key, f"unknown bank alias {alias!r} (known: {', '.join(banks)})")
        return alias or None


def _banks(reader: _Reader, budget: str) -> dict[str, dict[str, Any]]:
    """The ``banks`` object as Dreamer bank tables; Hermes' single default bank when there is none."""
    raw = reader.data.get("banks")
    if raw is None or raw == {}:
        bank_id = reader.string("bank_id") or HERMES_DEFAULT_BANK
        return {_alias_for(bank_id): {"bank_id": bank_id, "budget": budget, "access": "read_write"}}
    if not isinstance(raw, Mapping):
        reader.fail("banks", 'must be an object of named banks, e.g. {"code": {"bankId": "code"}}')
    banks: dict[str, dict[str, Any]] = {}
    for alias, table in raw.items():
        key = f"banks.{alias}"
        if not isinstance(alias, str) or not _ALIAS.match(alias):
            reader.fail(
                key, "a bank alias is 1-63 lowercase letters, digits, '-' or '_', starting with a letter"
            )
        if not isinstance(table, Mapping):
            reader.fail(key, "must be an object with at least bankId")
        bank_id = table.get("bankId", table.get("bank_id"))
        if not isinstance(bank_id, str) or not bank_id.strip():
            reader.fail(f"{key}.bankId", "is missing; give the Hindsight bank id")
        enabled = table.get("enabled", True)
        if not isinstance(enabled, bool):
            reader.fail(f"{key}.enabled", "must be true or false")
        description = table.get("description", "")
        if not isinstance(description, str):
            reader.fail(f"{key}.description", "must be a string")
        access = table.get("access", "read_write")
        if access not in ("read_only", "read_write"):
            reader.fail(f"{key}.access", f"{access!r} is not an access; use read_only or read_write")
        banks[alias] = {
            "bank_id": str(bank_id).strip(),
            "budget": reader.budget("budget", table, f"{key}.") or budget,
            "enabled": enabled,
            "description": description,
            "access": access,
        }
    return banks


def _default_alias(reader: _Reader, banks: dict[str, dict[str, Any]]) -> str:
    """``default_bank`` (an alias), else ``bank_id`` as an alias or a bank id, else the first bank."""
    named = reader.alias_of(banks, "default_bank")
    if named:
        return named
    bank_id = reader.string("bank_id")
    if not bank_id:
        return next(iter(banks))
    if bank_id in banks:
        return bank_id
    for alias, table in banks.items():
        if table["bank_id"] == bank_id:
            return alias
    alias = _alias_for(bank_id)
    if alias in banks:
        reader.fail("bank_id", f"{bank_id!r} is neither a bank alias nor the bankId of one under banks")
    banks[alias] = {"bank_id": bank_id, "access": "read_write"}
    return alias


def _apply_read_write(reader: _Reader, banks: dict[str, dict[str, Any]]) -> None:
    """``read_banks`` hides the banks it leaves out; ``write_banks`` makes exactly its banks writable."""
    readable = reader.aliases("read_banks", banks)
    writable = reader.aliases("write_banks", banks)
    if writable is not None:
        for alias, table in banks.items():
            table["access"] = "read_write" if alias in writable else "read_only"
    if readable is not None:
        visible = set(readable) | set(writable or ())
        for alias, table in banks.items():
            if alias not in visible:
                table["enabled"] = False


def _alias_for(bank_id: str) -> str:
    """An alias for a bank known only by its id: the id when it is a valid alias, else ``default``."""
    candidate = bank_id.strip().lower()
    return candidate if _ALIAS.match(candidate) else "default"


def _environment_fallback(env: Mapping[str, str]) -> dict[str, Any]:
    """Hermes' configuration when no file exists: its environment variables, its defaults."""
    return {
        "bank_id": env.get("HINDSIGHT_BANK_ID") or HERMES_DEFAULT_BANK,
        "recall_budget": env.get("HINDSIGHT_BUDGET") or "mid",
    }


def _env_number(value: str | None) -> float | None:
    try:
        return float(value) if value else None
    except ValueError:
        return None


def _read_json(path: Path) -> Mapping[str, Any]:
    source = str(path)
    try:
        raw = read_config_bytes(path, source, _MAX_JSON_BYTES)
    except OSError as exc:
        raise ConfigError(f"{source}: cannot read: {exc.strerror or exc}") from None
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{source}: not UTF-8 text (byte {exc.start}); save it as UTF-8") from None
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"{source}: invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}; "
            "fix it or remove the file to use the environment"
        ) from None
    except (ValueError, RecursionError) as exc:  # a number of thousands of digits, nesting too deep
        raise ConfigError(f"{source}: not a Hindsight config ({type(exc).__name__}: {exc})"[:300]) from None
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: must hold a JSON object, not {type(data).__name__}")
    return data
