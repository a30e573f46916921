"""The cache in front of an embedder: each text embedded once, one model at a time, bounded."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from dreamer.embeddings.cache import CachingEmbedder


class Counting:
    """An embedder whose vector of a text is its length and its first letter, counting what it sends."""

    def __init__(self, dimension: int = 2) -> None:
        self.model_id = "test:counting"
        self.sent: list[list[str]] = []
        self.width = dimension

    @property
    def dimension(self) -> int | None:
        return self.width

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.sent.append(list(texts))
        out = np.zeros((len(texts), self.width), dtype=np.float32)
        for row, text in enumerate(texts):
            out[row, 0], out[row, 1] = len(text), ord(text[0]) if text else 0
        return out

    async def aclose(self) -> None:
        return None


class TestCachingEmbedder:
    async def test_a_text_is_sent_once_and_answers_stay_in_order(self) -> None:
        """The recall query then the judge's batch: the second call sends only the new text."""
        inner = Counting()
        cache = CachingEmbedder(inner)
        first = await cache.embed(["alpha"])
        both = await cache.embed(["beta", "alpha", "beta"])
        assert inner.sent == [["alpha"], ["beta"]]
        assert np.array_equal(both[1], first[0]) and np.array_equal(both[0], both[2])
        assert (cache.hits, cache.misses) == (2, 2)

    async def test_the_least_recently_used_text_leaves_first(self) -> None:
        """With room for two texts, the one not used since is embedded again."""
        inner = Counting()
        cache = CachingEmbedder(inner, limit=2)
        await cache.embed(["a", "b"])
        await cache.embed(["a"])
        await cache.embed(["c"])
        await cache.embed(["a", "b"])
        assert inner.sent == [["a", "b"], ["c"], ["b"]]

    async def test_another_model_or_length_is_never_served_from_the_cache(self) -> None:
        """A changed model id empties the cache; so does a server answering another length."""
        inner = Counting()
        cache = CachingEmbedder(inner)
        await cache.embed(["a"])
        inner.model_id = "test:other"
        await cache.embed(["a"])
        assert inner.sent == [["a"], ["a"]]
        inner.width = 3
        rows = await cache.embed(["a", "new"])
        assert rows.shape == (2, 3)
        assert inner.sent[-2:] == [["new"], ["a", "new"]]

    async def test_no_texts_give_an_empty_answer(self) -> None:
        """An empty call is forwarded (the inner embedder knows its width)."""
        cache = CachingEmbedder(Counting())
        assert (await cache.embed([])).shape == (0, 2)


@pytest.mark.parametrize("limit", [1, 3])
async def test_the_cache_never_holds_more_than_its_limit(limit: int) -> None:
    """However many texts pass, at most ``limit`` are kept."""
    cache = CachingEmbedder(Counting(), limit=limit)
    await cache.embed([f"t{i}" for i in range(10)])
    assert len(cache._vectors) <= limit


class TestRelease:
    async def test_release_reaches_the_model_behind_the_cache_and_keeps_the_vectors(self) -> None:
        """The cache passes a release on to an embedder that holds a model and answers False for
        one that holds none (a server); the texts it cached are still served without a call."""

        class Releasing(Counting):
            released = 0

            def release(self) -> bool:
                self.released += 1
                return True

        inner = Releasing()
        cache = CachingEmbedder(inner)
        await cache.embed(["kept"])
        assert cache.release() is True and inner.released == 1
        await cache.embed(["kept"])
        assert inner.sent == [["kept"]]
        assert CachingEmbedder(Counting()).release() is False
