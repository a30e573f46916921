"""A run's new units cut into batches in stream order, so that no unit is skipped.

The stream is ordered by ``(created_at, id)``, the order the watermark moves in. A batch is the
next stretch of the stream holding at most ``size`` units that carry a fact (one summariser's
input); the chatter inside that stretch is judged with it. Batches beyond the run's limit stay
pending as a whole, so the units judged are always a prefix of the stream and the watermark can
move past exactly them. Salience only orders a batch's units; it never pushes one out.
Why: ``docs/design/rollup.md``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from dreamer.rollup.salience import SalienceInput, chatter_reason, score_units

__all__ = ["Batch", "InvalidBatchError", "StreamCut", "batch_size", "cut_stream", "stream_order"]


class InvalidBatchError(ValueError):
    """A batch size or limit that cannot cut a stream; the message says which."""


@dataclass(frozen=True, slots=True)
class Batch:
    """One stretch of the stream: every unit in it, the ones carrying a fact (best first, the
    summariser's input) and the chatter with why it was dropped."""

    units: tuple[SalienceInput, ...]
    substantive: tuple[SalienceInput, ...]
    chatter: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class StreamCut:
    """The batches of one run, in stream order, and the units left for the next run."""

    batches: tuple[Batch, ...]
    pending: tuple[SalienceInput, ...]


def stream_order(units: Sequence[SalienceInput]) -> list[SalienceInput]:
    """The units in the order the watermark moves: ``(created_at, id)``."""
    return sorted(units, key=lambda u: (u.created_at, u.id))


def batch_size(top_n: int, extractive_batch: int, summariser: str) -> int:
    """How many substantive units one batch of a run holds (`cut_stream`'s ``size``).

    A model reads ``top_n`` units a batch. The extractive summariser has no prompt to fit and
    takes ``extractive_batch`` (`rollup.extractive_batch`), so that its fold meets more of the
    run's units: one fact told twice in a session is one card, not two cards in two batches (on
    LoCoMo, where 43 of 128 sessions hold more than 20 units and none more than 30: 1,879 cards of
    2,456 units in batches of 20, 1,840 in batches of 100; docs/design/rollup.md).
    """
    return extractive_batch if summariser == "extractive" else top_n


def cut_stream(
    units: Sequence[SalienceInput],
    size: int,
    *,
    limit: int,
    directive: str | Sequence[str] | None = None,
) -> StreamCut:
    """At most ``limit`` batches of at most ``size`` substantive units each, in stream order.

    A batch closes at its ``size``-th substantive unit; chatter after the last substantive unit
    of the stream joins the last batch, so a stream of chatter only is one batch without input.
    """
    if size < 1:
        raise InvalidBatchError(f"a batch must hold at least one unit, not {size}")
    if limit < 1:
        raise InvalidBatchError(f"a run must judge at least one batch, not {limit}")
    ordered = stream_order(units)
    reasons = {unit.id: chatter_reason(unit.text) for unit in ordered}
    last_fact = max((at for at, unit in enumerate(ordered) if reasons[unit.id] is None), default=-1)
    batches: list[Batch] = []
    stretch: list[SalienceInput] = []
    facts = 0
    for at, unit in enumerate(ordered[: last_fact + 1]):
        stretch.append(unit)
        facts += reasons[unit.id] is None
        if facts == size or at == last_fact:
            if len(batches) == limit:
                return StreamCut(tuple(batches), tuple(ordered[at + 1 - len(stretch) :]))
            batches.append(_batch(stretch, reasons, directive))
            stretch, facts = [], 0
    trailing = ordered[last_fact + 1 :]
    if trailing:
        # Chatter after the last fact is judged with the last batch (or alone when there is none).
        last = batches.pop() if batches else Batch((), ())
        batches.append(_batch([*last.units, *trailing], reasons, directive))
    return StreamCut(tuple(batches), ())


def _batch(
    stretch: Sequence[SalienceInput],
    reasons: Mapping[str, str | None],
    directive: str | Sequence[str] | None,
) -> Batch:
    facts = [unit for unit in stretch if reasons[unit.id] is None]
    chatter = {unit.id: reason for unit in stretch if (reason := reasons[unit.id]) is not None}
    ranked = tuple(scored.unit for scored in score_units(facts, directive))
    return Batch(tuple(stretch), ranked, chatter)
