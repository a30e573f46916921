"""The daemon as a service: scheduling jobs, running them, telling systemd how it goes."""
