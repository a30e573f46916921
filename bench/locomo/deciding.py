"""The decider's side of the benchmark: an embedder that embeds each text once, and the
precision of `duplicate` it reaches on the labelled pairs. Dreamer itself decides through the
pipeline's own wiring (a `SemanticJudge` over ``decider.inner.model``)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from bench._common import BenchError, Embedder, Vectors
from dreamer.embeddings import Embedder as DreamerEmbedder
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


def dreamer_embedder(decider: CachedEmbedder) -> DreamerEmbedder:
    """The model of Dreamer's that a decider wraps (MiniLM's or the static one), for the pipeline's
    semantic judge; BenchError for a judge-only embedder, which Dreamer never decides with."""
    model = getattr(decider.inner, "model", None)
    if model is None:
        raise BenchError(f"{decider.name} is not one of Dreamer's embedders: it cannot decide")
    return model  # type: ignore[no-any-return]
