"""The activity gate: decide from one activity snapshot whether a profile needs a roll-up.

Pure: it compares the bank's activity (from the one bank-list call per cycle) with the profile's
watermark. An idle profile costs no lock and no LLM call.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from dreamer.backends.base import BankActivity
from dreamer.outcomes import Outcome
from dreamer.state import Watermark


@dataclass(frozen=True, slots=True)
class GateDecision:
    """``run`` or not; when not, ``outcome`` is ``idle`` (nothing new) or ``waiting`` (too little)."""

    run: bool
    reason: str
    pending: int = 0

    @property
    def outcome(self) -> str:
        if self.run:
            return "run"
        return Outcome.WAITING if self.pending else Outcome.IDLE


def gate(
    watermark: Watermark,
    activity: BankActivity | None,
    *,
    min_new_units: int,
    max_quiet_hours: float,
    now: datetime,
) -> GateDecision:
    """Whether to roll up now, and why.

    ``pending`` estimates the new units from the bank's unit count at the last roll-up. A bank with
    fewer than ``min_new_units`` new units still runs once ``max_quiet_hours`` have passed since the
    last roll-up, so a quiet install is never starved.
    """
    if activity is None or not activity.exists or activity.unit_count == 0:
        return GateDecision(False, "the bank is empty or not created yet")
    pending = max(activity.unit_count - watermark.unit_count, 0)
    unchanged_write = (
        watermark.last_write_at is not None
        and activity.last_write_at is not None
        and activity.last_write_at <= watermark.last_write_at
    )
    if unchanged_write and pending == 0:
        return GateDecision(False, "no write since the watermark", 0)
    if watermark.rolled_at is None:
        return GateDecision(True, "first roll-up of this bank", pending)
    if pending >= min_new_units:
        return GateDecision(True, f"{pending} new unit(s) (min_new_units={min_new_units})", pending)
    quiet_for = now - watermark.rolled_at
    if quiet_for >= timedelta(hours=max_quiet_hours):
        return GateDecision(
            True,
            f"new activity and {quiet_for.total_seconds() / 3600:.1f} h since the last roll-up "
            f"(max_quiet_hours={max_quiet_hours:g})",
            pending,
        )
    return GateDecision(
        False,
        f"{pending} new unit(s) < min_new_units={min_new_units}, "
        f"last roll-up {quiet_for.total_seconds() / 3600:.1f} h ago",
        pending,
    )
