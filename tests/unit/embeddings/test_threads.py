"""One BLAS thread for the local model's products unless the environment says otherwise, set by the
``dreamer`` command before numpy is imported; a phase of independent pieces on two threads of
Dreamer's own."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from dreamer.embeddings import threads
from dreamer.embeddings.threads import BLAS_THREAD_VARIABLES, pin_blas_threads
from tests.support.configs import config_data, write_toml

PROBE = (
    "import os, sys\n"
    "from dreamer.cli import main\n"
    "numpy_before = 'numpy' in sys.modules\n"
    "main(['check-config', '--config', sys.argv[1]])\n"
    f"print('PROBE', numpy_before, *(os.environ.get(v) for v in {BLAS_THREAD_VARIABLES!r}))\n"
)


def probe(config: Path, **env: str) -> list[str]:
    environ = {k: v for k, v in os.environ.items() if k not in BLAS_THREAD_VARIABLES} | env
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(config)], env=environ, capture_output=True, text=True, check=True
    )
    (line,) = [ln for ln in done.stdout.splitlines() if ln.startswith("PROBE ")]
    return line.split()[1:]


class TestPinBlasThreads:
    def test_unset_variables_become_one_and_set_ones_stay(self) -> None:
        """Each variable not set is set to 1; an operator's value is kept."""
        env = {"OMP_NUM_THREADS": "4"}
        pin_blas_threads(env)
        assert env == {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "4", "MKL_NUM_THREADS": "1"}

    def test_the_command_pins_them_before_numpy_is_imported(self, tmp_path: Path) -> None:
        """A ``dreamer`` command sets the variables before anything imports numpy (which reads them
        once, at import), and leaves one the environment gave it as it was."""
        config = write_toml(tmp_path / "config.toml", config_data(state_dir=str(tmp_path / "state")))
        assert probe(config) == ["False", "1", "1", "1"]
        assert probe(config, OPENBLAS_NUM_THREADS="2") == ["False", "2", "1", "1"]


def test_the_runtime_thread_count_reads_the_same_variables() -> None:
    """onnxruntime's thread count is the operator's first whole number from 1 to 64 among the
    variables, else 1; garbage, zero and absurd values are passed over."""
    from dreamer.embeddings.threads import configured_threads

    assert configured_threads({}) == 1
    assert configured_threads({"OPENBLAS_NUM_THREADS": "2"}) == 2
    assert configured_threads({"OPENBLAS_NUM_THREADS": "junk", "OMP_NUM_THREADS": "3"}) == 3
    assert configured_threads({"OMP_NUM_THREADS": "0"}) == 1
    assert configured_threads({"OMP_NUM_THREADS": "1000000000000"}) == 1
    assert configured_threads({"MKL_NUM_THREADS": " 4 "}) == 4
    assert configured_threads({"OMP_NUM_THREADS": "-2"}) == 1


class TestSplitWork:
    """A phase's independent pieces on two threads of Dreamer's own, the calling one included."""

    @pytest.fixture
    def two(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(threads, "worker_count", lambda: 2)

    def test_results_come_in_the_pieces_order_from_two_threads(self, two: None) -> None:
        """Each piece's result at its place, whichever thread took it; the calling thread is one of
        the two, and the other takes pieces while it works (a piece waits for one the other took)."""
        seen: dict[int, int] = {}
        calling_started = threading.Event()

        def work(piece: int) -> int:
            seen[piece] = threading.get_ident()
            if threading.get_ident() == calling:
                calling_started.set()
            else:
                assert calling_started.wait(5)  # the other thread is held until the caller works
            return piece * piece

        calling = threading.get_ident()
        assert threads.split_work(work, list(range(9))) == [p * p for p in range(9)]
        assert len(set(seen.values())) == 2 and calling in seen.values()

    def test_one_core_or_one_piece_runs_on_the_calling_thread(self, monkeypatch: pytest.MonkeyPatch) -> None:
        idents: set[int] = set()

        def work(piece: int) -> int:
            idents.add(threading.get_ident())
            return piece

        monkeypatch.setattr(threads, "worker_count", lambda: 1)
        assert threads.split_work(work, [1, 2, 3]) == [1, 2, 3]
        monkeypatch.setattr(threads, "worker_count", lambda: 2)
        assert threads.split_work(work, [4]) == [4]
        assert threads.split_work(work, []) == []
        assert idents == {threading.get_ident()}

    def test_the_first_error_is_raised_after_the_other_piece_ended_and_no_piece_starts_after_it(
        self, two: None
    ) -> None:
        """A piece failing on one thread while the other works: that one is let finish (a product
        in flight is not abandoned), no piece starts after, and the error is raised as it is."""
        started: list[int] = []
        failing_started = threading.Event()
        ended: list[int] = []

        def work(piece: int) -> int:
            started.append(piece)
            if piece == 0:
                assert failing_started.wait(5)
                time.sleep(0.05)
                ended.append(piece)
                return piece
            failing_started.set()
            raise OSError(f"piece {piece} cannot be read")

        with pytest.raises(OSError, match="piece 1 cannot be read"):
            threads.split_work(work, list(range(6)))
        assert sorted(started) == [0, 1] and ended == [0]

    def test_never_more_threads_than_cores_or_two(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3, 4, 5, 6, 7})
        assert threads.worker_count() == threads.MOST_WORKERS == 2
        monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {3})
        assert threads.worker_count() == 1

        def refused(pid: int) -> set[int]:
            raise OSError("not allowed")

        monkeypatch.setattr(os, "sched_getaffinity", refused)
        monkeypatch.setattr(os, "cpu_count", lambda: None)
        assert threads.worker_count() == 1
