"""A static embedder distilled from the transformer: one vector per vocabulary token, no attention.

Each token of the model's vocabulary is passed alone through the encoder (``[CLS] token [SEP]``),
and a text's vector is the weighted mean of its tokens' vectors, the way model2vec distils a
sentence transformer. Every token is centred on the mean token, and rare tokens weigh more (a
Zipf weight, log of the token's rank in the frequency-ordered WordPiece vocabulary). It is a
different, much cheaper model than the transformer it comes from: word order and context are
gone. Benchmarks use it as a second model, so that a dedup decided with one model is judged with
another (docs/benchmarks.md).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from dreamer.embeddings.local import LocalEmbedder

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

#: The first ids of a BERT WordPiece vocabulary are padding, unused slots and special tokens.
_FIRST_REAL_TOKEN = 999
_DISTIL_BATCH = 1024


class StaticEmbedder:
    """Token vectors distilled once from a :class:`LocalEmbedder`'s model and cached as a file."""

    def __init__(self, source: LocalEmbedder, cache_dir: Path) -> None:
        self._source = source
        self._cache = cache_dir / f"static-v2-{hashlib.sha256(source.model_id.encode()).hexdigest()[:16]}.npy"
        self._table: NDArray[np.float32] | None = None

    @property
    def model_id(self) -> str:
        return self._source.model_id.replace("local:", "static:", 1)

    @property
    def dimension(self) -> int | None:
        return None if self._table is None else int(self._table.shape[1])

    def _distil(self) -> NDArray[np.float32]:
        import numpy as np

        encoder = self._source._load()
        vocab = encoder.vocab_size
        table = np.zeros((vocab, encoder.dimension), dtype=np.float32)
        cls_id, sep_id = 101, 102
        for start in range(_FIRST_REAL_TOKEN, vocab, _DISTIL_BATCH):
            ids = np.arange(start, min(vocab, start + _DISTIL_BATCH))
            batch = np.stack([np.full_like(ids, cls_id), ids, np.full_like(ids, sep_id)], axis=1)
            table[ids] = encoder.encode(batch, np.ones_like(batch))
        # Centre on the mean token: every distilled vector shares a large common component, which
        # would put any two texts at a cosine of 0.6-0.8 (model2vec removes it with PCA).
        table[_FIRST_REAL_TOKEN:] -= table[_FIRST_REAL_TOKEN:].mean(axis=0)
        ranks = np.clip(np.arange(vocab) - _FIRST_REAL_TOKEN + 1, 1, None)
        table *= np.log1p(ranks)[:, None].astype(np.float32)
        return table

    def _load(self) -> NDArray[np.float32]:
        import numpy as np

        if self._table is None:
            try:
                table = np.load(self._cache, allow_pickle=False)
            except (OSError, ValueError):
                table = self._distil()
                self._cache.parent.mkdir(parents=True, exist_ok=True)
                tmp = self._cache.with_name(f".{self._cache.name}.{os.getpid()}.tmp")
                with open(tmp, "wb") as handle:
                    np.save(handle, table, allow_pickle=False)
                os.replace(tmp, self._cache)
            self._table = np.asarray(table, dtype=np.float32)
        return self._table

    def embed_sync(self, texts: Sequence[str]) -> NDArray[np.float32]:
        import numpy as np

        table = self._load()
        tokenizer: Any = self._source.tokenizer()
        out = np.zeros((len(texts), table.shape[1]), dtype=np.float32)
        for row, encoded in enumerate(tokenizer.encode_batch(list(texts), add_special_tokens=False)):
            ids = [i for i, m in zip(encoded.ids, encoded.attention_mask, strict=True) if m]
            if ids:
                out[row] = table[ids].mean(axis=0)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        result: NDArray[np.float32] = out / np.clip(norms, 1e-12, None)
        return result

    async def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        return await anyio.to_thread.run_sync(self.embed_sync, list(texts))

    async def aclose(self) -> None:
        return None
