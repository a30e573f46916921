"""The files one measurement starts from: a global bank and a ledger of N roll-up cards, one profile
bank with a few units already rolled up and 20 new ones, and the daemon's configuration.

The texts come from the ledger ``--ledger`` names (ledgers.py). Built through Dreamer's own APIs
(the embedded store's ``retain``, ``LedgerCard`` and ``StateStore.commit_rollup``), so the rows are
the ones the pipeline writes. The sketches, the slowest part (about 0.13 ms a card), are computed
in worker processes while the store is written.

With ``--embedder local`` every unit of the store and every ledger card also has a vector under the
local model's id, as a daemon that always ran with the model would have left them. By default
(``--vectors seeded``) they are random unit vectors seeded by the text, not the model's, so that 1M
of them can be built at all: what the run pays to load, search and extend them is the same, but the
cosines are not real, so the verdicts stay the lexical ones. ``--vectors model`` embeds every card's
text with the model itself while the files are built (:class:`ModelVectors`: onnxruntime on every
core where it is installed, about 700 texts a second here; a card and its unit share the text, so
each is embedded once), for the verdicts and the on-disk search on real vectors. The 20 new cards
are embedded by the model for real either way.
"""

from __future__ import annotations

import hashlib
import os
import time
import zlib
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

from bench._common import BenchError, progress
from bench.gating.banks import mark_rolled_up
from bench.scale.ledgers import NEW_UNITS as NEW_UNITS
from bench.scale.ledgers import OLD_UNITS as OLD_UNITS
from bench.scale.ledgers import SYNTHETIC, Ledger, LedgerSpec
from dreamer.backends.base import RetainItem
from dreamer.backends.embedded.backend import EmbeddedBackend
from dreamer.config import Config, load_config
from dreamer.embeddings.factory import make_embedder
from dreamer.embeddings.vectors import normalise, to_blob
from dreamer.rollup.candidates import index_words, word_sizes
from dreamer.rollup.existing import stored_sketch
from dreamer.rollup.promote import provenance_tags
from dreamer.state import LedgerCard, StateStore, StoredVector, Watermark
from dreamer.text import card_document_id

#: The profile whose run is measured; the cards of the global bank come from it and three others.
PROFILE = "homelab"
SOURCE_PROFILES = ("homelab", "research", "coder", "writer")
GLOBAL_BANK = "global"
PROFILE_BANK = f"bank_{PROFILE}"
#: Cards per retain call and per commit_rollup transaction.
BATCH = 50_000
#: ``--embedder``: the daemon's ``[embeddings] provider``.
EMBEDDERS = ("none", "local")
#: The local model's vector length.
DIMENSION = 384


class SeededVectors:
    """An embedder for building the files: a random unit vector per text, seeded by the text, under
    the local model's id (see the module's docstring)."""

    def __init__(self, model_id: str) -> None:
        self.model_id = model_id
        self.dimension = DIMENSION

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        return seeded(texts)

    async def aclose(self) -> None:
        return None


class ModelVectors:
    """An embedder for building the files with the local model's own vectors: each distinct text is
    embedded once, and :meth:`vectors_of` hands the store's vector of a text to its ledger card."""

    def __init__(self, model_id: str, size: int) -> None:
        from dreamer.embeddings.local import LocalEmbedder
        from dreamer.embeddings.onnxencoder import onnxruntime_installed

        runtime = "onnx" if onnxruntime_installed() else "numpy"
        self._model = LocalEmbedder(batch_size=64, runtime=runtime, threads=os.cpu_count() or 1)
        if self._model.model_id != model_id:
            raise BenchError(f"the model here is {self._model.model_id}; the daemon runs {model_id}")
        self.model_id = model_id
        self.dimension = DIMENSION
        self._size = size
        self._known: dict[str, np.ndarray] = {}

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        return self.vectors_of(texts)

    def vectors_of(self, texts: Sequence[str]) -> np.ndarray:
        missing = list(dict.fromkeys(t for t in texts if t not in self._known))
        started = time.monotonic()
        for start in range(0, len(missing), 4096):
            chunk = missing[start : start + 4096]
            self._known.update(zip(chunk, self._model.embed_sync(chunk), strict=True))
            progress(
                f"scale {self._size}: the model embedded {len(self._known)} texts "
                f"({time.monotonic() - started:.0f} s)"
            )
        if not texts:
            return np.zeros((0, DIMENSION), dtype=np.float32)
        return np.stack([self._known[t] for t in texts])

    async def aclose(self) -> None:
        self._model.release()


def seeded(texts: Sequence[str]) -> np.ndarray:
    """A random unit vector per text, the same for the same text in every process."""
    rows = np.empty((len(texts), DIMENSION), dtype=np.float32)
    for k, text in enumerate(texts):
        rows[k] = np.random.default_rng(zlib.crc32(text.encode())).standard_normal(DIMENSION)
    return normalise(rows)


def config_text(state_dir: Path, embedder: str = "none") -> str:
    """The daemon's configuration: one profile on the embedded store, one run right after start,
    the lexical dedup (``provider = "none"``) or the local model (``"local"``)."""
    return "\n".join(
        [
            f'state_dir = "{state_dir}"',
            "",
            "[banks.global]",
            f'bank_id = "{GLOBAL_BANK}"',
            "",
            "[banks.shared]",
            'bank_id = "shared"',
            "",
            f"[banks.{PROFILE}]",
            f'bank_id = "{PROFILE_BANK}"',
            'access = "read_write"',
            "",
            f"[profiles.{PROFILE}]",
            f'bank = "{PROFILE}"',
            "",
            "[schedule]",
            # One run: at start, then not for a day.
            "interval_minutes = 1440",
            "jitter_s = 0",
            "first_run_delay_s = 0",
            "job_timeout_s = 3600",
            "",
            # "none": the lexical dedup, never the local model, even where it is installed.
            "[embeddings]",
            f'provider = "{embedder}"',
            "",
        ]
    )


def new_unit_texts(spec: LedgerSpec = SYNTHETIC, size: int = 0) -> list[str]:
    """The texts of the profile bank's new units, for a ledger of ``size`` cards: what the measured
    run drafts its cards from."""
    return spec.open().new_unit_texts(size, NEW_UNITS)


def card_profile(i: int) -> str:
    return SOURCE_PROFILES[i % len(SOURCE_PROFILES)]


def distinct_cards(ledger: Ledger, size: int) -> list[list[str]]:
    """The texts of the ledger's ``size`` cards in batches of ``BATCH``: the ledger's cards in
    order, a card whose document id (its profile and normalised text) an earlier card has left out
    and the next one taken instead, as a real ledger holds a fact once (synthetic cards never repeat)."""
    seen: set[bytes] = set()
    raw = 0
    batches: list[list[str]] = []
    for k in range(size):
        if k % BATCH == 0:
            batches.append([])
        while True:
            text = ledger.card_text(raw)
            raw += 1
            key = hashlib.blake2b(card_document_id(card_profile(k), text).encode(), digest_size=12).digest()
            if key not in seen:
                break
        seen.add(key)
        batches[-1].append(text)
    return batches


#: (normalised text, stored sketch, index words, content and residual word counts) of one card.
Sketched = tuple[str, str, tuple[str, ...], tuple[int, int]]


def _sketches(texts: Sequence[str]) -> list[Sketched]:
    """(normalised text, stored sketch, index words) of each card's text: run in a worker process."""
    out = []
    for text in texts:
        sketch = stored_sketch(text)  # with its sentences', as promote.ledger_row writes it
        words = tuple(sorted(index_words(sketch)))
        out.append((sketch.normalized, sketch.dumps(), words, word_sizes(sketch)))
    return out


def _ledger_cards(
    start: int,
    texts: Sequence[str],
    sketches: Sequence[Sketched],
    now: datetime,
    model_id: str | None,
    vectorize: Callable[[Sequence[str]], np.ndarray] = seeded,
) -> list[LedgerCard]:
    """The ledger rows of cards ``start``..: what ``promote.ledger_row`` writes for a promoted card
    (with its vector under ``model_id``, from ``vectorize``, when given)."""
    cards = []
    vectors = vectorize(texts) if model_id is not None else None
    for offset, (normalized, sketch, words, sizes) in enumerate(sketches):
        i = start + offset
        profile = card_profile(i)
        text = texts[offset]
        vector = None
        if vectors is not None and model_id is not None:
            vector = StoredVector(model_id, DIMENSION, to_blob(vectors[offset]))
        cards.append(
            LedgerCard(
                document_id=card_document_id(profile, text),
                profile=profile,
                upstream_bank=GLOBAL_BANK,
                text=text,
                normalized=normalized,
                kind="fact",
                source_ids=(f"setup-unit-{i}",),
                profiles=(profile,),
                promoted_at=now,
                last_seen_at=now,
                run_id=f"setup-{start}",
                sketch=sketch,
                words=words,
                word_sizes=sizes,
                vector=vector,
            )
        )
    return cards


def _card_item(i: int, text: str, promoted_at: datetime) -> RetainItem:
    """The upstream memory of card ``i``, tagged and described as ``promote.retain_item`` does."""
    profile = card_profile(i)
    return RetainItem(
        content=text,
        context=f"Dreamer roll-up of profile {profile}",
        timestamp=promoted_at,
        metadata={
            "source_bank": f"bank_{profile}",
            "source_profile": profile,
            "source_ids": f'["setup-unit-{i}"]',
            "run_id": f"setup-{i - i % BATCH}",
            "kind": "fact",
        },
        tags=tuple(provenance_tags(profile)),
        document_id=card_document_id(profile, text),
    )


async def build(
    workdir: Path, size: int, embedder: str = "none", spec: LedgerSpec = SYNTHETIC
) -> tuple[Config, Path, Watermark]:
    """The configuration file, its config and the profile's watermark before the measured run."""
    ledger = spec.open()
    state_dir = workdir / "state"
    state_dir.mkdir(parents=True)
    config_path = workdir / "dreamer.toml"
    config_path.write_text(config_text(state_dir, embedder), encoding="utf-8")
    config = load_config(config_path)
    model = make_embedder(config)  # nothing is loaded: only the model's id is read
    model_id = None if model is None else model.model_id
    if model is not None:
        await model.aclose()
    now = datetime.now(UTC)
    promoted_at = now - timedelta(days=1)
    started = time.monotonic()
    batches = distinct_cards(ledger, size)
    chunks = [
        (start, start + len(texts)) for start, texts in zip(range(0, size, BATCH), batches, strict=True)
    ]
    workers = max(1, min(2, os.cpu_count() or 1))
    # The workers are started (forked) before the store opens its connection and threads.
    with ProcessPoolExecutor(max_workers=workers) as pool:
        futures: list[Future[list[Sketched]]] = [pool.submit(_sketches, texts) for texts in batches]
        vectors: SeededVectors | ModelVectors | None = None
        if model_id is not None:
            vectors = ModelVectors(model_id, size) if spec.vectors == "model" else SeededVectors(model_id)
        vectorize = vectors.vectors_of if isinstance(vectors, ModelVectors) else seeded
        backend = EmbeddedBackend(config.embedded_path, embedder=vectors)
        try:
            with StateStore.open(config.state_path) as state:
                for (a, b), texts in zip(chunks, batches, strict=True):
                    items = [_card_item(a + offset, text, promoted_at) for offset, text in enumerate(texts)]
                    await backend.retain(GLOBAL_BANK, items)
                    progress(
                        f"scale {size}: global bank {b}/{size} cards ({time.monotonic() - started:.0f} s)"
                    )
                for (a, b), texts, future in zip(chunks, batches, futures, strict=True):
                    sketched = future.result(timeout=3600)
                    cards = _ledger_cards(a, texts, sketched, promoted_at, model_id, vectorize)
                    run_id = f"setup-{a}"
                    state.record_run_start(run_id, f"rollup:{PROFILE}", now)
                    # One transaction per batch; the watermark row it writes is replaced below.
                    state.commit_rollup(
                        profile=PROFILE,
                        bank_id=PROFILE_BANK,
                        watermark=Watermark(),
                        promoted=cards,
                        reinforced=[],
                        run_id=run_id,
                        outcome="promoted",
                        detail="benchmark setup",
                        counts={"promoted": len(cards)},
                        finished_at=now,
                    )
                    progress(f"scale {size}: ledger {b}/{size} cards ({time.monotonic() - started:.0f} s)")
                old = ledger.old_unit_texts(size, OLD_UNITS, NEW_UNITS)
                await backend.retain(PROFILE_BANK, [RetainItem(content=text) for text in old])
                await mark_rolled_up(config, backend, state, [PROFILE])
                watermark = state.watermark(PROFILE)
            await backend.retain(
                PROFILE_BANK,
                [RetainItem(content=text) for text in new_unit_texts(spec, size)],
            )
        finally:
            await backend.aclose()
    return config, config_path, watermark
