"""Hermes' memory files (MEMORY.md / USER.md) with Hermes' own MemoryStore semantics."""
