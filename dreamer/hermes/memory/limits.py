"""The character limits of an agent's MEMORY.md and USER.md, as its Hermes `config.yaml` sets them.

Hermes reads them from the top-level `memory` mapping and uses its defaults for a key (or a file)
that is absent:

    memory:
      memory_char_limit: 1800     # default 2200
      user_char_limit: 600        # default 1375

Only this block is read, by a small line parser rather than a YAML library. A value that is not
a positive whole number (quotes allowed), or a `memory` value in a shape the parser does not
understand, is an error naming the file and the key rather than a silent fall-back to the
defaults: a default larger than the user's own limit would let Dreamer fill a file past it.
Without a configured path the file is looked for where Hermes keeps it (`hermes_config_path`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from dreamer.config.files import read_config_bytes
from dreamer.errors import ConfigError
from dreamer.hermes.memory.entries import DEFAULT_MEMORY_CHAR_LIMIT, DEFAULT_USER_CHAR_LIMIT, Target

__all__ = [
    "MemoryLimits",
    "MemoryLimitsError",
    "hermes_config_path",
    "parse_memory_limits",
    "read_memory_limits",
]

_KEYS = {"memory_char_limit": Target.MEMORY, "user_char_limit": Target.USER}
_TOP_MEMORY = re.compile(r"^memory\s*:(.*)$")
_CHILD = re.compile(r"^(\s+)([A-Za-z_][A-Za-z0-9_-]*)\s*:(.*)$")
_WHOLE = re.compile(r"[0-9]+")
_MAX_DIGITS = 4000
#: A config.yaml larger than this is refused unread (Hermes' own is a few kilobytes).
_MAX_CONFIG_BYTES = 10_000_000


class MemoryLimitsError(ConfigError, ValueError):
    """config.yaml cannot be read, or sets a memory limit that is not a positive whole number. Catch
    it where the limits are read for an audit (the audit reports ERROR); left uncaught it is a
    `ConfigError` (exit 78)."""


@dataclass(frozen=True)
class MemoryLimits:
    """The two files' character limits (Hermes' defaults unless config.yaml says otherwise)."""

    memory: int = DEFAULT_MEMORY_CHAR_LIMIT
    user: int = DEFAULT_USER_CHAR_LIMIT

    def for_target(self, target: Target) -> int:
        """The limit of `target`."""
        return self.user if target is Target.USER else self.memory


def _scalar(raw: str) -> str:
    text = raw.strip()
    if text[:1] in ("'", '"'):
        end = text.find(text[0], 1)
        return text[1:end] if end > 0 else text
    return re.sub(r"\s+#.*$", "", text).strip()


def parse_memory_limits(
    text: str, source: str = "config.yaml", defaults: MemoryLimits = MemoryLimits()
) -> MemoryLimits:
    """The limits set in config `text`, `defaults` for those it does not set; `source` names the file."""
    found: dict[Target, int] = {}
    lines = text.splitlines()
    for index, line in enumerate(lines):
        match = _TOP_MEMORY.match(line)
        if not match:
            continue
        inline = _scalar(match.group(1))
        if inline and inline not in ("~", "null", "{}"):
            raise MemoryLimitsError(
                f"{source}: memory: expected a mapping on the following indented lines, got {inline!r}; "
                f"write it as 'memory:' with 'user_char_limit: N' indented below"
            )
        child_indent: str | None = None
        for child in lines[index + 1 :]:
            if not child.strip() or child.lstrip().startswith("#"):
                continue
            if not child[0].isspace():
                break  # the next top-level key
            child_match = _CHILD.match(child)
            if not child_match:
                continue
            indent, key, value = child_match.groups()
            child_indent = indent if child_indent is None else child_indent
            if indent != child_indent or key not in _KEYS:
                continue
            number = _scalar(value)
            # Past 4300 digits int() itself refuses (a ValueError that is not ours); Hermes would too.
            if not _WHOLE.fullmatch(number) or len(number) > _MAX_DIGITS or int(number) <= 0:
                raise MemoryLimitsError(
                    f"{source}: memory.{key}: expected a positive whole number of characters, got "
                    f"{number!r}; fix the value (Hermes' default is "
                    f"{MemoryLimits().for_target(_KEYS[key])})"
                )
            found[_KEYS[key]] = int(number)  # a repeated key: the last one wins, as in a YAML loader
    return MemoryLimits(found.get(Target.MEMORY, defaults.memory), found.get(Target.USER, defaults.user))


def hermes_config_path(memories_dir: Path, configured: Path | None) -> Path:
    """The config.yaml Hermes reads for the agent whose memories are in `memories_dir`.

    The configured path when there is one, else Hermes' own layout: `$HERMES_HOME/config.yaml` next
    to `$HERMES_HOME/memories/`.
    """
    return configured if configured is not None else memories_dir.parent / "config.yaml"


def read_memory_limits(path: Path | None, defaults: MemoryLimits = MemoryLimits()) -> MemoryLimits:
    """The limits set in the config.yaml at `path`; `defaults` (Hermes') for those it does not set."""
    if path is None:
        return defaults
    try:
        text = read_config_bytes(path, str(path), _MAX_CONFIG_BYTES).decode("utf-8")
    except FileNotFoundError:
        return defaults
    except (OSError, UnicodeDecodeError, ConfigError) as exc:
        raise MemoryLimitsError(
            f"cannot read the memory limits in {path}: {exc}; make the file readable (UTF-8 text)"
        ) from exc
    return parse_memory_limits(text, str(path), defaults)
