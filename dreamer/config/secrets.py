"""API keys: read from an environment variable or a file (a systemd credential), never the TOML."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from pydantic import SecretStr

from dreamer.config.files import expand_path, read_key_file
from dreamer.errors import ConfigError

__all__ = ["is_header_safe_key", "read_key"]


def is_header_safe_key(key: str) -> bool:
    """Printable ASCII without spaces: what a ``Bearer`` token in an HTTP header can be."""
    return all("!" <= ch <= "~" for ch in key)


def read_key(
    key_env: str | None,
    key_file: Path | None,
    prefix: str,
    source: str,
    environ: Mapping[str, str],
    *,
    used: bool,
    names: tuple[str, str] = ("api_key_env", "api_key_file"),
    header: bool = True,
) -> SecretStr | None:
    """An API key from ``key_file`` (first) or the variable ``key_env``; never from the TOML.

    ``prefix`` is the table (``backend.hindsight``); ``used`` says whether the key will be sent,
    so a key an HTTP header cannot carry is an error only then. ``names`` are the two keys as the
    table spells them; a secret that is not sent in a header (``header`` False: a database
    password) may hold any character but a control character."""
    env_key, file_key = names
    key: str | None = None
    where = ""
    if key_file is not None:
        path = expand_path(key_file, f"{prefix}.{file_key}", source, environ)
        try:
            key = read_key_file(path).strip()
        except OSError as exc:
            raise ConfigError(
                f"{source}: {prefix}.{file_key}: cannot read {str(path)!r}: "
                f"{exc.strerror or exc}; create the file (e.g. a systemd credential) or remove the key"
            ) from None
        except UnicodeDecodeError:
            key = "\x00"  # not text at all: refused below like any other unusable byte
        if not key:
            raise ConfigError(
                f"{source}: {prefix}.{file_key}: {str(path)!r} is empty; "
                "put the key in it or remove the setting"
            )
        where = f"{prefix}.{file_key}: the key in {str(path)!r}"
    elif key_env:
        key = environ.get(key_env) or None
        where = f"{prefix}.{env_key}: the key in ${key_env}"
    if key and not header:
        if any(not ch.isprintable() for ch in key):
            raise ConfigError(f"{source}: {where} holds a control character; store it alone, on one line")
        return SecretStr(key)
    if key and not is_header_safe_key(key) and used:
        # Never shown: a key with a newline would be printed whole by the HTTP library's own error.
        raise ConfigError(
            f"{source}: {where} holds a space, a control character or a non-ASCII character, "
            "which an HTTP header cannot carry; store the key alone, as printable ASCII"
        )
    return SecretStr(key) if key and is_header_safe_key(key) else None
