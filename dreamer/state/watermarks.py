"""The watermark part of :class:`~dreamer.state.StateStore`: how far each profile's roll-up has read.

A watermark is read by any caller but written only inside the one transaction of
:meth:`~dreamer.state.StateStore.commit_rollup`, so the steps that write it are private here. Why a
watermark is a timestamp plus the ids just before it: ``docs/design/rollup.md``.
"""

from __future__ import annotations

import json
from datetime import datetime

from dreamer.errors import RunBusyError
from dreamer.state.base import StoreBase
from dreamer.state.records import Watermark, iso, parse_time
from dreamer.state.schema import state_errors

__all__ = ["Watermarks"]


class Watermarks(StoreBase):
    """Reading a profile's watermark, and the two commit steps that check and move it."""

    @state_errors
    def watermark(self, profile: str) -> Watermark:
        row = self._conn.execute(
            "SELECT created_at, boundary_ids, unit_count, last_write_at, rolled_at "
            "FROM watermarks WHERE profile = ?",
            (profile,),
        ).fetchone()
        if row is None:
            return Watermark()
        seen = json.loads(row[1])
        if isinstance(seen, list):  # written by an earlier version: ids at the boundary instant
            seen = {i: row[0] for i in seen}
        return Watermark(
            parse_time(row[0]),
            {i: datetime.fromisoformat(t) for i, t in seen.items()},
            row[2],
            parse_time(row[3]),
            parse_time(row[4]),
        )

    def _check_watermark(self, profile: str, expected: Watermark) -> None:
        """Refuse the commit (:class:`RunBusyError`) when the stored watermark is no longer the one
        the run read: another run of the profile committed meanwhile, and writing on would move the
        watermark backwards. Run inside the commit's transaction, so nothing else moves it between
        this check and the write."""
        row = self._conn.execute(
            "SELECT created_at, rolled_at FROM watermarks WHERE profile = ?", (profile,)
        ).fetchone()
        stored = (row[0], row[1]) if row is not None else (None, None)
        if stored != (iso(expected.created_at), iso(expected.rolled_at)):
            raise RunBusyError(
                f"the watermark of profile {profile!r} moved during this run (another run "
                "committed first); nothing was committed and the next run reads on from there"
            )

    def _put_watermark(self, profile: str, bank_id: str, watermark: Watermark, rolled_at: datetime) -> None:
        """Store the profile's new watermark, stamped with when the roll-up committed: in the
        transaction of the cards it covers, so a crash never leaves it past cards not written."""
        self._conn.execute(
            "INSERT INTO watermarks (profile, bank_id, created_at, boundary_ids, unit_count, "
            "last_write_at, rolled_at) VALUES (?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT(profile) DO UPDATE SET bank_id = excluded.bank_id, "
            "created_at = excluded.created_at, boundary_ids = excluded.boundary_ids, "
            "unit_count = excluded.unit_count, last_write_at = excluded.last_write_at, "
            "rolled_at = excluded.rolled_at",
            (
                profile,
                bank_id,
                iso(watermark.created_at),
                json.dumps({i: iso(t) for i, t in sorted(watermark.seen.items())}),
                watermark.unit_count,
                iso(watermark.last_write_at),
                iso(rolled_at),
            ),
        )
