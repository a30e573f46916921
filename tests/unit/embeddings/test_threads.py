"""One BLAS thread for the local model's products unless the environment says otherwise, set by the
``dreamer`` command before numpy is imported."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

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
