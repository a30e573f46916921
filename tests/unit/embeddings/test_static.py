"""The static embedder distilled from the real model: paraphrases stay near, the table is a file."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from dreamer.embeddings.local import LocalEmbedder

pytest.importorskip("tokenizers")
pytest.importorskip("safetensors")


class TestStaticEmbedder:
    def test_a_paraphrase_is_nearer_than_an_unrelated_text(self, embedder: LocalEmbedder) -> None:
        """The distilled table ranks a paraphrase above an unrelated sentence and is cached as a file."""
        from dreamer.embeddings.static import StaticEmbedder

        cache = Path(__file__).resolve().parents[3] / ".cache" / "embeddings"
        static = StaticEmbedder(embedder, cache)
        v = static.embed_sync(
            [
                "Maria's grandma passed away last week, causing her to go through a tough time.",
                "Maria's grandmother passed away last week.",
                "John prefers Hawaiian pizza.",
                "",
            ]
        )
        assert float(v[0] @ v[1]) > float(v[0] @ v[2]) + 0.2
        assert np.allclose(np.linalg.norm(v[:3], axis=1), 1.0, atol=1e-5)
        assert not np.any(v[3])  # no tokens: a zero row, not NaN
        assert static.model_id.startswith("static:all-MiniLM-L6-v2:")
        assert list(cache.glob("static-v2-*.npy"))
