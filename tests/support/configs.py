"""Configurations for unit tests: a base mapping, optionally changed, parsed the way a file would be."""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from dreamer.config import Config, parse_config


def parsed(base: Mapping[str, Any], change: Callable[[dict[str, Any]], None] | None = None) -> Config:
    """``base`` (deep-copied, then passed to ``change`` if given) as a validated configuration."""
    data = copy.deepcopy(dict(base))
    if change is not None:
        change(data)
    return parse_config(data, source="test", base_dir=Path("/srv"), environ={})
