"""Deterministic OpenAI-compatible LLM and embeddings stub that a real Hindsight server talks to in tests.

Run it with ``python -m tests.llmstub.server --port N [--log FILE]`` from the repository root.
"""

from __future__ import annotations
