"""One upstream bank's ledger vectors of one model, as the judge searches them: the newest in
memory, searched exactly, and the rest in on-disk segments (:mod:`dreamer.embeddings.segments`),
searched without being loaded.

:class:`LedgerVectors` reads the state's vectors a page at a time by ``seq`` (which only grows: a
replaced vector gets a new one) and keeps those past its index's :attr:`~.SegmentIndex.covered`
as a float32 matrix (float16 in the file; numpy has no fast float16 product). Once that matrix
holds a segment's worth of rows, and the index can be written, they become a segment and leave
memory; a bank smaller than one segment is searched exactly, as a matrix in memory is the cheaper
search there. Without an index (no folder given) every row stays in memory.

A segment's hits are read back from the state by ``seq`` and rescored exactly from the stored
vectors, so a key the state no longer holds (a replaced or damaged vector) is dropped, and the
cosines the judge sees are the same as the exact search's. The vectors of cards the judge compares
that are not in memory are read from the state when it asks (:meth:`LedgerVectors.fetch`).

Why: docs/design/dedup.md (Vectors on disk).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from dreamer.embeddings.segments import SegmentIndex, SegmentsLost
from dreamer.embeddings.vectors import from_blob, grown_capacity, top_k
from dreamer.state import StateStore, VectorRow

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

__all__ = ["LedgerVectors"]

class LedgerVectors:
    """The vectors of one upstream bank's ledger cards made by one model: the newest in memory,
    the rest in ``index`` when there is one."""

    def __init__(
        self, upstream_bank: str, model_id: str, dimension: int, index: SegmentIndex | None = None
    ) -> None:
        self.upstream_bank, self.model_id, self.dimension = upstream_bank, model_id, dimension
        self.index = index
        #: Rows read from the state file over this object's life (for measurements and tests).
        self.rows_read = 0
        #: Segments built over this object's life.
        self.segments_built = 0
        self._checked = False
        self._reset()

    def _reset(self) -> None:
        self.last_seq = 0
        #: Cards whose stored vector is damaged (document id -> text): left out of every search
        #: and embedded again by the next run that writes.
        self.damaged: dict[str, str] = {}
        #: Cards whose vector in a segment was found damaged when read back, and those of them
        #: embedded again since: a segment's key is never removed, so each of the latter is
        #: counted twice by the index's rows and the memory (see :meth:`__len__`).
        self._damaged_in_index: set[str] = set()
        self._repaired: set[str] = set()
        self._clear_memory()
        self.begin_batch()

    def begin_batch(self) -> None:
        """Let go of the vectors read from the state for the last batch (:meth:`fetch`)."""
        #: Cards read back from the state for this batch: document id -> (text, float16 vector).
        self._fetched: dict[str, tuple[str, NDArray[np.float16]]] = {}
        #: The same for the card being judged (:meth:`fetch_pool`), replaced card by card.
        self._pool: dict[str, tuple[str, NDArray[np.float16]]] = {}
        self._doc_of_text: dict[str, str] = {}

    def _clear_memory(self) -> None:
        import numpy as np

        self._matrix: NDArray[np.float32] = np.zeros((0, self.dimension), dtype=np.float32)
        self._size = 0
        self.ids: list[str] = []
        self.texts: list[str] = []
        self._seqs: list[int] = []
        self._row_of: dict[str, int] = {}
        self._row_of_text: dict[str, int] = {}

    def __len__(self) -> int:
        """The bank's cards with a vector of this model: those in segments (as built) and those in
        memory, a card whose segment vector was replaced counted once."""
        return self._size + (0 if self.index is None else self.index.rows) - len(self._repaired)

    @property
    def in_memory(self) -> int:
        return self._size

    @property
    def matrix(self) -> NDArray[np.float32]:
        """The rows held in memory."""
        return self._matrix[: self._size]

    @property
    def capacity(self) -> int:
        """Rows allocated (at least ``self.in_memory``)."""
        return int(self._matrix.shape[0])

    # --- reading the state --------------------------------------------------------------------

    def refresh(self, state: StateStore, *, build: bool = True) -> int:
        """Read the vectors written since the last refresh, a page at a time, turning each full
        page into a segment when the index can be written and ``build`` (until one cannot be
        saved: the rest stay in memory, and the next refresh tries again); returns how many rows
        were read. A
        state whose counter went back (restored from a backup), or that no longer holds what the
        index's segments were built from, is read again from the start."""
        covered = 0 if self.index is None else self.index.covered
        if state.last_vector_seq() < max(self.last_seq, covered) or not self._index_holds(state):
            self._reset()
            if self.index is not None:
                self.index.reset()
        if not self._checked:
            self._checked = True
            if self.index is not None and self.index.covered > self.last_seq:
                self.last_seq = self.index.covered
                self.damaged.update(self.index.damaged)
        page = None if self.index is None else self.index.segment_rows
        read, building = 0, build
        while True:
            rows = state.vectors_since(self.upstream_bank, self.model_id, self.dimension, self.last_seq, page)
            self._take(rows)
            read += len(rows)
            before = self.last_seq
            if page is not None and self._size >= page and building:
                building = self._spill()  # a folder that cannot be written is not tried page after page
            if page is None or (len(rows) < page and self.last_seq == before):
                break
        self.rows_read += read
        return read

    def _index_holds(self, state: StateStore) -> bool:
        """Whether the index's segments were built from this state: its probes (a key and the card
        it was) checked once per process. A probe whose vector was replaced since is not found, so
        a mismatch is a probe naming another card, or none of them found."""
        if self._checked or self.index is None or not self.index.segments:
            return True
        probes = self.index.probes()
        found = {
            row.seq: row.document_id
            for row in state.vectors_by_seq(
                self.upstream_bank, self.model_id, self.dimension, [k for k, _ in probes]
            )
        }
        named = [(found.get(key), document_id) for key, document_id in probes]
        return all(got in (None, want) for got, want in named) and any(got is not None for got, _ in named)

    def _take(self, rows: Sequence[VectorRow]) -> None:
        """Add a page of rows to the matrix in memory (one allocation for the page)."""
        if not rows:
            return
        self._reserve(self._size + len(rows))
        for row in rows:
            vector = from_blob(row.blob, self.dimension)
            if vector is None:
                self.damaged[row.document_id] = row.text
                self._forget(row.document_id)
                continue
            self.damaged.pop(row.document_id, None)
            if row.document_id in self._damaged_in_index:
                self._repaired.add(row.document_id)
            index = self._row_of.get(row.document_id)
            if index is None:
                index = self._append()
                self.ids.append(row.document_id)
                self.texts.append(row.text)
                self._seqs.append(row.seq)
                self._row_of[row.document_id] = index
            self._seqs[index] = row.seq
            self._matrix[index] = vector
            self._row_of_text.setdefault(row.text, index)
        self.last_seq = rows[-1].seq

    def _spill(self) -> bool:
        """Hand the rows in memory to the index as one segment; False when it could not be saved.
        When another process changed the folder meanwhile (it built, or started over), the rows
        are let go and read again from what the folder now covers."""
        import numpy as np

        assert self.index is not None
        live = [i for i in range(self._size) if self._matrix[i].any()]  # a forgotten row is zero
        if not live:
            return True
        covered, first, last = self.index.covered, live[0], live[-1]
        probes = [(self._seqs[first], self.ids[first]), (self._seqs[last], self.ids[last])]
        built = self.index.add_segment(
            [self._seqs[i] for i in live],
            np.ascontiguousarray(self._matrix[live]),
            last_key=self.last_seq,
            probes=probes,
            damaged=self.damaged,
        )
        if built:
            self.segments_built += 1
            self._clear_memory()
        elif self.index.covered != covered:
            self._clear_memory()
            self.last_seq = self.index.covered
        return built or self.index.covered != covered

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

    def fetch(self, state: StateStore, document_ids: Iterable[str]) -> None:
        """Read the vectors of these cards that are not in memory (they are in segments), for the
        judge's lookups until :meth:`begin_batch`. A damaged one is named in :attr:`damaged`."""
        for row in self._read(state, document_ids):
            self._keep(row, self._fetched)

    def fetch_pool(self, state: StateStore, document_ids: Iterable[str]) -> None:
        """:meth:`fetch` for the one card being judged: the previous card's pool is let go, so a
        batch holds one card's candidates at a time."""
        for document_id, (text, _) in self._pool.items():
            if self._doc_of_text.get(text) == document_id:
                del self._doc_of_text[text]
        self._pool = {}
        for row in self._read(state, document_ids):
            self._keep(row, self._pool)

    def _read(self, state: StateStore, document_ids: Iterable[str]) -> list[VectorRow]:
        if self.index is None or not self.index.segments:
            return []  # every vector is in memory
        known = self._row_of.keys() | self._fetched.keys() | self.damaged.keys()
        wanted = {d for d in document_ids if d not in known}
        if not wanted:
            return []
        return state.vectors_of(self.upstream_bank, self.model_id, self.dimension, wanted)

    def _keep(self, row: VectorRow, into: dict[str, tuple[str, NDArray[np.float16]]]) -> bool:
        vector = from_blob(row.blob, self.dimension)
        if vector is None:  # read back, so its key is in a segment
            self.damaged[row.document_id] = row.text
            self._damaged_in_index.add(row.document_id)
            return False
        into[row.document_id] = (row.text, vector)
        self._doc_of_text.setdefault(row.text, row.document_id)
        return True

    def _read_back(self, document_id: str) -> tuple[str, NDArray[np.float16]] | None:
        found = self._fetched.get(document_id)
        return self._pool.get(document_id) if found is None else found

    # --- lookups ------------------------------------------------------------------------------

    def vector_of(self, document_id: str) -> NDArray[np.float32] | None:
        import numpy as np

        index = self._row_of.get(document_id)
        if index is not None:
            row: NDArray[np.float32] = self._matrix[index]
            return row
        found = self._read_back(document_id)
        return None if found is None else found[1].astype(np.float32)

    def text_of(self, document_id: str) -> str | None:
        index = self._row_of.get(document_id)
        if index is not None:
            return self.texts[index]
        found = self._read_back(document_id)
        return None if found is None else found[0]

    def vector_of_text(self, text: str) -> NDArray[np.float32] | None:
        index = self._row_of_text.get(text)
        if index is not None:
            row: NDArray[np.float32] = self._matrix[index]
            return row
        document_id = self._doc_of_text.get(text)
        return None if document_id is None else self.vector_of(document_id)

    def nearest(
        self, queries: NDArray[np.float32], k: int, state: StateStore | None = None
    ) -> list[list[tuple[str, float]]]:
        """For each query, the ids and cosines of its ``k`` nearest cards, best first: exact over
        the rows in memory and over the segments (chosen by their codes, read back from ``state`` and
        rescored); a segment lost since it was opened is read again from ``state``."""
        indices, scores = top_k(queries, self.matrix, k)
        found: list[dict[str, float]] = [
            {self.ids[int(i)]: float(s) for i, s in zip(row_i, row_s, strict=True)}
            for row_i, row_s in zip(indices, scores, strict=True)
        ]
        if state is not None and self.index is not None and self.index.segments:
            try:
                self._add_segment_hits(state, queries, k, found)
            except SegmentsLost:  # the index is empty now: read every row again, then answer
                self._reset()
                self.refresh(state, build=False)
                return self.nearest(queries, k, state)
        return [sorted(hits.items(), key=lambda hit: (-hit[1], hit[0]))[:k] for hits in found]

    def _add_segment_hits(
        self, state: StateStore, queries: NDArray[np.float32], k: int, found: list[dict[str, float]]
    ) -> None:
        import numpy as np

        assert self.index is not None
        hits = self.index.search(queries, k)
        seqs = {key for row in hits for key, _ in row}
        rows = {
            r.seq: r for r in state.vectors_by_seq(self.upstream_bank, self.model_id, self.dimension, seqs)
        }
        kept = {
            seq: r.document_id
            for seq, r in rows.items()
            if r.document_id not in self._row_of and self._keep(r, self._fetched)
        }
        for query, row_hits, mine in zip(queries, hits, found, strict=True):
            for key, _ in row_hits:
                document_id = kept.get(key)
                if document_id is not None and document_id not in mine:
                    vector = self._fetched[document_id][1]
                    mine[document_id] = float(np.dot(query, vector.astype(np.float32)))
