"""Test configurations: one builder for the data, its TOML text, and the parsed or loaded ``Config``.

:func:`config_data` builds the mapping a config file holds; :func:`parsed` validates such a mapping
the way ``parse_config`` does, :func:`toml_text` writes it as TOML and :func:`loaded` writes it to a
``config.toml`` and loads that file as the daemon would.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from dreamer.config import Config, load_config, parse_config
from dreamer.errors import ConfigError

# The bank id of each alias the tests use, after the Hermes naming (``private__hermes__<profile>``).
BANK_IDS = {
    "global": "private__hermes",
    "shared": "shared",
    "research": "private__hermes__research",
    "homelab": "private__hermes__homelab",
    "coder": "private__hermes__coder",
}

Tables = Mapping[str, Mapping[str, Any]] | Iterable[str]


def default_bank_id(alias: str) -> str:
    return BANK_IDS.get(alias, alias)


def config_data(
    banks: Tables = ("global", "shared", "research"),
    profiles: Tables = ("research",),
    *,
    bank_id: Callable[[str], str] = default_bank_id,
    **sections: Any,
) -> dict[str, Any]:
    """A configuration mapping with ``banks`` and ``profiles`` (names, or names to their settings)
    and the other top-level keys as given.

    A bank without a ``bank_id`` setting gets ``bank_id(alias)``; a profile without a ``bank``
    setting writes to the bank of its own name. ``[embeddings]`` is ``provider = "none"`` unless
    given: the tests' verdicts are the lexical dedup's, whether or not the local model is installed
    (the default, ``auto``, would take it where it is).
    """
    return {
        "banks": {alias: {"bank_id": bank_id(alias), **settings} for alias, settings in _tables(banks)},
        "profiles": {name: {"bank": name, **settings} for name, settings in _tables(profiles)},
        "embeddings": {"provider": "none"},
        **sections,
    }


def _tables(tables: Tables) -> list[tuple[str, Mapping[str, Any]]]:
    if isinstance(tables, Mapping):
        return list(tables.items())
    return [(name, {}) for name in tables]


def parsed(
    base: Mapping[str, Any],
    change: Callable[[dict[str, Any]], None] | None = None,
    *,
    source: str = "test",
    base_dir: Path = Path("/srv"),
    environ: Mapping[str, str] | None = None,
) -> Config:
    """``base`` (deep-copied, then passed to ``change`` if given) as a validated configuration;
    the environment is empty unless ``environ`` is given."""
    data = copy.deepcopy(dict(base))
    if change is not None:
        change(data)
    return parse_config(data, source=source, base_dir=base_dir, environ=environ or {})


def toml_text(data: Mapping[str, Any], table: str = "") -> str:
    """``data`` (tables of strings, paths, numbers, booleans and lists of them) as TOML; JSON scalars
    are valid TOML."""
    scalars = [f"{key} = {_scalar(value)}" for key, value in data.items() if not isinstance(value, Mapping)]
    lines = ([f"[{table}]"] if table and scalars else []) + scalars
    for key, value in data.items():
        if isinstance(value, Mapping):
            lines.append(toml_text(value, f"{table}.{key}" if table else key))
    return "\n".join(lines)


def _scalar(value: Any) -> str:
    if isinstance(value, Path):
        value = str(value)
    elif isinstance(value, (list, tuple)):
        return "[" + ", ".join(_scalar(item) for item in value) + "]"
    return json.dumps(value)


def write_toml(path: Path, data: Mapping[str, Any]) -> Path:
    """Write ``data`` to ``path`` as TOML."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(toml_text(data) + "\n", encoding="utf-8")
    return path


def loaded(directory: Path, data: Mapping[str, Any]) -> Config:
    """Write ``data`` to ``directory/config.toml`` and load it as the daemon would."""
    return load_config(write_toml(directory / "config.toml", data))


#: The file name the configuration-error tests parse under, so each problem starts with it.
SOURCE = "config.toml"


def config_with(change: Callable[[dict[str, Any]], None], environ: Mapping[str, str] | None = None) -> Config:
    """:func:`config_data` changed by ``change``, parsed as ``/etc/dreamer/config.toml`` would be."""
    return parsed(config_data(), change, source=SOURCE, base_dir=Path("/etc/dreamer"), environ=environ)


def problems(change: Callable[[dict[str, Any]], None], environ: Mapping[str, str] | None = None) -> list[str]:
    """The problems :func:`config_with` is refused with (it must be refused)."""
    import pytest

    with pytest.raises(ConfigError) as caught:
        config_with(change, environ)
    return caught.value.problems


def section(data: dict[str, Any], *path: str) -> dict[str, Any]:
    """The table at ``path`` in ``data``, made when it is not there."""
    for key in path:
        data = data.setdefault(key, {})
    return data

