"""The scale part: one run on a bank of 1k to 100k units, against a run that reads the whole bank.

Time and peak Python memory (``tracemalloc``) on the embedded store, after 20 new units.
"""

from __future__ import annotations

import shutil
import tempfile
import time
import tracemalloc
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from bench._common import RequestCounter, open_counted_backend, progress
from bench.gating.banks import gating_config, mark_rolled_up, synthetic_text
from dreamer.backends.base import RetainItem
from dreamer.rollup.pipeline import Rollup
from dreamer.state import StateStore

T = TypeVar("T")

SCALE_NEW_UNITS = 20
#: The watermark overlap of the scale part (see ``scale_once``).
SCALE_OVERLAP_S = 0.0


@dataclass
class ScaleRow:
    units_before: int
    new_units: int
    run_s: float
    run_recall_s: float
    run_peak_mib: float
    units_seen: int
    outcome: str
    full_scan_s: float
    full_scan_peak_mib: float
    full_scan_units: int
    setup_s: float

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


async def traced(work: Callable[[], Awaitable[T]]) -> tuple[T, float]:
    """``work``'s result and the peak of Python allocations while it ran, in MiB."""
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        result = await work()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return result, peak / 1024 / 1024


async def timed(work: Callable[[], Awaitable[T]]) -> tuple[T, float]:
    started = time.monotonic()
    result = await work()
    return result, time.monotonic() - started


async def scale_once(size: int) -> ScaleRow:
    workdir = Path(tempfile.mkdtemp(prefix="dreamer-bench-scale-"))
    counter = RequestCounter()
    try:
        # The bank is loaded seconds before the run: with the default 300 s watermark overlap each
        # run would re-read all of it (the overlap re-reads the writes of the last overlap_s before
        # the watermark, a window in time whatever the bank's size). Overlap 0 isolates the size.
        config = gating_config(
            ["scale"],
            workdir / "state",
            {"kind": "embedded"},
            "",
            rollup={"watermark_overlap_s": SCALE_OVERLAP_S},
        )
        backend = open_counted_backend(config, counter)
        bank_id = config.bank_id("scale")
        try:
            with StateStore.open(config.state_path) as state:
                progress(f"scale: writing {size} units")
                setup_started = time.monotonic()
                batch = 5000
                for start in range(0, size, batch):
                    await backend.retain(
                        bank_id,
                        [
                            RetainItem(content=synthetic_text(i))
                            for i in range(start, min(size, start + batch))
                        ],
                    )
                await mark_rolled_up(config, backend, state, ["scale"])
                setup_s = time.monotonic() - setup_started
                await backend.retain(
                    bank_id,
                    [RetainItem(content=synthetic_text(size + 1000 + k)) for k in range(SCALE_NEW_UNITS)],
                )
                rollup = Rollup(config, backend, state)
                epoch = datetime(1970, 1, 1, tzinfo=UTC)
                progress(f"scale: {size} units: the baseline without a watermark (dry runs)")
                full, full_s = await timed(lambda: rollup.run("scale", dry_run=True, since=epoch))
                _, full_peak = await traced(lambda: rollup.run("scale", dry_run=True, since=epoch))
                progress(f"scale: {size} units: one run")
                _, run_peak = await traced(lambda: rollup.run("scale", dry_run=True))
                seconds_before = counter.seconds_snapshot()
                report, run_s = await timed(lambda: rollup.run("scale"))
                recall_s = counter.seconds.get("embedded.recall", 0.0) - seconds_before.get(
                    "embedded.recall", 0.0
                )
        finally:
            await backend.aclose()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return ScaleRow(
        units_before=size,
        new_units=SCALE_NEW_UNITS,
        run_s=run_s,
        run_recall_s=recall_s,
        run_peak_mib=run_peak,
        units_seen=report.units_seen,
        outcome=report.outcome,
        full_scan_s=full_s,
        full_scan_peak_mib=full_peak,
        full_scan_units=full.units_seen,
        setup_s=setup_s,
    )
