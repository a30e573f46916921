"""Drift alerts: signs, read from the previous ledger entry, that memory upkeep is falling behind.

- Audit gap: the previous audit is more than 21 days old.
- Capacity: the previous audit left MEMORY.md above 70%.
- Unverified configs growing: more than 2 more [UNVERIFIED] entries than after the previous audit.
- Deletions accelerating: this audit deletes more than 1.5 times as many entries as the previous one
  (a 50% increase). The contract's formula divides a utilisation difference by a deletion count,
  which mixes units; comparing the two deletion counts is what its alert text describes.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from dreamer.hermes.audit.ledger import LedgerEntry

__all__ = [
    "AUDIT_GAP",
    "CAPACITY_ALERT_PCT",
    "DELETION_GROWTH_FACTOR",
    "UNVERIFIED_GROWTH_LIMIT",
    "drift_alerts",
]

AUDIT_GAP = timedelta(days=21)
CAPACITY_ALERT_PCT = 70.0
UNVERIFIED_GROWTH_LIMIT = 2
DELETION_GROWTH_FACTOR = 1.5


def drift_alerts(
    previous: LedgerEntry | None, *, now: datetime, deletions: int, unverified_total: int
) -> tuple[str, ...]:
    """The alerts for an audit at `now` with `deletions` and `unverified_total`, given the last entry."""
    if previous is None:
        return ()
    alerts: list[str] = []

    gap = now - previous.timestamp
    if gap > AUDIT_GAP:
        alerts.append(
            f"ALERT: Audit gap — no audit completed in {gap.days} days "
            f"(last {previous.timestamp.isoformat(timespec='seconds')})"
        )

    memory_after = previous.number("memory_util_after")
    if memory_after is not None and memory_after > CAPACITY_ALERT_PCT:
        alerts.append(
            f"ALERT: Previous audit failed to reduce MEMORY.md below {CAPACITY_ALERT_PCT:.0f}% "
            f"(left it at {memory_after:.1f}%) — capacity issue"
        )

    previous_unverified = previous.integer("unverified_total")
    if previous_unverified is None:
        previous_unverified = previous.integer("unverified")
    if previous_unverified is not None and unverified_total - previous_unverified > UNVERIFIED_GROWTH_LIMIT:
        alerts.append(
            f"ALERT: Unverified configs growing — {unverified_total - previous_unverified} new unverified "
            f"entries since the last audit ({unverified_total} now)"
        )

    previous_deletions = previous.integer("deletions")
    if previous_deletions and deletions > previous_deletions * DELETION_GROWTH_FACTOR:
        increase = (deletions - previous_deletions) / previous_deletions * 100
        alerts.append(
            f"ALERT: Memory bloat accelerating — deletions up {increase:.0f}% vs the last audit "
            f"({deletions} vs {previous_deletions})"
        )
    return tuple(alerts)
