"""What the command bodies share: JSON or text output, times as printed."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, TextIO


def iso(ts: datetime | None) -> str | None:
    return None if ts is None else ts.astimezone(UTC).isoformat(timespec="seconds")


def written_paths(paths: Sequence[Any]) -> str:
    if not paths:
        return "no peer card written (set profiles.<name>.peer_card_path or peer_card.global_path)"
    return "\n".join(f"wrote {p}" for p in paths)


def emit(payload: Any, as_json: bool, out: TextIO) -> None:
    if as_json:
        json.dump(payload, out, indent=2, ensure_ascii=False)
    else:
        out.write(str(payload).rstrip("\n"))
    out.write("\n")
