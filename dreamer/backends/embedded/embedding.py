"""Calling the embedder for the embedded store: its answer checked, a fault logged and turned into
None.

An embedder fault never fails a recall or a retain: recall falls back to full text, retain leaves
the units to the backlog. Kept apart from the backend class so that what counts as a usable
answer is stated once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import structlog

from dreamer.embeddings import Embedder

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

__all__ = ["checked_vectors"]

log = structlog.get_logger("dreamer.backends.embedded")


async def checked_vectors(
    embedder: Embedder, texts: Sequence[str], operation: str
) -> NDArray[np.float32] | None:
    """The embedder's unit rows for ``texts``, or None (logged) when it fails or answers garbage."""
    import numpy as np

    from dreamer.embeddings.vectors import normalise

    try:
        vectors = np.asarray(await embedder.embed(texts), dtype=np.float32)
        if vectors.ndim != 2 or vectors.shape[0] != len(texts) or vectors.shape[1] == 0:
            raise ValueError(f"expected {len(texts)} vectors, got an array of shape {vectors.shape}")
        if not np.isfinite(vectors).all():
            raise ValueError("the vectors hold NaN or infinite values")
        vectors = normalise(vectors)  # the protocol promises unit rows; a cosine must not depend on it
    except Exception as exc:  # any embedder fault: recall falls back to full text, retain to the backlog
        log.warning(
            "embedding failed; full-text only until it works again",
            operation=operation,
            model=embedder.model_id,
            error=f"{type(exc).__name__}: {exc}",
        )
        return None
    return vectors
