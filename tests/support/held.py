"""The invariant "units held", asserted after a roll-up ran end to end.

Every unit a run summarised (read, not dropped as chatter by salience, not pending for a later batch
or run) must have its protected details (numbers, dates, versions, hosts, paths, URLs, names,
negations) in the ledger cards whose provenance (``source_ids``) cites it:
:func:`dreamer.rollup.grounding.units_not_held` is empty. A failure lists each unit not held with its
id, its text, what is missing and the texts of the cards citing it, so that a grounding bug can be
read straight from the test output.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Protocol

from dreamer.backends.base import MemoryBackend, MemoryUnit
from dreamer.cardtags import is_dreamer_card
from dreamer.config import Config
from dreamer.rollup.grounding import units_not_held
from dreamer.rollup.pipeline import Rollup
from dreamer.rollup.promote import INPUT_FACT_TYPES
from dreamer.rollup.salience import chatter_reason
from dreamer.state import LedgerCard, StateStore

__all__ = [
    "assert_profile_held",
    "assert_units_held",
    "chatter_ids",
    "ledger_cards",
    "not_held_report",
    "profile_units",
]


class _Unit(Protocol):
    """A unit as a backend lists it (``MemoryUnit``) or as a run reads it (``SalienceInput``)."""

    @property
    def id(self) -> str: ...

    @property
    def text(self) -> str: ...


Units = Mapping[str, str] | Iterable[tuple[str, str]] | Iterable[_Unit]
Cards = StateStore | Iterable[LedgerCard] | Iterable[tuple[str, Sequence[str]]]


def _unit_pairs(units: Units) -> dict[str, str]:
    if isinstance(units, Mapping):
        return {str(i): str(t) for i, t in units.items()}
    pairs: dict[str, str] = {}
    for unit in units:
        if isinstance(unit, tuple):
            unit_id, text = unit
        else:
            unit_id, text = unit.id, unit.text
        pairs[unit_id] = text
    return pairs


def ledger_cards(cards: Cards, bank: str | None = None) -> list[tuple[str, tuple[str, ...]]]:
    """(text, source ids) of each card: a state file's ledger (of ``bank``, or all of it), ledger
    cards, or such pairs already."""
    if isinstance(cards, StateStore):
        cards = cards.ledger(bank)
    out: list[tuple[str, tuple[str, ...]]] = []
    for card in cards:
        if isinstance(card, LedgerCard):
            out.append((card.text, tuple(card.source_ids)))
        else:
            text, ids = card
            out.append((text, tuple(ids)))
    return out


def chatter_ids(units: Units) -> set[str]:
    """The ids of the units salience drops as chatter (`dreamer.rollup.salience.chatter_reason`, the
    rule `dreamer.rollup.batches.cut_stream` applies)."""
    return {i for i, text in _unit_pairs(units).items() if chatter_reason(text) is not None}


def not_held_report(
    cards: Cards,
    units: Units,
    *,
    exclude: Iterable[str] = (),
    bank: str | None = None,
) -> dict[str, str]:
    """``units_not_held`` over ``units`` (id, text) minus the ``exclude`` ids (chatter, pending) and
    empty texts (a run never reads those), against ``cards``."""
    skip = set(exclude)
    summarised = {i: t for i, t in _unit_pairs(units).items() if i not in skip and t.strip()}
    return units_not_held(summarised, ledger_cards(cards, bank))


def assert_units_held(
    cards: Cards,
    units: Units,
    *,
    exclude: Iterable[str] = (),
    bank: str | None = None,
) -> None:
    """Assert that every unit of ``units`` not in ``exclude`` is held by the cards citing it.

    ``cards``: a `StateStore` (its ledger, of ``bank`` when given), ledger cards or (text, source
    ids) pairs. ``units``: (id, text) pairs, a mapping of id to text, or objects with ``id`` and
    ``text`` (``MemoryUnit``). ``exclude``: the ids the run did not summarise, its chatter (see
    :func:`chatter_ids`) and pending units. The failure message names each unit not held, its text,
    what is missing, and every card citing it.
    """
    pairs = ledger_cards(cards, bank)
    texts = _unit_pairs(units)
    missing = not_held_report(pairs, texts, exclude=exclude)
    if not missing:
        return
    citing: dict[str, list[str]] = {}
    for text, ids in pairs:
        for i in ids:
            citing.setdefault(i, []).append(text)
    lines = [f"{len(missing)} of the units summarised not held by the cards citing them:"]
    for unit_id, why in missing.items():
        lines.append(f"- unit {unit_id}: {why}")
        lines.append(f"    text: {texts[unit_id]!r}")
        for text in citing.get(unit_id, []):
            lines.append(f"    cited by card: {text!r}")
    raise AssertionError("\n".join(lines))


async def profile_units(
    config: Config, backend: MemoryBackend, state: StateStore, profile: str
) -> tuple[list[MemoryUnit], set[str]]:
    """Every unit of ``profile``'s bank a roll-up reads (its input fact types, never a card, never
    empty) and the ids it has not summarised: its chatter and the backlog the next run would read."""
    bank_id = config.profile_bank_id(profile)
    listed = await backend.list_units_since(bank_id, None, fact_types=INPUT_FACT_TYPES)
    units = [u for u in listed if not is_dreamer_card(u.tags, u.metadata) and u.text.strip()]
    pending = await Rollup(config, backend, state).backlog(profile)
    return units, chatter_ids(units) | {u.id for u in pending}


async def assert_profile_held(
    config: Config, backend: MemoryBackend, state: StateStore, profile: str
) -> list[MemoryUnit]:
    """`assert_units_held` for every unit of ``profile``'s bank that its runs summarised so far,
    against the ledger of the profile's upstream bank; the units it checked."""
    units, skipped = await profile_units(config, backend, state, profile)
    assert_units_held(state, units, exclude=skipped, bank=config.upstream_bank_id(profile))
    return [u for u in units if u.id not in skipped]
