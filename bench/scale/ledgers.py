"""Where the texts of the files come from (``--ledger``): the ledger's cards, the measured run's new
units and the units already rolled up.

``synthetic`` is ``varied_text`` (bench/gating/banks.py): six sentence frames with three made-up
words out of a fixed 8,000. ``realistic`` is LoCoMo's memory sentences refilled card by card, with
a vocabulary that grows with the ledger (realistic.py).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Protocol

from bench._common import BenchError
from bench.gating.banks import varied_text
from bench.scale.realistic import GENERATOR_VERSION, RealisticLedger

LEDGERS = ("synthetic", "realistic")
#: ``--vectors``: what the files' vectors are with ``--embedder local``.
VECTORS = ("seeded", "model")
NEW_UNITS = 20
#: Units of the profile bank already rolled up before the measured run.
OLD_UNITS = 100
#: Index of the first synthetic profile-bank text: far beyond any card's, so no new unit repeats a card.
_UNIT_BASE = 10**9
#: Where the LoCoMo conversations are when neither ``--data`` nor this variable says.
DATA_DIR_ENV = "DREAMER_LOCOMO_DIR"


class Ledger(Protocol):
    """The texts one kind of ledger gives the files."""

    kind: str

    def card_text(self, i: int) -> str: ...

    def new_unit_texts(self, size: int, count: int) -> list[str]: ...

    def old_unit_texts(self, size: int, count: int, offset: int) -> list[str]: ...


class SyntheticLedger:
    """``varied_text``: the cards and units the benchmark has always used."""

    kind = "synthetic"

    def card_text(self, i: int) -> str:
        return varied_text(i)

    def new_unit_texts(self, size: int, count: int) -> list[str]:
        return [varied_text(_UNIT_BASE + OLD_UNITS + k) for k in range(count)]

    def old_unit_texts(self, size: int, count: int, offset: int) -> list[str]:
        return [varied_text(_UNIT_BASE + k) for k in range(count)]


def default_data_dir() -> Path:
    """``$DREAMER_LOCOMO_DIR``, else ``shared/data/locomo`` beside the repository."""
    configured = os.environ.get(DATA_DIR_ENV)
    if configured:
        return Path(configured)
    return Path(__file__).resolve().parents[3] / "shared" / "data" / "locomo"


@dataclass(frozen=True, slots=True)
class LedgerSpec:
    """Which ledger, and for ``realistic`` the LoCoMo directory: small enough to hand to the
    worker processes, which open the ledger themselves."""

    kind: str = "synthetic"
    data: Path | None = None
    #: With ``--embedder local``, what the files' vectors are: ``seeded`` (a random unit vector per
    #: text) or ``model`` (the local model's own, embedded while the files are built).
    vectors: str = "seeded"

    def open(self) -> Ledger:
        """The ledger (built once per process); ``BenchError`` naming the directory when the
        LoCoMo files are not there."""
        return _open(self.kind, self.data)

    def cache_name(self, size: int, embedder: str) -> str:
        """The folder of ``--cache`` for these files: the synthetic names as before, the
        realistic with the ledger's kind, so the two never share files."""
        parts = [str(size)] + ([] if self.kind == "synthetic" else [self.kind])
        if embedder != "none":
            parts += [embedder] + ([] if self.vectors == "seeded" else [self.vectors])
        return "-".join(parts)

    def describe(self) -> dict[str, object]:
        """What ``built.json`` records of the ledger, compared before cached files are reused."""
        vectors = {} if self.vectors == "seeded" else {"vectors": self.vectors}
        if self.kind == "synthetic":
            return {"ledger": "synthetic", **vectors}
        return {"ledger": self.kind, "data": str(self.data), "generator": GENERATOR_VERSION, **vectors}


#: Today's files: the default everywhere.
SYNTHETIC = LedgerSpec()


def ledger_spec(kind: str, data: str | None = None, vectors: str = "seeded") -> LedgerSpec:
    """The spec of ``--ledger KIND [--data DIR] [--vectors seeded|model]`` (the data directory only
    matters to realistic)."""
    if kind not in LEDGERS:
        raise BenchError(f"--ledger is one of {', '.join(LEDGERS)}: {kind!r}")
    if vectors not in VECTORS:
        raise BenchError(f"--vectors is one of {', '.join(VECTORS)}: {vectors!r}")
    if kind == "synthetic":
        return SYNTHETIC if vectors == "seeded" else LedgerSpec(vectors=vectors)
    return LedgerSpec(kind, Path(data) if data else default_data_dir(), vectors)


@cache
def _open(kind: str, data: Path | None) -> Ledger:
    if kind == "synthetic":
        return SyntheticLedger()
    if data is None or not data.is_dir():
        raise BenchError(
            f"--ledger realistic reads the LoCoMo conversations, and there is no directory {data}; "
            f"pass --data DIR (the folder holding <id>.json) or set {DATA_DIR_ENV}"
        )
    return RealisticLedger(data)
