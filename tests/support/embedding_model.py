"""The real all-MiniLM-L6-v2 model for tests, loaded once per session.

Tests that need it skip when the model package is missing, unless ``DREAMER_REQUIRE_EMBED=1``
(CI sets it): then they fail, so a missing install cannot pass as green.
"""

from __future__ import annotations

import functools
import os
from typing import NoReturn

import pytest

from dreamer.embeddings.local import LocalEmbedder


@functools.cache
def _load() -> LocalEmbedder | str:
    try:
        embedder = LocalEmbedder()
        embedder.embed_sync(["warm up"])
        return embedder
    except ImportError as exc:
        return str(exc)


def local_embedder() -> LocalEmbedder:
    """The shared in-process model; skip (or fail under DREAMER_REQUIRE_EMBED=1) without it."""
    loaded = _load()
    if isinstance(loaded, str):
        missing_model("the embedding model is missing", loaded)
    return loaded


def missing_model(what: str, why: str) -> NoReturn:
    """Skip the test for a model that will not load, or fail it under DREAMER_REQUIRE_EMBED=1."""
    if os.environ.get("DREAMER_REQUIRE_EMBED") == "1":
        pytest.fail(f"DREAMER_REQUIRE_EMBED=1 but {what}: {why}")
    pytest.skip(why)
