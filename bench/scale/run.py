"""One measurement per ledger size: the daemon's one run, seen from outside, and the floor beside it."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench._common import BenchError, progress
from bench.daemon import Daemon, cpu_seconds, wait_until
from bench.notify_socket import has
from bench.scale.files import GLOBAL_BANK, PROFILE, PROFILE_BANK, build, config_text, new_unit_texts
from bench.scale.ledgers import SYNTHETIC, LedgerSpec
from bench.scale.measures import longest_gap, vm_hwm_mib
from bench.scale.pgstate import OnPostgres, on_postgres, schema_mib
from bench.scale.vectorindex import change_model, fill_gates, fill_sketches, prebuild
from dreamer.backends.embedded import search
from dreamer.backends.embedded.backend import EmbeddedBackend
from dreamer.config import Config, load_config
from dreamer.rollup import dedup
from dreamer.rollup.candidates import index_words, probe_words, word_sizes
from dreamer.rollup.judging import card_candidates
from dreamer.rollup.promote import CARD_FACT_TYPES, INPUT_FACT_TYPES, ROLLUP_TAG
from dreamer.rollup.similarity import profile_text, sketch_of
from dreamer.state import LedgerCard, StateStore, Watermark
from dreamer.text import card_document_id, normalize_text

#: Pings every 0.1 s (half of it), so a blocked event loop shows within a tenth of a second.
WATCHDOG_USEC = 200_000
READY_DEADLINE_S = 60.0
#: Floor runs per size; the median is reported.
FLOOR_REPEATS = 3


def run_deadline_s(size: int) -> float:
    """How long the one run may take before the benchmark gives up: generous, bounded."""
    return max(120.0, size / 1000)


@dataclass
class RunSeen:
    """What the daemon's one run showed from outside."""

    record: dict[str, Any]
    #: The state file's checkpoint after the run: its seconds and the pages it wrote back (None on
    #: PostgreSQL, or when the daemon logged none).
    checkpoint_s: float | None
    checkpoint_pages: int | None
    cpu_s: float
    peak_rss_mib: float
    watchdog_gap_s: float | None
    pings: int
    ready_s: float
    exit_s: float


def checkpointed(daemon: Daemon) -> dict[str, Any] | None:
    """The daemon's 'state file checkpointed' record, once it logged one."""
    return next((r for r in daemon.records() if r.get("event") == "state file checkpointed"), None)


def file_mib(path: Path) -> float:
    """A SQLite file with its WAL, in MiB."""
    total = 0
    for p in (path, path.with_name(path.name + "-wal")):
        if p.exists():
            total += p.stat().st_size
    return total / 1024 / 1024


def run_daemon(config_path: Path, log_path: Path, size: int, *, checkpoints: bool = True) -> RunSeen:
    """Start ``dreamer run``, wait for its one ``job finished`` record (and, with ``checkpoints``,
    a state file's, its checkpoint after the run), read /proc, SIGTERM it."""
    daemon = Daemon(config_path, log_path, watchdog_usec=WATCHDOG_USEC)
    try:
        daemon.start()
        ready_index = daemon.notify.wait_for(has("READY", "1"), timeout=READY_DEADLINE_S, what="READY=1")
        ready_at = daemon.notify.arrived_at(ready_index)
        cpu_at_ready = cpu_seconds(daemon.pid)
        progress(
            f"scale {size}: daemon ready after {ready_at - daemon.started_at:.2f} s; waiting for its run"
        )
        wait_until(
            lambda: daemon.finished_jobs() >= 1 or daemon.proc is None or daemon.proc.poll() is not None,
            what="the run's 'job finished' record",
            timeout=run_deadline_s(size),
        )
        assert daemon.proc is not None
        if daemon.proc.poll() is not None:
            raise BenchError(f"the daemon exited with status {daemon.proc.returncode}; see {log_path}")
        cpu_s = cpu_seconds(daemon.pid) - cpu_at_ready
        # The daemon writes the state file's log back once the run has finished: waited for, so
        # the peak and the time it took are its too.
        if checkpoints:
            gone = daemon.proc.poll
            wait_until(
                lambda: checkpointed(daemon) is not None or gone() is not None,
                what="the 'state file checkpointed' record",
                timeout=run_deadline_s(size),
            )
        peak = vm_hwm_mib(daemon.pid)
        # The gap still open when the run ended closes at the next ping.
        seen = len(daemon.notify)
        closing = daemon.notify.wait_for(
            has("WATCHDOG", "1"), after=seen, timeout=5, what="a ping after the run"
        )
        notes = daemon.notify.notifications
        pings = [n.arrived_at for n in notes[ready_index : closing + 1] if n.fields.get("WATCHDOG") == "1"]
        record = next(r for r in daemon.records() if r.get("event") == "job finished")
        checkpoint = checkpointed(daemon) or {}
        _, exit_s = daemon.stop()
    finally:
        daemon.close()
    return RunSeen(
        record=record,
        checkpoint_s=float(checkpoint["seconds"]) if "seconds" in checkpoint else None,
        checkpoint_pages=int(checkpoint["pages"]) if "pages" in checkpoint else None,
        cpu_s=cpu_s,
        peak_rss_mib=peak,
        watchdog_gap_s=longest_gap([ready_at, *pings]),
        pings=len(pings),
        ready_s=ready_at - daemon.started_at,
        exit_s=exit_s,
    )


async def floor_once(config: Config, before: Watermark, repeat: int) -> tuple[float, int]:
    """The least a run does: list the units after the watermark, commit their ledger rows with the
    moved watermark (store and state file opened, as a run opens them). Seconds and units listed."""
    overlap = timedelta(seconds=config.rollup.watermark_overlap_s)
    started = time.monotonic()
    backend = EmbeddedBackend(config.embedded_path)
    try:
        units = await backend.list_units_since(
            PROFILE_BANK, before.read_from(overlap), exclude_tags=(ROLLUP_TAG,), fact_types=INPUT_FACT_TYPES
        )
        new = [u for u in units if before.is_new(u.created_at, u.id, overlap)]
        with StateStore.open(config.state_path) as state:
            stored = state.watermark(PROFILE)
            now = datetime.now(UTC)
            run_id = f"floor-{repeat}"
            state.record_run_start(run_id, f"rollup:{PROFILE}", now)
            rows = [
                LedgerCard(
                    # Not the run's own document ids: those rows are in the ledger already.
                    document_id=card_document_id(PROFILE, f"{u.text} floor {repeat}"),
                    profile=PROFILE,
                    upstream_bank=config.upstream_bank_id(PROFILE),
                    text=u.text,
                    normalized=normalize_text(u.text),
                    source_ids=(u.id,),
                    profiles=(PROFILE,),
                    promoted_at=now,
                    last_seen_at=now,
                    run_id=run_id,
                    sketch=sketch.dumps(),
                    words=tuple(sorted(index_words(sketch))),
                    word_sizes=word_sizes(sketch),
                )
                for u, sketch in ((u, sketch_of(profile_text(u.text))) for u in new)
            ]
            moved = before.advanced_to(((u.created_at, u.id) for u in new), overlap)
            state.commit_rollup(
                profile=PROFILE,
                bank_id=PROFILE_BANK,
                watermark=replace(moved, unit_count=stored.unit_count, last_write_at=stored.last_write_at),
                promoted=rows,
                reinforced=[],
                run_id=run_id,
                outcome="promoted",
                detail="benchmark floor",
                counts={"promoted": len(rows)},
                finished_at=now,
                expected=stored,
            )
    finally:
        await backend.aclose()
    return time.monotonic() - started, len(new)


async def recall_ms(config: Config, texts: Sequence[str], *, one_tier: bool) -> float:
    """Median milliseconds of the run's dedup recall on the global bank, one per text, with the
    pipeline's arguments; ``one_tier`` searches as before the two-tier plan (every term ranked
    over all its matches) as the baseline. After one unmeasured recall (the file's pages)."""
    common = 1 << 62 if one_tier else search.COMMON_MATCHES
    saved, search.COMMON_MATCHES = search.COMMON_MATCHES, common
    backend = EmbeddedBackend(config.embedded_path)
    try:

        async def one(text: str) -> float:
            started = time.perf_counter()
            await backend.recall(
                GLOBAL_BANK,
                text,
                budget="low",
                types=CARD_FACT_TYPES,
                tags=(ROLLUP_TAG,),
                tags_match="any_strict",
                limit=config.rollup.semantic_top_k,
            )
            return (time.perf_counter() - started) * 1000

        await one(texts[0])
        return statistics.median([await one(text) for text in texts])
    finally:
        search.COMMON_MATCHES = saved
        await backend.aclose()


def gate_passers(config: Config, texts: Sequence[str]) -> list[int]:
    """For each new card, how many ledger cards pass its dedup gate (what its verdict must read and
    compare): counted before the run, through the judge step's own reads."""
    thresholds = dedup.DedupThresholds()
    sketches = [sketch_of(profile_text(text)) for text in texts]
    with StateStore.open(config.state_path) as state:
        counts = state.word_counts(set().union(*(probe_words(s) for s in sketches)))
        return [len(card_candidates(state, GLOBAL_BANK, s, thresholds, counts)) for s in sketches]


async def floor(config: Config, before: Watermark) -> tuple[float, int]:
    runs = [await floor_once(config, before, k) for k in range(FLOOR_REPEATS)]
    return statistics.median(s for s, _ in runs), runs[0][1]


def measure(
    size: int,
    cache: Path | None = None,
    embedder: str = "none",
    spec: LedgerSpec = SYNTHETIC,
    dsn: str | None = None,
    cold_index: bool = False,
    model_change: bool = False,
) -> dict[str, Any]:
    """One row of the table: set up N cards (not timed; with ``cache``, built once into
    ``cache/N`` (``cache/N-local`` with the local embedder, ``cache/N-realistic[-local]`` for the
    realistic ledger) and copied for each measurement), the daemon's run, the floor and the recalls.
    With ``dsn`` the daemon's state is the same file copied into a new PostgreSQL schema
    (:mod:`bench.scale.pgstate`); the floor and the gate still read the file. With the embedder,
    the judge's segments are written first as earlier runs would have (not timed; reported as
    ``index_build_s``), unless ``cold_index``: then the run measured writes them; with
    ``model_change`` every stored vector is made another model's instead (``model_change_s``), so the
    run measured is the first after a model change. The ledger's
    gate rows are written first too (``gate_fill_s``; none to write for files built with them), and
    each card's stored sketch as this code writes it, its sentences' and its analysis
    (``sketch_fill_s``; likewise)."""
    workdir = Path(tempfile.mkdtemp(prefix=f"dreamer-bench-scale-{size}-"))
    try:
        progress(f"scale {size}: building the global bank and the ledger")
        started = time.monotonic()
        config, config_path, before = asyncio.run(set_up(workdir, size, cache, embedder, spec))
        setup_s = time.monotonic() - started
        progress(f"scale {size}: giving the ledger's cards their gate rows, as earlier runs would have")
        gate_fill_s = fill_gates(config)
        progress(f"scale {size}: giving the ledger's cards their stored sketches as this code writes them")
        sketch_fill_s = fill_sketches(config)
        index_build_s, index_segments = None, 0
        model_change_s = None
        if model_change:
            progress(
                f"scale {size}: every stored vector made another model's, as a model upgrade leaves them"
            )
            model_change_s = change_model(config)
        elif embedder != "none" and dsn is None and not cold_index:
            progress(f"scale {size}: writing the judge's on-disk segments, as earlier runs would have")
            index_build_s, index_segments = prebuild(config)
        progress(f"scale {size}: set up in {setup_s:.1f} s; the recalls, then the daemon")
        texts = new_unit_texts(spec, size)
        passers = gate_passers(config, texts)
        recall_tiered = asyncio.run(recall_ms(config, texts, one_tier=False))
        recall_one_tier = asyncio.run(recall_ms(config, texts, one_tier=True))
        written_back_s = write_back(size)
        pg: OnPostgres | None = None
        with contextlib.ExitStack() as stack:
            if dsn is not None:
                pg = stack.enter_context(on_postgres(config_path, config.state_path, dsn, size))
            seen = run_daemon(config_path, workdir / "daemon.log", size, checkpoints=dsn is None)
            state_mib = schema_mib(pg) if pg is not None else file_mib(config.state_path)
        store_mib = file_mib(config.embedded_path)
        progress(f"scale {size}: run took {seen.record.get('duration_s')} s; the floor")
        floor_s, floor_units = asyncio.run(floor(config, before))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    record = seen.record
    run_s = float(record.get("duration_s", float("nan")))
    counts = record.get("counts") or {}
    return {
        "cards": size,
        "state": "sqlite" if pg is None else "postgres",
        "state_copy_s": None if pg is None else pg.copy_s,
        "ledger": spec.kind,
        "embedder": embedder,
        "setup_s": setup_s,
        "gate_fill_s": gate_fill_s,
        "sketch_fill_s": sketch_fill_s,
        "model_change_s": model_change_s,
        "index_build_s": index_build_s,
        "index_segments": index_segments,
        "written_back_s": written_back_s,
        "outcome": record.get("outcome"),
        "promoted": counts.get("promoted"),
        "reinforced": counts.get("reinforced"),
        "run_s": run_s,
        "run_cpu_s": seen.cpu_s,
        "checkpoint_s": seen.checkpoint_s,
        "checkpoint_pages": seen.checkpoint_pages,
        "peak_rss_mib": seen.peak_rss_mib,
        "state_mib": state_mib,
        "store_mib": store_mib,
        "watchdog_gap_s": seen.watchdog_gap_s,
        "watchdog_pings": seen.pings,
        "floor_s": floor_s,
        "gate_passers": sum(passers),
        "gate_passers_max": max(passers),
        "recall_ms": recall_tiered,
        "recall_one_tier_ms": recall_one_tier,
        "floor_units": floor_units,
        "run_over_floor": run_s / floor_s if floor_s > 0 else None,
        "ready_s": seen.ready_s,
        "exit_s": seen.exit_s,
    }


def write_back(size: int) -> float:
    """Have the kernel write the set-up's files to disk before the run (``os.sync``), as files that
    sat there between two runs would be; how long it took. Without it the run's first flush of the
    embedded store (the checkpoint as it closes) wrote back the pages of the copy just made: 0.1 s
    of a 100k run's 1.1 s was the benchmark's own setup."""
    progress(f"scale {size}: writing the set-up's files back to disk")
    started = time.monotonic()
    os.sync()
    return time.monotonic() - started


def _cached(built: Path, described: dict[str, object]) -> bool:
    """Whether ``built`` holds finished files of this ledger (files cached before the ledger was
    recorded are synthetic)."""
    try:
        recorded = json.loads((built / "built.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return {
        key: recorded.get(key, "synthetic" if key == "ledger" else None) for key in described
    } == described


async def set_up(
    workdir: Path, size: int, cache: Path | None, embedder: str = "none", spec: LedgerSpec = SYNTHETIC
) -> tuple[Config, Path, Watermark]:
    """Build the files into ``workdir``, or (with ``cache``) copy them from ``cache/size``, building
    them there first when they are not there yet."""
    if cache is None:
        return await build(workdir, size, embedder, spec)
    built = cache / spec.cache_name(size, embedder)
    described = spec.describe()
    if not _cached(built, described):
        shutil.rmtree(built, ignore_errors=True)
        await build(built, size, embedder, spec)
        (built / "built.json").write_text(json.dumps({"size": size, "embedder": embedder, **described}))
    progress(f"scale {size}: copying the files built in {built}")
    shutil.copytree(built / "state", workdir / "state")
    config_path = workdir / "dreamer.toml"
    config_path.write_text(config_text(workdir / "state", embedder), encoding="utf-8")
    config = load_config(config_path)
    with StateStore.open(config.state_path) as state:
        before = state.watermark(PROFILE)
    return config, config_path, before
