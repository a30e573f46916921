"""``dreamer demo``: a complete roll-up on the embedded store, in a fresh directory, in seconds.

It fills three profile banks with a small sample of memories written for the demo (paraphrases of
one fact, a changed version number, and an idle profile), runs two cycles ("day 1", "day 2") for
every profile, and prints what was promoted, reinforced, skipped and why.
"""

from __future__ import annotations

import os
import shlex
import tempfile
import tomllib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dreamer.backends import MemoryBackend
from dreamer.backends.base import RetainItem
from dreamer.config import Config, parse_config
from dreamer.errors import UsageError
from dreamer.jobs.open import open_for
from dreamer.rollup.report import RollupReport
from dreamer.service.runner import run_rollups_now

DAY1: dict[str, list[str]] = {
    "research": [
        "The embedding benchmark showed bge-small beats all-MiniLM-L6-v2 on recall@10 for our notes.",
        "For our notes, the embedding benchmark showed bge-small beats all-MiniLM-L6-v2 on recall@10.",
        "Honcho's dreamer dedups with a single nearest neighbour at cosine 0.95.",
        "The user prefers summaries with citations to the original paper.",
        "ok thanks, that's all for now",
    ],
    "homelab": [
        "Nextcloud runs version 27.1 on host atlas behind nginx.",
        "The backup job for atlas runs nightly at 02:30 with restic to the NAS.",
        "Atlas's nightly restic backup to the NAS starts at 02:30.",
        "Grafana listens on port 3000 on host hermes-mon.",
    ],
    "coder": [],
}

DAY2: dict[str, list[str]] = {
    "research": [
        "In the benchmark on our notes, bge-small beat all-MiniLM-L6-v2 on recall@10.",
    ],
    "homelab": [
        "Nextcloud runs version 28.0 on host atlas behind nginx.",
    ],
    "coder": [],
}

#: The demo's configuration, written to ``D/config.toml`` so every command can be tried on its state
#: afterwards; paths are relative to that file's directory.
DEMO_CONFIG_TOML = """\
# Written by `dreamer demo`: the configuration of the demo's state in this directory.
state_dir = "state"

[backend]
kind = "embedded"

[banks.global]
bank_id = "private__hermes"
description = "Global roll-up bank."

[banks.shared]
bank_id = "shared"
description = "Cross-agent memory."

[banks.research]
bank_id = "private__hermes__research"
access = "read_write"

[banks.homelab]
bank_id = "private__hermes__homelab"
access = "read_write"

[banks.coder]
bank_id = "private__hermes__coder"
access = "read_write"

[profiles.research]
bank = "research"
directive = "benchmarks, papers and preferences"

[profiles.homelab]
bank = "homelab"
conflict_policy = "recency_wins"

[profiles.coder]
bank = "coder"
conflict_policy = "keep_both"

[slot]
acquire_timeout_s = 5
"""
DEMO_CONFIG: dict[str, Any] = tomllib.loads(DEMO_CONFIG_TOML)
CONFIG_NAME = "config.toml"


class DemoDirectoryError(UsageError):
    """The demo's directory cannot take a new demo: its config.toml exists, or it cannot be written."""


@dataclass(frozen=True)
class DemoResult:
    directory: Path
    config_path: Path
    days: list[list[RollupReport]]


async def run_demo(directory: Path | None = None, *, echo: Callable[[str], None] = print) -> DemoResult:
    """Run the demo in ``directory`` (a new temporary directory when None), leaving its
    ``config.toml`` there and printing three commands to try on it. :class:`DemoDirectoryError`,
    before anything is written, when the directory holds a config.toml or cannot be written."""
    root = directory or Path(tempfile.mkdtemp(prefix="dreamer-demo-"))
    config_path = write_demo_config(root)
    config = parse_config(DEMO_CONFIG, source=str(config_path), base_dir=config_path.parent)
    echo(f"Dreamer demo in {root} (embedded store: {config.embedded_path})")
    days: list[list[RollupReport]] = []
    async with open_for(config, backend=True) as opened:
        backend = opened.backend
        for label, memories in (("day 1", DAY1), ("day 2", DAY2)):
            echo(f"\n== {label}: agents write to their profile banks")
            for profile, texts in memories.items():
                if texts:
                    await _retain(backend, config, profile, texts)
                echo(f"   {profile:<9} +{len(texts)} memories")
            echo(f"== {label}: one roll-up cycle for every profile")
            reports = await run_rollups_now(config, list(config.enabled_profiles()), backend=backend)
            for r in reports:
                _print_report(r, echo)
            days.append(reports)
        upstream = config.bank_id(config.topology.global_bank)
        cards = await backend.list_units_since(upstream, None)
        echo(f"\n== the global bank {upstream} now holds {len(cards)} cards:")
        for unit in cards:
            echo(f"   [{', '.join(unit.tags)}] {unit.text}")
    echo(try_next(config_path))
    return DemoResult(root, config_path, days)


def write_demo_config(root: Path) -> Path:
    """Create ``root`` (with parents) and write ``root/config.toml``, never over an existing one."""
    path = root / CONFIG_NAME
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        # os.path, not Path.exists: that raises again for a name too long or a loop of links.
        exists_as_other = os.path.lexists(root) and not os.path.isdir(root)
        reason = (
            "it exists and is not a directory" if exists_as_other else (exc.strerror or type(exc).__name__)
        )
        raise DemoDirectoryError(
            f"cannot create the demo directory {root}: {reason}; give a directory you can write "
            "(dreamer demo --dir DIR)"
        ) from None
    try:
        # "x": refused when anything is there, a dangling symbolic link included.
        with path.open("x", encoding="utf-8") as f:
            f.write(DEMO_CONFIG_TOML)
    except FileExistsError:
        raise DemoDirectoryError(
            f"{path} already exists; the demo does not overwrite a configuration: give a new "
            "directory (dreamer demo --dir NEW) or remove that file"
        ) from None
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise DemoDirectoryError(
            f"cannot write the demo into {root}: {reason}; give a directory you can write "
            "(dreamer demo --dir DIR)"
        ) from None
    return path.resolve()


def try_next(config_path: Path) -> str:
    """The closing lines: three commands to run on the demo's state (each is tested to work)."""
    config = shlex.quote(str(config_path))
    return "\n".join(
        [
            "",
            f"== try next, on this demo's state ({config}):",
            f"   dreamer status --config {config}",
            f"   dreamer recall 'Nextcloud version' --profile homelab --config {config}",
            f"   dreamer card --profile homelab --config {config}",
        ]
    )


async def _retain(backend: MemoryBackend, config: Config, profile: str, texts: Sequence[str]) -> None:
    bank = config.profile_bank_id(profile)
    await backend.retain(bank, [RetainItem(content=t, context=f"{profile} session") for t in texts])


def _print_report(r: RollupReport, echo: Callable[[str], None]) -> None:
    echo(f"   {r.profile:<9} {r.outcome}: {r.reason}")
    for card in r.plan:
        # "merged" in the units line means units folded into a card already upstream; a new card
        # that says several memories is "from N memories", so the two never read alike.
        sources = f"  [one card from {len(card.source_ids)} memories]" if len(card.source_ids) > 1 else ""
        echo(f"      {card.verdict:<9} {card.text}{sources}")
        echo(f"                ({card.reason})")
