"""The synthetic install both parts measure: its config, its memory sentences, watermarks already set.

Each profile has a bank of its own; ``mark_rolled_up`` leaves a profile as a completed roll-up of its
whole bank would, so a run afterwards sees only what is written later.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from dreamer.backends.base import MemoryBackend
from dreamer.config import Config, parse_config
from dreamer.state import StateStore, Watermark

_HOSTS = ("atlas", "hermes", "nova", "orion", "vega", "lyra", "draco", "cygnus", "perseus", "auriga")
_SERVICES = ("nginx", "postgres", "grafana", "restic", "redis", "minio", "gitea", "nextcloud", "jellyfin")
_VERBS = ("runs", "backs up", "proxies", "monitors", "serves", "rotates logs of", "restarts", "updates")


def synthetic_text(i: int) -> str:
    """A distinct, plausible memory sentence for index ``i`` (deterministic)."""
    host = _HOSTS[i % len(_HOSTS)]
    service = _SERVICES[(i // len(_HOSTS)) % len(_SERVICES)]
    verb = _VERBS[(i // 7) % len(_VERBS)]
    return f"Host {host}-{i % 997} {verb} {service} on port {1024 + i % 50000} since build {i}."


_SYLLABLES = tuple("ka lo mi ne ru sa ti vo ze pu da fe go hi ju be co ni ta wu".split())
_FRAMES = (
    "The {a} service on host {b} keeps its {c} cache on port {port} since build {i}.",
    "Backups of the {a} volume go to the {b} bucket with the {c} key every {hours} hours, job {i}.",
    "The {a} team deploys {b} behind the {c} proxy with {port} workers, release {i}.",
    "User {a} prefers the {b} editor theme and the {c} layout on screen {i}.",
    "The {a} cluster runs {b} jobs in the {c} queue with a limit of {port} tasks, ticket {i}.",
    "Alerts from {a} page the {b} rota through the {c} channel after {hours} minutes, rule {i}.",
)


def _word(k: int) -> str:
    n = len(_SYLLABLES)
    return _SYLLABLES[k % n] + _SYLLABLES[(k // n) % n] + _SYLLABLES[(k // (n * n)) % n]


def varied_text(i: int) -> str:
    """A distinct memory sentence for index ``i`` whose words vary with ``i`` (deterministic).

    :func:`synthetic_text` draws from a few hundred word combinations, so among a million texts
    hundreds share all their words but the numbers; dedup's Jaccard gate would pass them all and a
    run would measure the template. Here three made-up words (8,000 each) and six sentence frames
    vary per text, so two texts rarely share more than a frame's own words.
    """
    h = (i * 2654435761 + 97) % (1 << 32)
    vocabulary = len(_SYLLABLES) ** 3
    return _FRAMES[i % len(_FRAMES)].format(
        a=_word(h % vocabulary),
        b=_word((h // 7 + i) % vocabulary),
        c=_word((h // 131 + 3 * i) % vocabulary),
        port=1024 + i % 50000,
        hours=1 + i % 23,
        i=i,
    )


def gating_config(
    names: Sequence[str],
    state_dir: Path,
    backend: Mapping[str, Any],
    prefix: str,
    top_n: int = 20,
    rollup: Mapping[str, Any] | None = None,
) -> Config:
    banks: dict[str, Any] = {
        "global": {"bank_id": f"{prefix}global"},
        "shared": {"bank_id": f"{prefix}shared"},
    }
    profiles: dict[str, Any] = {}
    for name in names:
        banks[name] = {"bank_id": f"{prefix}bank_{name}", "access": "read_write"}
        profiles[name] = {"bank": name, "top_n": top_n}
    data = {
        "state_dir": str(state_dir),
        "backend": dict(backend),
        "banks": banks,
        "profiles": profiles,
        "slot": {"acquire_timeout_s": 60},
        "rollup": dict(rollup or {}),
    }
    return parse_config(data, source="<bench.gating>", base_dir=state_dir)


async def mark_rolled_up(
    config: Config, backend: MemoryBackend, state: StateStore, names: Sequence[str]
) -> None:
    """Leave each profile's watermark where a completed roll-up of its whole bank would."""
    bank_ids = {name: config.profile_bank_id(name) for name in names}
    activity = await backend.activity(list(bank_ids.values()))
    now = datetime.now(UTC)
    for name in names:
        act = activity[bank_ids[name]]
        units = await backend.list_units_since(bank_ids[name], None)
        # Built through the watermark's own API, so its boundary bookkeeping is the pipeline's.
        watermark = replace(
            Watermark().advanced_to(
                ((u.created_at, u.id) for u in units),
                timedelta(seconds=config.rollup.watermark_overlap_s),
            ),
            unit_count=act.unit_count,
            last_write_at=act.last_write_at,
        )
        run_id = f"setup-{name}"
        state.record_run_start(run_id, f"rollup:{name}", now)
        state.commit_rollup(
            profile=name,
            bank_id=bank_ids[name],
            watermark=watermark,
            promoted=[],
            reinforced=[],
            run_id=run_id,
            outcome="nothing_new",
            detail="benchmark setup",
            counts={},
            finished_at=now,
        )
