"""The embedder's part of the judge: ledger vectors kept in memory, nearest ledger cards, and the
cosine of two texts the verdict decides with.

:class:`LedgerVectors` holds the vectors of one upstream bank and one model as a float32 matrix
(float16 in the file; numpy has no fast float16 product), refreshed from the state file by the rows
written since it last looked (``seq``), so a daemon does
not read every vector again each run. :class:`SemanticJudge` owns the embedder and those matrices
across runs; :meth:`SemanticJudge.prepare` embeds one batch (stale ledger cards, new cards,
upstream candidates) and returns a :class:`BatchVectors`. Why: docs/design/dedup.md.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from dreamer.embeddings import Embedder
from dreamer.embeddings.local import ModelFilesError
from dreamer.embeddings.vectors import from_blob, grown_capacity, to_blob, top_k
from dreamer.errors import ConfigError
from dreamer.log import get_logger
from dreamer.retry import RetryHook, RetryPolicy, RetryStats, call_holding_slot, call_with_retry
from dreamer.slot import SlotLock
from dreamer.state import CandidateCard, StateStore, StoredVector

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

log = get_logger("dreamer.rollup")

#: How a batch's texts are embedded: the caller wraps the embedder in its retry rules and slot lock.
EmbedCall = Callable[[Sequence[str]], Awaitable["NDArray[np.float32]"]]


class LedgerVectors:
    """The vectors of one upstream bank's ledger cards made by one model, in memory."""

    def __init__(self, upstream_bank: str, model_id: str, dimension: int) -> None:
        self.upstream_bank, self.model_id, self.dimension = upstream_bank, model_id, dimension
        #: Rows read from the state file over this object's life (for measurements and tests).
        self.rows_read = 0
        self._reset()

    def _reset(self) -> None:
        import numpy as np

        self._matrix: NDArray[np.float32] = np.zeros((0, self.dimension), dtype=np.float32)
        self._size = 0
        self.ids: list[str] = []
        self.texts: list[str] = []
        self._row_of: dict[str, int] = {}
        self._row_of_text: dict[str, int] = {}
        self.last_seq = 0
        #: Cards whose stored vector is damaged (document id -> text): left out of the matrix
        #: and embedded again by the next run that writes.
        self.damaged: dict[str, str] = {}

    def __len__(self) -> int:
        return self._size

    @property
    def matrix(self) -> NDArray[np.float32]:
        return self._matrix[: self._size]

    @property
    def capacity(self) -> int:
        """Rows allocated (at least ``len(self)``)."""
        return int(self._matrix.shape[0])

    def refresh(self, state: StateStore) -> int:
        """Read the vectors written since the last refresh; returns how many rows were read. A
        state file whose counter went back (restored from a backup) is read again from the start."""
        if state.last_vector_seq() < self.last_seq:
            self._reset()
        rows = state.vectors_since(self.upstream_bank, self.model_id, self.dimension, self.last_seq)
        if not rows:
            return 0
        # One allocation for what was read (a first refresh reads the whole bank): growing row by
        # row reallocated a few dozen times and left the freed blocks in the process's heap.
        self._reserve(self._size + len(rows))
        for row in rows:
            vector = from_blob(row.blob, self.dimension)
            if vector is None:
                self.damaged[row.document_id] = row.text
                self._forget(row.document_id)
                continue
            self.damaged.pop(row.document_id, None)
            index = self._row_of.get(row.document_id)
            if index is None:
                index = self._append()
                self.ids.append(row.document_id)
                self.texts.append(row.text)
                self._row_of[row.document_id] = index
            self._matrix[index] = vector
            self._row_of_text.setdefault(row.text, index)
        self.last_seq = rows[-1].seq
        self.rows_read += len(rows)
        return len(rows)

    def _forget(self, document_id: str) -> None:
        """A card whose newer vector is damaged: its older one is zeroed, never compared again."""
        index = self._row_of.get(document_id)
        if index is not None:
            self._matrix[index] = 0
            self._row_of_text = {t: i for t, i in self._row_of_text.items() if i != index}

    def _reserve(self, capacity: int) -> None:
        """Room for ``capacity`` rows without another allocation."""
        import numpy as np

        if capacity <= self._matrix.shape[0]:
            return
        grown = np.zeros((capacity, self.dimension), dtype=np.float32)
        grown[: self._size] = self._matrix[: self._size]
        self._matrix = grown

    def _append(self) -> int:
        if self._size == self._matrix.shape[0]:
            self._reserve(grown_capacity(self._size, self._size + 1))
        self._size += 1
        return self._size - 1

    def vector_of(self, document_id: str) -> NDArray[np.float32] | None:
        index = self._row_of.get(document_id)
        return None if index is None else self._matrix[index]

    def text_of(self, document_id: str) -> str | None:
        index = self._row_of.get(document_id)
        return None if index is None else self.texts[index]

    def vector_of_text(self, text: str) -> NDArray[np.float32] | None:
        index = self._row_of_text.get(text)
        return None if index is None else self._matrix[index]

    def nearest(self, queries: NDArray[np.float32], k: int) -> list[list[tuple[str, float]]]:
        """For each query, the ids and cosines of its ``k`` nearest cards, best first."""
        indices, scores = top_k(queries, self.matrix, k)
        return [
            [(self.ids[int(i)], float(s)) for i, s in zip(row_i, row_s, strict=True)]
            for row_i, row_s in zip(indices, scores, strict=True)
        ]


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
    card of several sentences, and those of its nearest ledger cards of several sentences at
    `SENTENCE_FLOOR` or nearer (a new card may repeat one sentence of a stored card); nearest
    first, at most `MAX_SENTENCES`."""
    from dreamer.rollup.cards import sentences

    wanted: dict[str, None] = {}
    texts = list(cards)
    if batch.ledger is not None:
        hits = sorted(
            ((score, doc) for row in batch.nearest for doc, score in row if score >= SENTENCE_FLOOR),
            reverse=True,
        )
        texts += [text for text in (batch.ledger.text_of(doc) for _, doc in hits) if text is not None]
    for text in texts:
        said = sentences(text)
        if len(said) > 1:
            wanted.update((s, None) for s in said if batch.vector(s) is None)
    return list(wanted)[:MAX_SENTENCES]


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


class SemanticJudge:
    """The embedder and the in-memory ledger vectors, kept across runs (one per daemon).

    ``lexical_fallback`` (``provider = "auto"``): a model that does not load makes a batch's dedup
    lexical with a warning (:meth:`usable`) instead of failing the run, as ``local`` does.
    """

    def __init__(
        self, embedder: Embedder, *, reembed_batch: int, top_k: int, lexical_fallback: bool = False
    ) -> None:
        self.embedder = embedder
        self.reembed_batch = reembed_batch
        self.top_k = top_k
        self.lexical_fallback = lexical_fallback
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

    def ledger_vectors(self, state: StateStore, upstream_bank: str, dimension: int) -> LedgerVectors:
        """The bank's vectors of the current model, refreshed from the state file."""
        key = (state.where, upstream_bank, self.model_id, dimension)
        vectors = self._banks.get(key)
        if vectors is None:
            # Vectors of another model (or another length) are never kept beside this one's.
            self._banks = {
                k: v for k, v in self._banks.items() if k[2] == self.model_id and k[3] == dimension
            }
            vectors = self._banks[key] = LedgerVectors(upstream_bank, self.model_id, dimension)
        vectors.refresh(state)
        return vectors

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
    ) -> BatchVectors:
        """Embed one batch in one call: up to ``reembed_batch`` ledger cards that have no vector
        of this model (stored when ``write``), the new cards, and the upstream candidates whose
        text is not a ledger card's; then find each new card's nearest ledger cards. State reads
        and writes run through ``in_thread`` (off the event loop)."""
        texts = list(dict.fromkeys([*cards, *candidates]))
        known_dimension = self.embedder.dimension
        stale, wanted = await in_thread(lambda: self._to_embed(state, upstream_bank, texts, write))
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
        return batch

    def _to_embed(
        self, state: StateStore, upstream_bank: str, texts: Sequence[str], write: bool
    ) -> tuple[list[CandidateCard], list[str]]:
        dimension = self.embedder.dimension
        known = None if dimension is None else self.ledger_vectors(state, upstream_bank, dimension)
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
        damaged = self.ledger_vectors(state, upstream_bank, dimension).damaged
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
        ledger = self.ledger_vectors(state, upstream_bank, dimension)
        batch = BatchVectors(self.model_id, dimension, fresh=fresh, ledger=ledger, reembedded=len(stale))
        vectors = [batch.vector(t) for t in cards]
        if cards and len(ledger) and all(v is not None for v in vectors):
            queries = np.stack([v for v in vectors if v is not None]).astype(np.float32)
            batch.nearest = ledger.nearest(queries, self.top_k)
        else:
            batch.nearest = [[] for _ in cards]
        return batch

    async def aclose(self) -> None:
        await self.embedder.aclose()
