"""How many threads the local model's matrix products use: one, unless the environment says.

numpy's BLAS starts one thread per core for every product. For the small products of one batch of
cards on a machine whose cores the agents and the memory server also use, the extra threads mostly
wait for each other: embedding 200 cards in batches of 20 on 2 loaded cores took 8.0-8.9 s of CPU
and 9.3-11.1 s of wall time with the default, 3.8 s of CPU and 4.0-4.3 s with one thread. The
variables must be set before numpy is first imported, which in ``dreamer`` happens at the first
run, after the command line is read.

Instead, a phase of independent pieces (a batch's forward passes, the segments of a vector scan)
runs on two threads of Dreamer's own (:func:`split_work`): a thread waiting for a piece sleeps
where BLAS's spin, so the CPU spent stays the same while the wall time falls when a core is free.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from typing import TypeVar

_Piece = TypeVar("_Piece")
_Result = TypeVar("_Result")

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


#: The most threads :func:`split_work` runs a phase of independent pieces on. A roll-up's embedding
#: and its vector scans run when nothing else of the run does, so a second core halves them; more
#: would take cores the agents and the memory server use, for little: on 2 cores, 20 texts embedded
#: in 0.19 s on one thread took 0.11-0.14 s on two, and a scan of 1M vectors 0.44 -> 0.31 s.
MOST_WORKERS = 2


def worker_count() -> int:
    """The threads :func:`split_work` uses: the cores this process may run on, at most
    :data:`MOST_WORKERS`."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on Linux
        cores = os.cpu_count() or 1
    return max(1, min(MOST_WORKERS, cores))


def split_work(work: Callable[[_Piece], _Result], pieces: Sequence[_Piece]) -> list[_Result]:
    """``work`` of each piece, in the pieces' order, on up to :func:`worker_count` threads (the
    calling thread is one of them), each thread taking the next piece not yet taken: for pieces
    whose work lets go of the interpreter (numpy's products, file reads); give the largest first.
    The first error is raised once every piece started has ended; no piece starts after it."""
    workers = min(worker_count(), len(pieces))
    if workers <= 1:
        return [work(piece) for piece in pieces]
    results: dict[int, _Result] = {}
    errors: list[BaseException] = []
    lock = threading.Lock()
    upcoming = iter(range(len(pieces)))

    def take() -> None:
        while True:
            with lock:
                index = None if errors else next(upcoming, None)
            if index is None:
                return
            try:
                results[index] = work(pieces[index])
            except BaseException as exc:
                with lock:
                    errors.append(exc)
                return

    with ThreadPoolExecutor(max_workers=workers - 1, thread_name_prefix="dreamer-split") as pool:
        helpers = [pool.submit(take) for _ in range(workers - 1)]
        take()
        wait(helpers)
    if errors:
        raise errors[0]
    return [results[i] for i in range(len(pieces))]
