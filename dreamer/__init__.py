"""Dreamer: a memory-consolidation daemon for agent memory banks.

It rolls up what is new in each profile bank into one global bank as deduplicated summary cards,
append-only and with provenance, on a schedule, under systemd.
"""

from __future__ import annotations

__version__ = "0.1.0"
