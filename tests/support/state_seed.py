"""A state file as a daemon leaves it, made through the store's own calls: committed runs with
cards (their words, vectors and decisions), reinforcements, a supersession, two profiles and an
unfinished run. For the copy into PostgreSQL (``dreamer state copy``) and its timings."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path

from dreamer.state import Decision, Reinforcement, StateStore, StoredVector, Watermark
from tests.support.ledger import T0, sketched_row

MODEL, DIMENSION = "test-model", 4


def seed(path: Path, cards: int, *, runs: int = 4, profiles: tuple[str, ...] = ("p", "q"),
         about: str = "atlas") -> None:
    """A state file of ``cards`` cards over ``runs`` committed runs (alternating ``profiles``), each
    card with its words and a vector, each run reinforcing a card of the run before and recording a
    decision per card; the last card supersedes the first; one run is left unfinished."""
    rows = [sketched_row(f"Host {about}{i % 89} runs service {i % 13} on port {1000 + i}.", i)
            for i in range(cards)]
    per_run = -(-cards // runs)
    with StateStore.open(path) as st:
        st.use_index_version("test-v1")
        for r in range(runs):
            run_id, profile, at = f"{about}-run-{r}", profiles[r % len(profiles)], T0 + timedelta(hours=r)
            chunk = rows[r * per_run : (r + 1) * per_run]
            if r == runs - 1 and chunk:
                chunk[-1] = replace(chunk[-1], supersedes=rows[0].document_id)
            chunk = [replace(c, vector=StoredVector(MODEL, DIMENSION, bytes([i % 256, *range(7)])))
                     for i, c in enumerate(chunk)]
            earlier = rows[(r - 1) * per_run].document_id if r and (r - 1) * per_run < cards else None
            again = [Reinforcement(earlier, (f"u-again-{r}",), profile)] if earlier else []
            decisions = [
                Decision(run_id, profile, f"u-{c.document_id}", "new", "no match", c.document_id,
                         scores={"lexical": 0.125}, decided_at=at)
                for c in chunk
            ]
            st.record_run_start(run_id, f"rollup:{profile}", at)
            st.commit_rollup(
                profile=profile, bank_id=f"bank-{profile}", watermark=watermark(at, r), promoted=chunk,
                reinforced=again, run_id=run_id, outcome="promoted", detail="",
                counts={"promoted": len(chunk)}, finished_at=at + timedelta(minutes=1),
                expected=st.watermark(profile), decisions=decisions,
            )
        st.record_run_start(f"{about}-unfinished", "audit:a", T0 + timedelta(days=1))


def watermark(at: datetime, r: int) -> Watermark:
    return Watermark(at, {f"u-last-{r}": at}, r + 1, at)
