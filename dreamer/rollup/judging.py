"""The judge step's reads of the state file: which ledger cards a batch is compared with (the
word index, and the embedder's nearest cards), the lazy indexing of older cards, the verdicts.

Runs in a worker thread (analysing texts is a run's CPU work). Why: docs/design/dedup.md.
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import TypeVar

import anyio
import structlog

from dreamer.backends.base import MemoryBackend, PreparesRecalls
from dreamer.cardtags import ROLLUP_TAG
from dreamer.errors import BackendError
from dreamer.rollup import dedup
from dreamer.rollup.analysis import ANALYSIS_VERSION, is_current
from dreamer.rollup.candidates import GateProbe, index_words, passes_gate, probe_words, scans, word_sizes
from dreamer.rollup.existing import stored_sketch
from dreamer.rollup.promote import CARD_FACT_TYPES
from dreamer.rollup.semantic import BatchVectors
from dreamer.rollup.similarity import Sketch, profile_text, sketch_of, sketch_text
from dreamer.state import StateStore

log = structlog.get_logger("dreamer.rollup")
_T = TypeVar("_T")

#: How many cards indexed before gate rows existed a run gives theirs (each run a batch, so a large
#: ledger's backfill never makes one run long; at 1M cards a batch takes about 0.5 s).
GATE_BACKFILL_BATCH = 20_000


def index_pending(state: StateStore, upstream_id: str) -> None:
    """Index the ledger cards written before the word index (and sketch those from before
    sketches), once, for every later run; then give a batch of cards indexed before gate rows
    existed theirs (:func:`backfill_gates`)."""
    state.use_index_version(Sketch.VERSION)
    entries: dict[str, tuple[str, frozenset[str], tuple[int, int]]] = {}
    for card in state.unindexed(upstream_id):
        sketch = Sketch.loads(card.sketch) or stored_sketch(card.text)
        entries[card.document_id] = (sketch.dumps(), index_words(sketch), word_sizes(sketch))
    state.store_index(entries)
    backfill_gates(state, GATE_BACKFILL_BATCH)


def backfill_gates(state: StateStore, batch: int) -> bool:
    """Write the gate rows of the next ``batch`` cards indexed before gate rows existed, from
    their stored sketches (of every bank: the rows are the ledger's); True once none is left. A
    card that has its row already (written with its words) is passed over, so a file upgraded
    from schema 8 writes only what it lacks. A card whose sketch does not read is skipped: it is
    read in full as before, never ruled out."""
    cards = state.gate_backfill(batch)
    if cards is None:
        return True
    entries = {}
    for document_id, stored, has_gate in cards:
        if has_gate:
            continue
        sketch = Sketch.loads(stored)
        if sketch is not None:
            entries[document_id] = (index_words(sketch), word_sizes(sketch))
    done = len(cards) < batch
    state.store_gates(entries, after=None if done else cards[-1][0])
    return done


#: What an upgrade of older rows' stored sketches gives them: this sketch and analysis version.
SKETCH_UPGRADE = f"{Sketch.VERSION}/{ANALYSIS_VERSION}"


def upgrade_sketches(state: StateStore, batch: int) -> tuple[int, bool]:
    """Give the next ``batch`` ledger cards whose stored sketch reads but keeps no analysis of
    this version (rows written before) the stored sketch this code writes (`stored_sketch`): the
    judge then compares them without analysing their texts. Rows that do not read are left: they
    are sketched from their text when met, as before. How many were upgraded, and whether every
    card has been gone over (True at once when it had)."""
    rows = state.sketch_upgrade(batch, SKETCH_UPGRADE)
    if rows is None:
        return 0, True
    upgraded = {}
    for document_id, text, stored in rows:
        sketch = Sketch.loads(stored)
        if sketch is not None and not is_current(sketch):
            upgraded[document_id] = stored_sketch(text).dumps()
    done = len(rows) < batch
    state.store_sketches(upgraded, version=SKETCH_UPGRADE, after=None if done else rows[-1][0])
    return len(upgraded), done


def card_candidates(
    state: StateStore,
    upstream_id: str,
    sketch: Sketch,
    thresholds: dedup.DedupThresholds,
    counts: Mapping[str, int],
) -> list[dedup.CardText]:
    """The ledger cards of ``upstream_id`` that pass the gate of one new card (its ``sketch``),
    found through the word index, in ledger order; ``counts`` are the word index's card counts of
    its words (:func:`~.candidates.probe_words`)."""
    ids = candidate_ids(state, sketch, thresholds, counts)
    return read_candidates(state, upstream_id, sketch, thresholds, ids)


def candidate_ids(
    state: StateStore, sketch: Sketch, thresholds: dedup.DedupThresholds, counts: Mapping[str, int]
) -> set[str] | None:
    """The ids of the ledger cards the word index names for one new card and whose gate rows do
    not rule out (a card without a row is kept); None when a threshold of 0 names every card."""
    ranges = scans(sketch, thresholds, counts)
    if ranges is None:
        return None
    return GateProbe.of(sketch, thresholds).passing(state.scan_index(ranges))


def read_candidates(
    state: StateStore,
    upstream_id: str,
    sketch: Sketch,
    thresholds: dedup.DedupThresholds,
    ids: set[str] | None,
) -> list[dedup.CardText]:
    """The cards ``ids`` (None: every card of the bank), those of the same normalised text and
    those not indexed yet, read and kept when they pass the gate itself, in ledger order."""
    out = []
    for c in state.ledger_candidates(upstream_id, ids=ids, normalized={sketch.normalized}):
        old = Sketch.loads(c.sketch) or sketch_text(c.text)
        if passes_gate(sketch, old, thresholds):
            out.append(dedup.CardText(c.document_id, c.text, old))
    return out


@dataclass(frozen=True, slots=True)
class LedgerProbe:
    """What the word index names for each card of a batch, before any is judged: the ids of its
    candidates (:func:`candidate_ids`), or, when the index is of another analysis version, every
    card of the bank for all of them (``whole``)."""

    ids: list[set[str] | None]
    whole: list[dedup.CardText] | None = None


def probe_ledger(state: StateStore, upstream_id: str, texts: Sequence[str], *, dry_run: bool) -> LedgerProbe:
    """The judge's reads that need only the new cards' texts: index the cards written since (not
    in a dry run, which neither writes nor trusts an index of another analysis version), then
    each card's candidate ids. :func:`probe_beside` runs it while the upstream recalls run."""
    if not dry_run:
        index_pending(state, upstream_id)
    sketches = [sketch_of(profile_text(text)) for text in texts]
    if state.index_version() not in (None, Sketch.VERSION):
        whole = [
            dedup.CardText(c.document_id, c.text, Sketch.loads(c.sketch)) for c in state.ledger(upstream_id)
        ]
        return LedgerProbe([None] * len(texts), whole)
    thresholds = dedup.DedupThresholds()
    counts = state.word_counts(set().union(*(probe_words(s) for s in sketches)))
    return LedgerProbe([candidate_ids(state, sketch, thresholds, counts) for sketch in sketches])


async def probe_beside(
    state: StateStore,
    upstream_id: str,
    texts: Sequence[str],
    *,
    dry_run: bool,
    during: Callable[[], Awaitable[_T]],
) -> tuple[LedgerProbe, _T]:
    """:func:`probe_ledger` in a thread of its own while ``during`` runs (the upstream recalls, on
    the store's connection): the two read different files, and SQLite lets go of the interpreter
    while it reads, so on two cores a run waits for the longer of them, not their sum (at 1M
    cards, 2.3 -> 1.4 s). The state is the probe's until it is done: ``during`` must not use it,
    and the probe is waited for whatever ``during`` does (fail, be cancelled); its own error is
    raised when ``during`` succeeded, and logged when ``during``'s error is the one raised."""
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="dreamer-probe") as pool:
        future = pool.submit(probe_ledger, state, upstream_id, texts, dry_run=dry_run)
        try:
            result = await during()
        finally:
            # Off the event loop (leaving the pool would block it); run_sync waits for its thread
            # even when the run is cancelled.
            await anyio.to_thread.run_sync(wait, [future])
            if sys.exc_info()[0] is not None and (hidden := future.exception()) is not None:
                log.warning("the ledger's probe failed as well", error=str(hidden))
        return future.result(), result


#: How many upstream recalls a run has in flight at once: the embedded store reads two on two
#: connections (`dreamer.backends.embedded.connections`; a hybrid recall's full-text side, most
#: of it, on the spare one), a server serves them side by side.
RECALLS_AT_ONCE = 2


async def in_order(calls: Sequence[Callable[[], Awaitable[_T]]], at_once: int | None = None) -> list[_T]:
    """Each call's result, in the calls' order, with at most ``at_once`` of them running together
    (default :data:`RECALLS_AT_ONCE`). The first call to fail has its error raised as it is (not in
    a group), once the others still running are cancelled; no call starts after it failed."""
    done: dict[int, _T] = {}
    failed: list[Exception] = []
    slots = anyio.Semaphore(max(1, RECALLS_AT_ONCE if at_once is None else at_once))

    async def one(index: int) -> None:
        async with slots:
            if failed:
                return
            try:
                done[index] = await calls[index]()
            except Exception as exc:
                failed.append(exc)
                group.cancel_scope.cancel()

    async with anyio.create_task_group() as group:
        for index in range(len(calls)):
            group.start_soon(one, index)
    if failed:
        raise failed[0]
    return [done[index] for index in range(len(calls))]


async def prepare_recalls(backend: MemoryBackend, upstream_id: str, texts: Sequence[str], top_k: int) -> None:
    """Tell a backend that can use it (:class:`~dreamer.backends.base.PreparesRecalls`) which
    recalls of :func:`upstream_candidates` follow, one per card, so it searches its vectors once
    for all of them; a failure here only loses that, and is logged."""
    if not isinstance(backend, PreparesRecalls) or not texts:
        return
    try:
        await backend.prepare_recalls(upstream_id, texts, top_k)
    except BackendError as exc:
        log.warning("could not prepare the recalls; each searches on its own", error=str(exc))


async def upstream_candidates(
    backend: MemoryBackend, upstream_id: str, text: str, top_k: int
) -> list[dedup.UpstreamCandidate]:
    """The upstream bank's cards nearest to ``text`` by the backend's own recall (Dreamer's cards
    only, at most ``top_k``): the judge's second source besides the ledger. One call; the roll-up
    wraps it in its retry rules, ``dreamer explain --text`` calls it as it is."""
    hits = await backend.recall(
        upstream_id,
        text,
        budget="low",
        types=CARD_FACT_TYPES,
        tags=(ROLLUP_TAG,),
        tags_match="any_strict",
        limit=top_k,
    )
    return [dedup.UpstreamCandidate(h.document_id or h.id, h.text, h.semantic) for h in hits[:top_k]]


def judge_against_ledger(
    state: StateStore,
    upstream_id: str,
    cards: Sequence[dedup.CardText],
    upstream: Sequence[Sequence[dedup.UpstreamCandidate]],
    vectors: BatchVectors | None,
    *,
    dry_run: bool,
    probe: LedgerProbe | None = None,
) -> list[dedup.Verdict]:
    """The verdicts, each card against the ledger cards the word index names as its candidates
    and, with an embedder, the nearest ledger cards by cosine. The cards are judged one at a time,
    each with its own candidates read, judged and let go, so a run holds one card's candidates at a
    time, however many the batch's cards find together. ``probe``: what :func:`probe_ledger` found
    for ``cards`` (read here when not given). A dry run writes nothing: it neither indexes older
    cards nor trusts an index of another analysis version (it compares with every card)."""
    if probe is None:
        probe = probe_ledger(state, upstream_id, [card.text for card in cards], dry_run=dry_run)
    thresholds = dedup.DedupThresholds()
    judge = dedup.BatchJudge(thresholds, semantic=None if vectors is None else vectors.similarity)
    # The embedder's nearest cards face every card of the batch: a pair near in meaning skips the gate.
    near = []
    if vectors is not None:
        near = [
            dedup.CardText(c.document_id, c.text, Sketch.loads(c.sketch))
            for c in state.candidate_cards(vectors.nearest_ids())
        ]
    profiles = [profile_text(card.text) for card in cards]  # each card analysed once
    verdicts = []
    for card, profile, ids, hits in zip(cards, profiles, probe.ids, upstream, strict=True):
        mine = (
            probe.whole
            if probe.whole is not None
            else read_candidates(state, upstream_id, sketch_of(profile), thresholds, ids)
        )
        found = {c.card_id for c in mine}
        if vectors is not None and vectors.ledger is not None:  # those in on-disk segments, read back
            vectors.ledger.fetch_pool(state, found)
        verdicts.append(
            judge.judge(card, [*mine, *(c for c in near if c.card_id not in found)], hits, profile)
        )
    return verdicts
