"""The daemon as a service: scheduling jobs, running them, telling systemd how it goes.

:mod:`.start` starts it (``dreamer run``: configuration, logging, the state file) and
:mod:`.daemon` is the running :class:`~dreamer.service.daemon.Daemon` (signals, scheduler, reload,
drain, watchdog); :mod:`.plan` is the job plan (pure), :mod:`.runner` the owner of every run, for
the daemon and the CLI; :mod:`.notify` speaks sd_notify, :mod:`.status` words the STATUS line and
:mod:`.metrics` writes the Prometheus text file. The job bodies, and what they open, are in
:mod:`dreamer.jobs`. Why: ``docs/design/service.md``.
"""
