"""Whether an audit is due: the cheap per-cycle check and the audit's own skip rule.

`needs_audit` reads only the two files' sizes and the ledger (no model, no network), so a daemon
can call it every cycle. The rules and why: ``docs/design/hermes-audit.md``.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from dreamer.errors import AuditError
from dreamer.hermes.audit.files import read_utilisation
from dreamer.hermes.audit.ledger import LedgerEntry, LedgerReadError, last_audit, read_ledger
from dreamer.hermes.audit.report import Utilisation
from dreamer.hermes.audit.settings import AgentFiles, AuditSettings
from dreamer.hermes.memory.store import StoreReadError

__all__ = ["NaiveTimestampError", "needs_audit", "require_aware", "skip_reason"]


class NaiveTimestampError(AuditError, ValueError):
    """`now` has no time zone; pass an aware datetime such as datetime.now(UTC). A caller's mistake:
    not caught, fix the call."""


def require_aware(now: datetime) -> None:
    """Raise NaiveTimestampError unless `now` carries a time zone."""
    if now.tzinfo is None:
        raise NaiveTimestampError("now must carry a time zone, e.g. datetime.now(UTC)")


def needs_audit(agent: AgentFiles, settings: AuditSettings, now: datetime) -> tuple[bool, str]:
    """Whether an audit of `agent` is due at `now`, and why; reads only file sizes and the ledger."""
    require_aware(now)
    if settings.force:
        return True, "audit requested"
    if not agent.memories_dir.is_dir():
        return False, f"memories directory {agent.memories_dir} does not exist"
    try:
        usage = read_utilisation(agent, settings)
        entries = read_ledger(agent.ledger_path)
    except (StoreReadError, LedgerReadError) as exc:
        # Due, so that the audit runs and reports the problem as an ERROR.
        return True, f"cannot read the agent's files: {exc}"
    last = last_audit(entries)
    if last is None:
        return True, "no audit recorded in the ledger yet"
    age = now - last.timestamp
    if age >= timedelta(days=settings.interval_days):
        return True, f"last audit {age.days} days ago (interval {settings.interval_days} days)"
    for name, pct, chars, key in (
        ("MEMORY.md", usage.memory_pct, usage.memory_chars, "memory_chars_after"),
        ("USER.md", usage.user_pct, usage.user_chars, "user_chars_after"),
    ):
        if pct > settings.threshold_pct and last.integer(key) != chars:
            return (
                True,
                f"{name} at {pct:.1f}% (above {settings.threshold_pct:g}%) and changed since the last audit",
            )
    return False, (
        f"last audit {age.days} days ago; MEMORY.md {usage.memory_pct:.1f}%, USER.md {usage.user_pct:.1f}%"
    )


def skip_reason(
    settings: AuditSettings, now: datetime, previous: LedgerEntry | None, before: Utilisation
) -> str:
    """Why an audit that was started need not run (recent and both files roomy), or "" to run it."""
    if settings.force or previous is None:
        return ""
    age = now - previous.timestamp
    young = age < timedelta(days=settings.interval_days)
    roomy = before.memory_pct < settings.skip_below_pct and before.user_pct < settings.skip_below_pct
    if young and roomy:
        return (
            f"no audit needed: last audit {age.days} days ago and both files below "
            f"{settings.skip_below_pct:g}% "
            f"(MEMORY.md {before.memory_pct:.1f}%, USER.md {before.user_pct:.1f}%)"
        )
    return ""
