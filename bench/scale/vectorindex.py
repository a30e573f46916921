"""The judge's on-disk vectors as earlier runs would have left them, built before the measured run:
a daemon whose ledger grew to N cards wrote a segment each time a bank's newest vectors filled
one, so its run at N cards reads only what is past the last segment. Without this step the run
measured is the first one after turning the embedder on, which writes every segment (that cost is
what ``--cold-index`` measures instead)."""

from __future__ import annotations

import time

from bench.scale.files import GLOBAL_BANK
from dreamer.config import Config
from dreamer.rollup.ledgervectors import LedgerVectors
from dreamer.rollup.semantic import segment_index
from dreamer.state import StateStore


def prebuild(config: Config) -> tuple[float, int]:
    """Write the segments of the global bank's ledger (where every card of the files is promoted)
    for each model the state holds vectors of, as the daemon's judge names them; returns the
    seconds it took and the segments written."""
    started, written = time.monotonic(), 0
    with StateStore.open(config.state_path) as state:
        for model, dimension, _ in state.vector_models():
            folder = config.vector_index_dir
            index = segment_index(folder, state, GLOBAL_BANK, model, dimension, writable=True)
            vectors = LedgerVectors(GLOBAL_BANK, model, dimension, index)
            vectors.refresh(state)
            written += vectors.segments_built
    return time.monotonic() - started, written
