"""The judge's and the embedded store's on-disk vectors as earlier runs would have left them,
built before the measured run: a daemon whose ledger and global bank grew to N cards wrote a
segment each time a bank's newest vectors filled one, so its run at N cards reads only what is
past the last segment. Without this step the run measured is the first one after turning the
embedder on, which writes every segment (that cost is what ``--cold-index`` measures instead).
The ledger's gate rows likewise (:func:`fill_gates`): files built before the state had them would
otherwise be measured in the runs that backfill them; and each card's stored sketch as this code
writes it, with its sentences' sketches and its analysis (:func:`fill_sketches`): files built
before would otherwise be measured as a ledger of older cards."""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from contextlib import closing

from bench.scale.files import GLOBAL_BANK
from dreamer.backends.embedded.schema import connect
from dreamer.backends.embedded.vector_cache import VectorCache, segments_folder
from dreamer.config import Config
from dreamer.embeddings.segments import on_disk
from dreamer.rollup.analysis import is_current
from dreamer.rollup.existing import stored_sketch
from dreamer.rollup.judging import backfill_gates
from dreamer.rollup.ledgervectors import LedgerVectors
from dreamer.rollup.semantic import segment_index
from dreamer.rollup.similarity import Sketch
from dreamer.state import StateStore


def prebuild(config: Config) -> tuple[float, int]:
    """Write the segments of the global bank's ledger (where every card of the files is promoted)
    for each model the state holds vectors of, as the daemon's judge names them, and of the global
    bank's vectors in the embedded store; returns the seconds it took and the segments written."""
    started, written = time.monotonic(), 0
    with StateStore.open(config.state_path) as state:
        for model, dimension, _ in state.vector_models():
            folder = config.vector_index_dir
            index = segment_index(folder, state, GLOBAL_BANK, model, dimension, writable=True)
            vectors = LedgerVectors(GLOBAL_BANK, model, dimension, index)
            vectors.refresh(state)
            written += vectors.segments_built
    folder = segments_folder(config.embedded_path)
    before = on_disk(folder)[0]
    with closing(connect(config.embedded_path)) as conn:
        models = conn.execute("SELECT DISTINCT model_id, length(vector) / 2 FROM unit_vectors").fetchall()
        for model, dimension in models:
            VectorCache(folder=folder).refresh(conn, GLOBAL_BANK, str(model), int(dimension))
    written += on_disk(folder)[0] - before
    return time.monotonic() - started, written


def fill_gates(config: Config, batch: int = 100_000) -> float:
    """Give every ledger card its gate row, as the daemon's runs would have by N cards (each run a
    batch, `dreamer.rollup.judging.GATE_BACKFILL_BATCH`); returns the seconds it took (none for
    files whose cards were written with theirs)."""
    started = time.monotonic()
    with StateStore.open(config.state_path) as state:
        while not backfill_gates(state, batch):
            pass
    return time.monotonic() - started


def _as_written_now(rows: Sequence[tuple[int, str, str | None]]) -> list[tuple[str, int]]:
    """(stored sketch as this code writes it, rowid) of each row whose sketch reads but keeps no
    analysis of this version (the daemon's upgrade's rule, `judging.upgrade_sketches`): run in a
    worker process."""
    out = []
    for rowid, text, stored in rows:
        sketch = Sketch.loads(stored)
        if sketch is not None and not is_current(sketch):
            out.append((stored_sketch(text).dumps(), rowid))
    return out


def fill_sketches(config: Config, batch: int = 20_000) -> float:
    """Give every ledger card the stored sketch this code writes with each card it promotes
    (`dreamer.rollup.existing.stored_sketch`: its sentences' sketches and its analysis); returns
    the seconds it took (next to none for files whose cards have them)."""
    started = time.monotonic()
    workers = max(1, min(2, os.cpu_count() or 1))
    with closing(sqlite3.connect(config.state_path)) as conn, ProcessPoolExecutor(workers) as pool:
        after = 0
        while True:
            rows = conn.execute(
                "SELECT rowid, text, sketch FROM ledger WHERE rowid > ? ORDER BY rowid LIMIT ?",
                (after, batch),
            ).fetchall()
            if not rows:
                break
            after = rows[-1][0]
            step = max(1, len(rows) // workers)
            chunks = [rows[i : i + step] for i in range(0, len(rows), step)]
            updates = [row for done in pool.map(_as_written_now, chunks) for row in done]
            with conn:
                conn.executemany("UPDATE ledger SET sketch = ? WHERE rowid = ?", updates)
    return time.monotonic() - started


#: The model id every stored vector is given by :func:`change_model`: a model the daemon never runs.
EARLIER_MODEL = "local:an-earlier-model:000000000000"


def change_model(config: Config) -> float:
    """Every vector of the state and of the embedded store made "by another model", as a model
    upgrade leaves them: the run measured next is the first after a model change (with no segment
    of its model, which no earlier run of it wrote). Returns the seconds it took."""
    started = time.monotonic()
    for path, table in ((config.state_path, "ledger_vectors"), (config.embedded_path, "unit_vectors")):
        with closing(sqlite3.connect(path)) as conn, conn:
            conn.execute(f"UPDATE {table} SET model_id = ?", (EARLIER_MODEL,))
    return time.monotonic() - started
