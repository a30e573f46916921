"""Embedders Dreamer controls: one model, applied the same way to the ledger and to new cards.

``local`` runs all-MiniLM-L6-v2 in numpy in-process (:mod:`.local`); ``openai`` calls an
OpenAI-compatible ``/v1/embeddings`` server; ``none`` keeps the lexical behaviour.
See docs/design/dedup.md.
"""

from __future__ import annotations

from dreamer.embeddings.base import Embedder, EmbeddingsUnavailableError, require_numpy

__all__ = ["Embedder", "EmbeddingsUnavailableError", "require_numpy"]
