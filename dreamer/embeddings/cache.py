"""A bounded cache in front of an embedder: a text embedded once is not embedded again soon.

A roll-up embeds each new card twice otherwise: once as the recall query on the embedded store's
hybrid recall, once in the judge's batch. The vectors of one text under one model are the same,
so the second call is served from memory.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from typing import TYPE_CHECKING

from dreamer.embeddings.base import Embedder

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

#: Texts kept (about 1.5 KiB each at 384 dimensions: 6 MiB at most).
CACHE_TEXTS = 4096


class CachingEmbedder:
    """Forwards to ``inner``, keeping the last ``limit`` texts' vectors (least recently used out)."""

    def __init__(self, inner: Embedder, *, limit: int = CACHE_TEXTS) -> None:
        self.inner = inner
        self._limit = limit
        self._vectors: OrderedDict[str, NDArray[np.float32]] = OrderedDict()
        self._model = inner.model_id
        #: Texts answered from memory and texts sent to ``inner`` (for tests and measurements).
        self.hits = 0
        self.misses = 0

    @property
    def model_id(self) -> str:
        return self.inner.model_id

    @property
    def dimension(self) -> int | None:
        return self.inner.dimension

    async def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        import numpy as np

        if self.inner.model_id != self._model:  # never serve one model's vector for another
            self._vectors.clear()
            self._model = self.inner.model_id
        missing = list(dict.fromkeys(t for t in texts if t not in self._vectors))
        self.hits += len(texts) - len(missing)
        self.misses += len(missing)
        if missing:
            fresh = await self.inner.embed(missing)
            if self._vectors and next(iter(self._vectors.values())).shape[0] != fresh.shape[1]:
                # The server's model changed length under the same name: nothing kept still fits.
                self._vectors.clear()
                missing = list(dict.fromkeys(texts))
                fresh = await self.inner.embed(missing)
            for text, vector in zip(missing, fresh, strict=True):
                self._vectors[text] = np.array(vector, dtype=np.float32)
        if not texts:
            return await self.inner.embed([])
        rows = [self._vectors[t] for t in texts]
        for text in texts:
            self._vectors.move_to_end(text)
        while len(self._vectors) > self._limit:
            self._vectors.popitem(last=False)
        return np.stack(rows)

    def release(self) -> bool:
        """Let the embedder behind the cache give back its model's memory, where it holds one
        (the local model); the cached vectors stay. True when something was let go."""
        release = getattr(self.inner, "release", None)
        return bool(release()) if callable(release) else False

    async def aclose(self) -> None:
        await self.inner.aclose()
