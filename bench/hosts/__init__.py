"""Many hosts sharing one Dreamer state, simulated in one process: ``python -m bench.hosts``.

Each simulated host has its own :class:`~dreamer.state.StateStore` on the same database (on
PostgreSQL its own connection pool, as a separate process would) and its own
:class:`~dreamer.jobs.leases.HostSeat`, and runs the real lease code: the heartbeat, the rendezvous
choice, the profile and upstream leases, the fenced commit. Measured: how evenly the profiles are
shared, how long a dead host's profiles wait for another host, the database round trips of a run,
and that no profile is ever run by two hosts at once.
"""
