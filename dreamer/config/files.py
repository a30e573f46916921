"""Reading a configuration file safely: a regular file only, never more than a bound."""

from __future__ import annotations

import errno
import os
import re
import stat
from collections.abc import Mapping
from pathlib import Path

from dreamer.errors import ConfigError

__all__ = [
    "MAX_CONFIG_BYTES",
    "MAX_KEY_FILE_BYTES",
    "expand_path",
    "read_config_bytes",
    "read_key_file",
    "read_text_file",
]

#: No configuration file is this large; a bigger one is refused without being parsed.
MAX_CONFIG_BYTES = 1_000_000
#: An API key file holds one key: no more than this is read from it.
MAX_KEY_FILE_BYTES = 65_536


def read_config_bytes(path: Path, source: str, limit: int = MAX_CONFIG_BYTES) -> bytes:
    """The bytes of the regular file at ``path`` (links followed), at most ``limit``.

    Opened without blocking and checked before reading: a FIFO would hang the caller, and a link
    to ``/dev/zero`` would be read without end. ``OSError`` (``FileNotFoundError`` included) is
    left to the caller, which knows what a missing file means; the rest is a ConfigError.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise ConfigError(f"{source}: not a regular file; point it at the file itself")
        raw = handle.read(limit + 1)
    if len(raw) > limit:
        raise ConfigError(f"{source}: larger than {limit} bytes; this is not a configuration file")
    return raw


def read_text_file(path: Path, limit: int = MAX_CONFIG_BYTES) -> str:
    """The UTF-8 text of the regular file at ``path``, as :func:`read_config_bytes` reads it, for
    callers that report ``OSError`` / ``UnicodeDecodeError`` themselves: a FIFO, a device or a file
    over ``limit`` is an ``OSError`` (EINVAL) saying so."""
    try:
        raw = read_config_bytes(path, str(path), limit)
    except ConfigError as exc:
        raise OSError(errno.EINVAL, str(exc)) from None
    return raw.decode("utf-8")


def read_key_file(path: Path) -> str:
    """The text at the start of an API key file, at most MAX_KEY_FILE_BYTES: a link to /dev/zero
    or /dev/urandom would otherwise be read without end. A FIFO is read (a credential can be handed
    over through one); ``OSError`` / ``UnicodeDecodeError`` are the caller's."""
    with path.open("rb") as handle:
        return handle.read(MAX_KEY_FILE_BYTES).decode("utf-8")


_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def expand_path(path: Path, key: str, source: str, environ: Mapping[str, str]) -> Path:
    """``path`` with ``${VAR}`` and ``~`` expanded; an unset variable is a ConfigError naming ``key``."""
    text = str(path)
    missing = [m.group(1) for m in _VAR.finditer(text) if m.group(1) not in environ]
    if missing:
        raise ConfigError(
            f"{source}: {key}: environment variable ${{{missing[0]}}} is not set "
            f"(used in {text!r}); set it or write the path out in full"
        )
    text = _VAR.sub(lambda m: environ[m.group(1)], text)
    return Path(os.path.expanduser(text))
