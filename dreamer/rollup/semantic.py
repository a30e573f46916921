"""The embedder's part of the judge: the ledger's vectors, nearest ledger cards, and the cosine of
two texts the verdict decides with.

:class:`SemanticJudge` owns the embedder and each bank's :class:`~.ledgervectors.LedgerVectors`
(the newest vectors in memory, the rest in on-disk segments under ``index_dir``) across runs;
:meth:`SemanticJudge.prepare` embeds one batch (stale ledger cards, new cards, upstream candidates)
and returns a :class:`BatchVectors`. Why: docs/design/dedup.md.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dreamer.embeddings import Embedder
from dreamer.embeddings.local import ModelFilesError
from dreamer.embeddings.segments import SegmentIndex
from dreamer.embeddings.vectors import to_blob
from dreamer.errors import ConfigError
from dreamer.heap import give_back_memory
from dreamer.log import get_logger
from dreamer.retry import RetryHook, RetryPolicy, RetryStats, call_holding_slot, call_with_retry
from dreamer.rollup.ledgervectors import LedgerVectors
from dreamer.slot import SlotLock
from dreamer.state import CandidateCard, StateStore, StoredVector

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

log = get_logger("dreamer.rollup")

#: How a batch's texts are embedded: the caller wraps the embedder in its retry rules and slot lock.
EmbedCall = Callable[[Sequence[str]], Awaitable["NDArray[np.float32]"]]


@dataclass
class BatchVectors:
    """One batch's vectors: the new cards', the nearest ledger cards, and the cosine of two texts."""

    model_id: str
    dimension: int
    #: Texts embedded for this batch (new cards, upstream candidates, re-embedded ledger cards).
    fresh: dict[str, NDArray[np.float32]] = field(default_factory=dict)
    #: The bank's ledger vectors of this model (texts not in ``fresh`` are looked up there).
    ledger: LedgerVectors | None = None
    #: Per new card (in order): the nearest ledger cards' ids and cosines.
    nearest: list[list[tuple[str, float]]] = field(default_factory=list)
    #: How many ledger cards were given a vector of this model for this batch.
    reembedded: int = 0

    def vector(self, text: str) -> NDArray[np.float32] | None:
        import numpy as np

        found = self.fresh.get(text)
        if found is None and self.ledger is not None:
            stored = self.ledger.vector_of_text(text)
            found = None if stored is None else np.asarray(stored, dtype=np.float32)
        return found

    def similarity(self, a: str, b: str) -> float | None:
        """The cosine of two texts, or None when one has no vector of this model (judged lexically)."""
        va, vb = self.vector(a), self.vector(b)
        if va is None or vb is None:
            return None
        return float(va @ vb)

    def stored(self, text: str) -> StoredVector | None:
        """A new card's vector as the ledger stores it."""
        vector = self.fresh.get(text)
        if vector is None:
            return None
        return StoredVector(self.model_id, self.dimension, to_blob(vector))

    def nearest_ids(self) -> set[str]:
        return {doc for hits in self.nearest for doc, _ in hits}


#: Nearest ledger cards below this cosine to a new card are not read sentence by sentence: a card
#: one of whose sentences restates a new card is nearer than this to it (all-MiniLM-L6-v2 puts
#: unrelated texts of one conversation at 0.2-0.4).
SENTENCE_FLOOR = 0.6
#: The most sentences one batch embeds beyond its cards (one embedding call, so bounded).
MAX_SENTENCES = 256


def sentence_texts(batch: BatchVectors, cards: Sequence[str]) -> list[str]:
    """The sentences the judge will compare one at a time, with no vector yet: those of each new
    card of several sentences (`own_sentences`), and those of its nearest ledger cards of several
    sentences at `SENTENCE_FLOOR` or nearer (a new card may repeat one sentence of a stored card);
    nearest first, at most `MAX_SENTENCES`."""
    texts = list(cards)
    if batch.ledger is not None:
        hits = sorted(
            ((score, doc) for row in batch.nearest for doc, score in row if score >= SENTENCE_FLOOR),
            reverse=True,
        )
        texts += [text for text in (batch.ledger.text_of(doc) for _, doc in hits) if text is not None]
    return [s for s in own_sentences(texts, limit=None) if batch.vector(s) is None][:MAX_SENTENCES]


def own_sentences(cards: Sequence[str], *, limit: int | None = MAX_SENTENCES) -> list[str]:
    """The sentences of each of ``cards`` that has several, once each, in order (at most ``limit``):
    the roll-up embeds them with the cards themselves, so that the judge's embedding, later in the
    run (where its memory peaks), finds them in the embedder's cache."""
    from dreamer.rollup.cards import sentences

    wanted: dict[str, None] = {}
    for text in cards:
        said = sentences(text)
        if len(said) > 1:
            wanted.update((s, None) for s in said)
    return list(wanted)[:limit]


#: Runs a function in a worker thread (``anyio.to_thread.run_sync``).
ThreadRunner = Callable[[Callable[[], Any]], Awaitable[Any]]


def retrying_embed(
    embedder: Embedder,
    policy: RetryPolicy,
    slot: SlotLock | None,
    *,
    stats: RetryStats,
    on_retry: RetryHook,
) -> EmbedCall:
    """``embedder.embed`` under the ``[retry]`` rules (operation ``embed``), holding ``slot`` when
    given (released while backing off). A model directory that cannot be loaded is a ConfigError."""

    async def embed(texts: Sequence[str]) -> NDArray[np.float32]:
        async def once() -> NDArray[np.float32]:
            try:
                return await embedder.embed(texts)
            except ModelFilesError as exc:
                raise ConfigError(f"embeddings.model_path: {exc}") from None

        if slot is not None:
            return await call_holding_slot("embed", once, policy, slot, stats=stats, on_retry=on_retry)
        return await call_with_retry("embed", once, policy, stats=stats, on_retry=on_retry)

    return embed


def segment_index(
    index_dir: Path,
    state: StateStore,
    upstream_bank: str,
    model_id: str,
    dimension: int,
    *,
    writable: bool,
    segment_rows: int | None = None,
) -> SegmentIndex:
    """The on-disk segments of one bank's vectors of one model in ``state``, in a folder of
    ``index_dir`` named by what they are of (the judge's, and bench.scale's steady state)."""
    identity: dict[str, str | int] = {
        "state": state.where,
        "bank": upstream_bank,
        "model": model_id,
        "dimension": dimension,
    }
    name = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:24]
    return SegmentIndex(index_dir / name, identity, dimension, writable=writable, segment_rows=segment_rows)


class SemanticJudge:
    """The embedder and the in-memory ledger vectors, kept across runs (one per daemon).

    ``lexical_fallback`` (``provider = "auto"``): a model that does not load makes a batch's dedup
    lexical with a warning (:meth:`usable`) instead of failing the run, as ``local`` does.
    ``index_dir``: where each bank's on-disk segments live (none: every vector stays in memory);
    ``build_index``: whether this process builds them (the daemon) or only searches what is there.
    """

    def __init__(
        self,
        embedder: Embedder,
        *,
        reembed_batch: int,
        top_k: int,
        lexical_fallback: bool = False,
        index_dir: Path | None = None,
        build_index: bool = True,
        segment_rows: int | None = None,
    ) -> None:
        self.embedder = embedder
        self.reembed_batch = reembed_batch
        self.top_k = top_k
        self.lexical_fallback = lexical_fallback
        self.index_dir = index_dir
        self.build_index = build_index
        self.segment_rows = segment_rows
        self._banks: dict[tuple[str, str, str, int], LedgerVectors] = {}

    async def usable(self) -> bool:
        """Whether the embedder's model loads, found by embedding no text (a local model loads then,
        as at its first embedding; once, until its files change). Files that passed the check but do
        not load are logged as a warning naming them: the caller judges lexically."""
        try:
            await self.embedder.embed([])
        except ModelFilesError as exc:
            log.warning(
                "embeddings: the local model does not load; lexical dedup for this batch",
                provider="auto",
                problem=str(exc),
            )
            return False
        return True

    @property
    def model_id(self) -> str:
        return self.embedder.model_id

    def ledger_vectors(
        self, state: StateStore, upstream_bank: str, dimension: int, *, build: bool = True
    ) -> LedgerVectors:
        """The bank's vectors of the current model, refreshed from the state file (``build``: and
        the full pages read turned into segments; a batch builds only on its first refresh)."""
        key = (state.where, upstream_bank, self.model_id, dimension)
        vectors = self._banks.get(key)
        if vectors is None:
            # Vectors of another model (or another length) are never kept beside this one's.
            self._banks = {
                k: v for k, v in self._banks.items() if k[2] == self.model_id and k[3] == dimension
            }
            vectors = self._banks[key] = LedgerVectors(
                upstream_bank, self.model_id, dimension, self._index(state, upstream_bank, dimension)
            )
        vectors.refresh(state, build=build)
        return vectors

    def _index(self, state: StateStore, upstream_bank: str, dimension: int) -> SegmentIndex | None:
        """The bank's on-disk segments for this model, in a folder named by what they are of."""
        if self.index_dir is None:
            return None
        return segment_index(
            self.index_dir, state, upstream_bank, self.model_id, dimension,
            writable=self.build_index, segment_rows=self.segment_rows,
        )

    async def embed_cards(
        self, cards: Sequence[str], embed: EmbedCall, in_thread: ThreadRunner, *, let_go: bool
    ) -> None:
        """The batch's cards and their sentences (`own_sentences`) in one call, before the recalls:
        the recalls (hybrid on the embedded store, one query each) and :meth:`prepare` then find
        them in the embedder's cache. With ``let_go`` the weights are given back at once: often the
        run's last use of the model, so the recalls and the judge run without them (bench.scale at
        1M cards: the peak moved from the recalls and the judge, 147.6-147.9 MiB, to this embedding,
        136.1-136.8 MiB); an embedding still to come loads them again (0.05 s)."""
        await embed([*cards, *own_sentences(cards)])
        if let_go:
            await in_thread(self.let_go_of_model)

    async def prepare(
        self,
        state: StateStore,
        upstream_bank: str,
        cards: Sequence[str],
        candidates: Iterable[str],
        embed: EmbedCall,
        *,
        write: bool,
        in_thread: ThreadRunner,
        candidate_ids: Iterable[str] = (),
        let_go: bool = False,
    ) -> BatchVectors:
        """Embed one batch in one call: up to ``reembed_batch`` ledger cards that have no vector
        of this model (stored when ``write``), the new cards, and the upstream candidates whose
        text is not a ledger card's (``candidate_ids``: their document ids, whose stored vectors
        are read first); then find each new card's nearest ledger cards. State reads and writes
        run through ``in_thread`` (off the event loop). With ``let_go`` (the run's last
        embedding), the model's weights are given back before the judge's comparisons start."""
        texts = list(dict.fromkeys([*cards, *candidates]))
        ids = list(candidate_ids)
        known_dimension = self.embedder.dimension
        stale, wanted = await in_thread(lambda: self._to_embed(state, upstream_bank, texts, ids, write))
        matrix = await embed(wanted) if wanted else None
        dimension = self.embedder.dimension if matrix is None else int(matrix.shape[1])
        if dimension is None:  # nothing embedded and no length known: nothing to compare with
            return BatchVectors(self.model_id, 0, nearest=[[] for _ in cards])
        fresh = dict(zip(wanted, matrix, strict=True)) if matrix is not None else {}
        if write:
            late = await in_thread(
                lambda: self._late_stale(state, upstream_bank, stale, dimension, known_dimension is None)
            )
            if late:
                extra = await embed([c.text for c in late])
                fresh.update(zip([c.text for c in late], extra, strict=True))
                stale = [*stale, *late]
        batch: BatchVectors = await in_thread(
            lambda: self._after(state, upstream_bank, cards, stale, fresh, dimension)
        )
        said = sentence_texts(batch, cards)
        if said:
            batch.fresh.update(zip(said, await embed(said), strict=True))
        if let_go:
            await in_thread(self.let_go_of_model)
        return batch

    def _to_embed(
        self, state: StateStore, upstream_bank: str, texts: Sequence[str], ids: Sequence[str], write: bool
    ) -> tuple[list[CandidateCard], list[str]]:
        dimension = self.embedder.dimension
        known = None if dimension is None else self.ledger_vectors(state, upstream_bank, dimension)
        if known is not None:
            known.begin_batch()
            known.fetch(state, ids)
        stale = []
        # Every card of the bank has a vector of this model when the vectors in memory are as many
        # as the bank's cards (a count over its index): the search for cards without one joins the
        # whole ledger (28 % of a run at 1M cards), so it runs only when some are missing.
        if write and (known is None or len(known) < state.ledger_size(upstream_bank)):
            stale = state.stale_vectors(upstream_bank, self.model_id, dimension, self.reembed_batch)
        wanted = [c.text for c in stale]
        wanted += [t for t in texts if known is None or known.vector_of_text(t) is None]
        return stale, list(dict.fromkeys(wanted))

    def _late_stale(
        self,
        state: StateStore,
        upstream_bank: str,
        stale: Sequence[CandidateCard],
        dimension: int,
        length_was_unknown: bool,
    ) -> list[CandidateCard]:
        """Ledger cards to embed that only the batch's answer revealed: those whose vector has
        another length (the server's model changed between two processes; the first call of a
        process learns the length) and those whose stored vector is damaged."""
        room = self.reembed_batch - len(stale)
        if room <= 0:
            return []
        taken = {c.document_id for c in stale}
        late: list[CandidateCard] = []
        if length_was_unknown:
            late = state.stale_vectors(upstream_bank, self.model_id, dimension, self.reembed_batch)
        damaged = self.ledger_vectors(state, upstream_bank, dimension, build=False).damaged
        late += [CandidateCard(doc, text, None) for doc, text in damaged.items()]
        chosen: list[CandidateCard] = []
        for card in late:
            if card.document_id not in taken and len(chosen) < room:
                taken.add(card.document_id)
                chosen.append(card)
        return chosen

    def _after(
        self,
        state: StateStore,
        upstream_bank: str,
        cards: Sequence[str],
        stale: Sequence[CandidateCard],
        fresh: dict[str, NDArray[np.float32]],
        dimension: int,
    ) -> BatchVectors:
        import numpy as np

        if stale:
            state.store_vectors(
                {c.document_id: StoredVector(self.model_id, dimension, to_blob(fresh[c.text])) for c in stale}
            )
        ledger = self.ledger_vectors(state, upstream_bank, dimension, build=False)
        batch = BatchVectors(self.model_id, dimension, fresh=fresh, ledger=ledger, reembedded=len(stale))
        vectors = [batch.vector(t) for t in cards]
        if cards and len(ledger) and all(v is not None for v in vectors):
            queries = np.stack([v for v in vectors if v is not None]).astype(np.float32)
            batch.nearest = ledger.nearest(queries, self.top_k, state)
        else:
            batch.nearest = [[] for _ in cards]
        return batch

    def let_go_of_model(self) -> None:
        """:meth:`release_model`, and the freed memory handed back to the system: the judge's
        comparisons that follow a run's last embedding then do not add to the weights' memory (at
        1M ledger cards they were a run's peak). A call still embedding for another run keeps the
        encoder it holds; that run's next embedding loads the weights again."""
        if self.release_model():
            give_back_memory()

    def release_model(self) -> bool:
        """Let the embedder give back its model's memory until the next embedding (the local
        model's weights; nothing for a server); the ledger vectors stay. True when it did."""
        release = getattr(self.embedder, "release", None)
        return bool(release()) if callable(release) else False

    async def aclose(self) -> None:
        await self.embedder.aclose()
