"""The LoCoMo benchmark's deciding embedder: each text embedded once."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from bench._common import HashedEmbedder, Vectors
from bench.locomo.deciding import CachedEmbedder


class TestCachedEmbedder:
    def test_cached_embedder_embeds_each_text_once(self) -> None:
        """Repeated texts are embedded once; the cosine of a text with itself is 1."""
        seen: list[str] = []

        class Recording(HashedEmbedder):
            def embed(self, texts: Sequence[str]) -> Vectors:
                seen.extend(texts)
                return super().embed(texts)

        cached = CachedEmbedder(Recording())
        cached.embed(["a b", "c d", "a b"])
        cached.embed(["c d"])
        assert sorted(seen) == ["a b", "c d"]
        assert cached.cosine("a b", "a b") == pytest.approx(1.0)
