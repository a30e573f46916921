"""The lease part of :class:`~dreamer.state.StateStore`: which host runs what, when several hosts
share one state (PostgreSQL), and the host list their heartbeats keep. Why: docs/design/leases.md.

A lease is a row: its name (``profile:<name>``, ``upstream:<bank>``), its owner (one daemon's host
id), a fencing token and when it expires, by the database's clock (:attr:`Dialect.now`), so hosts
whose clocks differ agree. Taking a lease that another owner holds is refused until it expires;
taking one over raises its token. A roll-up's commit checks the token of its leases in its own
transaction (:meth:`Leases._check_leases`), so a host that lost one (a pause past its expiry, a
partition) cannot commit. Every statement is one short write transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from dreamer.errors import LeaseLostError
from dreamer.state.base import StoreBase
from dreamer.state.schema import state_errors

__all__ = ["Holder", "Host", "Lease", "Leases"]


@dataclass(frozen=True, slots=True)
class Lease:
    """A lease this host holds: its name, its owner, the fencing token it was taken with, and how
    many seconds it has left when it was taken or renewed."""

    name: str
    owner: str
    token: int
    left_s: float


@dataclass(frozen=True, slots=True)
class Holder:
    """A lease as ``status`` shows it: who holds it, with which token, and for how much longer
    (negative: expired that long ago, free to take)."""

    name: str
    owner: str
    token: int
    left_s: float


@dataclass(frozen=True, slots=True)
class Host:
    """A host whose heartbeat is current: its id, its label (host name, pid), its time left."""

    owner: str
    label: str
    left_s: float


class Leases(StoreBase):
    """Taking, renewing and giving back leases; the hosts' heartbeats; the commit's check."""

    @state_errors
    def take_lease(self, name: str, owner: str, ttl_s: float) -> Lease | None:
        """Take (or keep) the lease ``name`` for ``ttl_s`` seconds: None when another owner holds
        it and it has not expired. Taken from another owner, its token goes up by one."""
        now = self.dialect.now
        with self._write() as conn:
            row = conn.execute(
                "INSERT INTO leases (name, owner, token, expires_at, taken_at) "
                f"VALUES (?, ?, 1, {now} + ?, {now}) ON CONFLICT (name) DO UPDATE SET "
                "token = CASE WHEN leases.owner = excluded.owner THEN leases.token "
                "ELSE leases.token + 1 END, "
                "taken_at = CASE WHEN leases.owner = excluded.owner THEN leases.taken_at "
                "ELSE excluded.taken_at END, "
                "owner = excluded.owner, expires_at = excluded.expires_at "
                f"WHERE leases.owner = excluded.owner OR leases.expires_at <= {now} "
                f"RETURNING token, expires_at - {now}",
                (name, owner, ttl_s),
            ).fetchone()
        return None if row is None else Lease(name, owner, int(row[0]), float(row[1]))

    @state_errors
    def heartbeat(self, owner: str, label: str, ttl_s: float) -> list[Lease]:
        """Say this host is alive for ``ttl_s`` more seconds and renew every lease it still holds
        (not expired): the ones it gets back. A lease missing from them is lost."""
        now = self.dialect.now
        with self._write() as conn:
            conn.execute(
                "INSERT INTO hosts (owner, label, expires_at, started_at) "
                f"VALUES (?, ?, {now} + ?, {now}) ON CONFLICT (owner) DO UPDATE SET "
                "label = excluded.label, expires_at = excluded.expires_at",
                (owner, label, ttl_s),
            )
            rows = conn.execute(
                f"UPDATE leases SET expires_at = {now} + ? WHERE owner = ? AND expires_at > {now} "
                f"RETURNING name, token, expires_at - {now}",
                (ttl_s, owner),
            ).fetchall()
        return sorted((Lease(r[0], owner, int(r[1]), float(r[2])) for r in rows), key=lambda x: x.name)

    @state_errors
    def release_lease(self, name: str, owner: str) -> None:
        """Give the lease back now (it expires at once, keeping its token, so the next owner's is
        higher); nothing when ``owner`` does not hold it."""
        with self._write() as conn:
            conn.execute(
                f"UPDATE leases SET expires_at = {self.dialect.now} WHERE name = ? AND owner = ?",
                (name, owner),
            )

    @state_errors
    def leave(self, owner: str) -> None:
        """A host that stops: its heartbeat row goes and every lease it holds expires now, so the
        others take its work at their next cycle instead of after the expiry."""
        with self._write() as conn:
            conn.execute("DELETE FROM hosts WHERE owner = ?", (owner,))
            conn.execute(f"UPDATE leases SET expires_at = {self.dialect.now} WHERE owner = ?", (owner,))

    @state_errors
    def live_hosts(self) -> list[Host]:
        """The hosts whose heartbeat has not expired, by id."""
        now = self.dialect.now
        rows = self._conn.execute(
            f"SELECT owner, label, expires_at - {now} FROM hosts WHERE expires_at > {now} ORDER BY owner"
        ).fetchall()
        return [Host(r[0], r[1], float(r[2])) for r in rows]

    @state_errors
    def holders(self, prefix: str = "") -> list[Holder]:
        """Every lease (whose name starts with ``prefix``), by name, with its time left."""
        rows = self._conn.execute(
            f"SELECT name, owner, token, expires_at - {self.dialect.now} FROM leases "
            "WHERE substr(name, 1, ?) = ? ORDER BY name",
            (len(prefix), prefix),
        ).fetchall()
        return [Holder(r[0], r[1], int(r[2]), float(r[3])) for r in rows]

    def _check_leases(self, leases: Sequence[Lease]) -> None:
        """Refuse the commit (:class:`LeaseLostError`) unless this host still holds each of
        ``leases`` with its token and it has not expired. In the commit's transaction: no host
        takes a lease over between this check and the write, as taking one is a write too."""
        for lease in leases:
            row = self._conn.execute(
                f"SELECT owner, token, expires_at > {self.dialect.now} FROM leases WHERE name = ?",
                (lease.name,),
            ).fetchone()
            if row is None or row[0] != lease.owner or int(row[1]) != lease.token or not row[2]:
                holder = "nobody" if row is None else f"{row[0]} (token {row[1]})"
                raise LeaseLostError(
                    f"this host ({lease.owner}) no longer holds the lease {lease.name!r} it ran with "
                    f"(token {lease.token}; now held by {holder}, or expired); nothing was committed, "
                    "and the lease's holder runs it"
                )
