"""What a job needs, assembled in one place: the one room that opens backends, embedders and the
state file, builds the run locks, and holds the job bodies.

- :mod:`.spec`: a scheduled job (:class:`JobSpec`), what a run returns (:class:`JobOutcome`) and
  the runner protocol every job body follows.
- :mod:`.open`: :func:`open_for`, the backend, embedder and state a caller asks for, closed again
  when it is done; :func:`open_state` and :func:`open_ledger` for the state file alone.
- :mod:`.locks`: the per-profile run lock and the upstream bank's run lock.
- :mod:`.rollup`: :class:`RollupJob`, the roll-up job's body (the pipeline, then the peer card).
- :mod:`.audit`: the configured agents mapped onto the memory-file audit, and the audit job's body.

The service (:mod:`dreamer.service`) schedules and dispatches these jobs; the commands
(:mod:`dreamer.commands`) and the Hermes provider open what they need through :func:`open_for`.
``tests/unit/test_architecture.py`` (``TestWiring``) keeps the calls that open a backend, an embedder
or the state file, or build a :class:`~dreamer.slot.SlotLock`, in this room and the one that defines
each. See ``docs/design/service.md``.
"""
