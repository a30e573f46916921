"""The body of ``dreamer state reembed``: every ledger card and every unit of the embedded store
given a vector of the configured model now, a batch at a time, instead of the few a run embeds on
its own (``reembed_batch`` cards a run, a few units a recall) after a model change.

The ledger is walked by document id and each bank of the store newest first, each from where its
last batch ended, so the pass costs each card once; every batch is stored in its own transaction,
so a pass stopped halfway keeps what it stored and the next one goes on from there. A daemon may
run meanwhile: it reads the new vectors as it reads those its own runs write.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

import anyio

from dreamer.commands.output import emit
from dreamer.config import Config
from dreamer.errors import ConfigError, DreamerError, ExitCode
from dreamer.jobs.open import open_for
from dreamer.state import StateStore, StoredVector

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    from dreamer.backends.embedded.reembed import Embed
    from dreamer.embeddings import Embedder

__all__ = ["BATCH", "ReembedError", "reembed_command"]

#: Texts embedded and stored per batch (one embedder call, one transaction).
BATCH = 256


class ReembedError(DreamerError):
    """The embedder failed partway: what was stored stays, and running the command again goes on."""


async def reembed_command(
    config: Config,
    config_file: Path | str,
    *,
    batch: int = BATCH,
    as_json: bool,
    out: TextIO = sys.stdout,
    err: TextIO = sys.stderr,
) -> int:
    """Embed what has no vector of the configured model, the ledger first, then the store."""
    started = time.monotonic()
    ticker = _Ticker(err)
    async with open_for(config, state="write", judging=True) as opened:
        embedder, state = opened.embedder, opened.ledger
        if embedder is None:
            raise ConfigError([f"{config_file}: {_NO_EMBEDDER}"])
        assert state is not None  # state="write" opens it
        embed = _checked(embedder)
        probe = await embed(["dimension"])  # the model's length, which the ledger's rows are kept with
        if probe is None:
            raise ReembedError(_FAILED.format(where="its first call"))
        dimension = int(probe.shape[1])
        ledger = await _ledger(state, embedder.model_id, dimension, embed, batch, ticker)
        store: dict[str, int] = {}
        if config.backend.kind == "embedded" and config.embedded_path.exists():
            from dreamer.backends.embedded.reembed import reembed_store

            try:
                store = await reembed_store(
                    config.embedded_path, embedder.model_id, embed, batch=batch, progress=ticker.bank
                )
            except RuntimeError as exc:
                raise ReembedError(_FAILED.format(where=f"the store's {exc}")) from None
        model_id = embedder.model_id
    report = {
        "model_id": model_id,
        "ledger_cards": ledger,
        "store_units": store,
        "seconds": round(time.monotonic() - started, 3),
    }
    if as_json:
        emit(report, True, out)
    else:
        out.write(_format(report))
    return ExitCode.OK


_NO_EMBEDDER = (
    "embeddings.provider: no embedder is configured (or `auto` found none usable), so there is "
    'nothing to embed with; set [embeddings] provider = "local" (or "openai")'
)
_FAILED = (
    "the embedder failed in {where} (see the warning above); what was embedded is stored: fix the "
    "embedder and run `dreamer state reembed` again to go on"
)


def _checked(embedder: Embedder) -> Embed:
    from dreamer.backends.embedded.embedding import checked_vectors

    async def embed(texts: Sequence[str]) -> NDArray[np.float32] | None:
        return await checked_vectors(embedder, list(texts), "reembed")

    return embed


async def _ledger(
    state: StateStore, model_id: str, dimension: int, embed: Embed, batch: int, ticker: _Ticker
) -> int:
    """Every ledger card without a vector of this model and length, embedded and stored."""
    from dreamer.embeddings.vectors import to_blob

    after, done = "", 0
    while True:
        stale = await anyio.to_thread.run_sync(state.stale_vectors_after, model_id, dimension, after, batch)
        if not stale:
            return done
        vectors = await embed([card.text for card in stale])
        if vectors is None or int(vectors.shape[1]) != dimension:
            raise ReembedError(_FAILED.format(where="the ledger"))
        fresh = {
            card.document_id: StoredVector(model_id, dimension, to_blob(vector))
            for card, vector in zip(stale, vectors, strict=True)
        }
        await anyio.to_thread.run_sync(state.store_vectors, fresh)
        after, done = stale[-1].document_id, done + len(stale)
        ticker("ledger", done)


class _Ticker:
    """A progress line on stderr at most every ``every_s`` seconds."""

    def __init__(self, err: TextIO, every_s: float = 2.0) -> None:
        self._err, self._every_s, self._last = err, every_s, time.monotonic()
        self._started = self._last

    def __call__(self, what: str, done: int) -> None:
        now = time.monotonic()
        if now - self._last >= self._every_s:
            self._last = now
            rate = done / max(now - self._started, 1e-9)
            print(f"  {what}: {done:,} embedded ({rate:,.0f}/s)", file=self._err, flush=True)

    def bank(self, bank_id: str, done: int) -> None:
        self(f"store bank {bank_id}", done)


def _format(report: dict[str, Any]) -> str:
    store: dict[str, int] = report["store_units"]
    lines = [
        f"model {report['model_id']}",
        f"ledger cards embedded: {report['ledger_cards']:,}",
        *(f"store units embedded in bank {bank}: {count:,}" for bank, count in store.items()),
        f"done in {report['seconds']:.1f} s; running it again embeds only what is new since",
    ]
    return "\n".join(lines) + "\n"
