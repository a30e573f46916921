"""How many threads the local model's matrix products use: one, unless the environment says.

numpy's BLAS starts one thread per core for every product. For the small products of one batch of
cards on a machine whose cores the agents and the memory server also use, the extra threads mostly
wait for each other: embedding 200 cards in batches of 20 on 2 loaded cores took 8.0-8.9 s of CPU
and 9.3-11.1 s of wall time with the default, 3.8 s of CPU and 4.0-4.3 s with one thread. The
variables must be set before numpy is first imported, which in ``dreamer`` happens at the first
run, after the command line is read.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, MutableMapping

#: The thread-count variables of the BLAS builds numpy ships with (OpenBLAS) and of the others.
BLAS_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def pin_blas_threads(environ: MutableMapping[str, str] | None = None) -> None:
    """Set each BLAS thread-count variable to 1 where it is not set (an operator's value stays)."""
    env = os.environ if environ is None else environ
    for name in BLAS_THREAD_VARIABLES:
        env.setdefault(name, "1")


def configured_threads(environ: Mapping[str, str] | None = None) -> int:
    """The thread count an inference runtime other than BLAS should use: the first of
    :data:`BLAS_THREAD_VARIABLES` that holds a whole number from 1 to 64, else 1."""
    env = os.environ if environ is None else environ
    for name in BLAS_THREAD_VARIABLES:
        raw = env.get(name, "").strip()
        if raw.isdigit() and 1 <= int(raw) <= 64:
            return int(raw)
    return 1
