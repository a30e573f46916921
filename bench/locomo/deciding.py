"""Dreamer deciding with an embedder in the benchmark, before the pipeline passes one itself.

The roll-up calls ``dedup.judge_batch`` without a semantic similarity until the embedder is wired
into the pipeline; ``deciding`` makes it pass the cosine of the chosen embedder meanwhile, for the
length of the replay. Vectors are cached by text, so each card is embedded once.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from bench._common import BenchError, Embedder, Vectors
from dreamer.rollup import dedup


class CachedEmbedder:
    """An embedder that embeds each distinct text once."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.name = inner.name
        self.description = inner.description
        self._vectors: dict[str, Vectors] = {}

    def embed(self, texts: Sequence[str]) -> Vectors:
        missing = list(dict.fromkeys(t for t in texts if t not in self._vectors))
        if missing:
            self._vectors.update(zip(missing, self.inner.embed(missing), strict=True))
        if not texts:
            return self.inner.embed([])
        return np.stack([self._vectors[t] for t in texts])

    def cosine(self, first: str, second: str) -> float | None:
        """The cosine of two texts' vectors (a `dedup.SemanticSimilarity`)."""
        a, b = self.embed([first, second])
        return float(np.dot(a, b))


@contextmanager
def deciding(decider: CachedEmbedder | None) -> Iterator[None]:
    """While open, the roll-up's dedup decides with ``decider``'s cosine (nothing changes for None)."""
    if decider is None:
        yield
        return
    original = dedup.judge_batch
    dedup.judge_batch = functools.partial(original, semantic=decider.cosine)
    try:
        yield
    finally:
        dedup.judge_batch = original


def decider_precision(data: Path, decider: CachedEmbedder | None) -> float | None:
    """Precision of `duplicate` on the labelled pairs with the decider (bench.pairs), None without pairs."""
    from bench.pairs.__main__ import cosine_lookup, load_directions, scores, verdicts

    try:
        directions = load_directions(data)
    except (BenchError, ImportError):  # other data, or an install without the tests
        return None
    semantic = None
    if decider is not None:
        texts = sorted({t for d in directions for t in (d[0], d[1])})
        semantic = cosine_lookup(dict(zip(texts, decider.embed(texts), strict=True)))
    found = scores(directions, verdicts(directions, dedup.DedupThresholds(), semantic), "duplicate")
    precision: float | None = found["precision"]
    return precision
