"""The memory-file audit of one agent: canaries, stale entries, moves, duplicates and its ledger."""
