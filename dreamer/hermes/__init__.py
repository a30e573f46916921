"""Hermes agent memory: the MEMORY.md / USER.md store and the per-agent memory audit.

Two rooms: :mod:`.memory` (the two files with Hermes' own MemoryStore semantics) and :mod:`.audit`
(the memory-file audit of one agent, which writes through that store). Neither knows Dreamer's
configuration: :mod:`dreamer.jobs.audit` maps the configured agents onto them, for the daemon's
audit job and for ``dreamer audit`` / ``dreamer memory``.

Library entry points, each imported from its module (this package imports nothing, so that what
needs one constant of it, the peer card's entry delimiter, does not load the whole audit):

- `memory.store.MemoryStore(memories_dir)`: add / replace / remove / batch / list / stats / render
  with Hermes' semantics (limits 2200 / 1375 chars, "\\n§\\n" delimiter, sidecar `.lock`, atomic
  replace, `.bak.<ts>` on external edits, byte-identical snapshot rendering).
- `audit.trigger.needs_audit(agent, settings, now) -> (bool, reason)`: the cheap per-cycle trigger
  check.
- `audit.run.audit_agent(agent, settings, now) -> AuditReport`: one audit of one agent's files.
"""
