"""The model name from an agent's Hermes `config.yaml`, read without a YAML library.

Only the one value the audit compares against is needed, so a tiny line parser replaces a PyYAML
dependency. Two shapes are understood, both top-level:

    model: anthropic/claude-opus-4.6          # scalar

    model:                                    # mapping; Hermes accepts "default" or "model"
      default: "anthropic/claude-opus-4.6"
      provider: auto

Quotes and trailing comments are removed. Anything else (flow mappings, anchors, multi-line
scalars) is reported as not understood rather than guessed at.
"""

from __future__ import annotations

import re
from pathlib import Path

from dreamer.config.files import read_text_file
from dreamer.errors import AuditError

__all__ = ["ConfigYamlError", "parse_model_name", "read_model_name"]

_TOP_MODEL = re.compile(r"^model\s*:(.*)$")
_CHILD = re.compile(r"^(\s+)([A-Za-z_][A-Za-z0-9_-]*)\s*:(.*)$")


class ConfigYamlError(AuditError, ValueError):
    """config.yaml is missing, unreadable, or has no model the parser understands. Catch it where
    the model is read: the audit then checks no model entry and says so in a note."""


def _scalar(raw: str) -> str:
    """A YAML plain or quoted scalar without its quotes or trailing comment."""
    text = raw.strip()
    if text[:1] in ("'", '"'):
        quote = text[0]
        end = text.find(quote, 1)
        return text[1:end] if end > 0 else ""
    return re.sub(r"\s+#.*$", "", text).strip()


def parse_model_name(text: str) -> str | None:
    """The configured model name, or None when config text names none in a known shape."""
    lines = text.splitlines()
    for index, line in enumerate(lines):
        match = _TOP_MODEL.match(line)
        if not match:
            continue
        inline = _scalar(match.group(1))
        if inline:
            return None if inline[0] in "{[&*|>" else inline
        children: dict[str, str] = {}
        child_indent: str | None = None
        for child in lines[index + 1 :]:
            if not child.strip() or child.lstrip().startswith("#"):
                continue
            if not child[0].isspace():
                break  # next top-level key
            child_match = _CHILD.match(child)
            if not child_match:
                continue
            indent, key, value = child_match.groups()
            if child_indent is None:
                child_indent = indent
            if indent == child_indent and key not in children:
                children[key] = _scalar(value)
        for key in ("default", "model"):
            value = children.get(key, "")
            if value and value[0] not in "{[&*|>":
                return value
        return None
    return None


def read_model_name(path: Path) -> str:
    """The model configured in the config.yaml at `path`."""
    try:
        text = read_text_file(path)  # a regular file only: a FIFO would hang the audit
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigYamlError(f"cannot read {path}: {exc}") from exc
    name = parse_model_name(text)
    if name is None:
        raise ConfigYamlError(
            f"{path} has no top-level 'model: <name>' or 'model:' mapping with 'default: <name>'"
        )
    return name
