"""Foreground launcher of the development LLM server started by ``scripts/llm-dev up``.

Runs in the ``.llm-dev/venv`` virtualenv, where the ``xllamacpp`` wheel (llama.cpp's own C++ server,
prebuilt) is installed. ``xllamacpp.Server(params)`` loads the model and starts llama.cpp's HTTP server
(OpenAI-compatible ``/v1/chat/completions``, ``/v1/models``, ``/health``) on its own threads, then
returns; this process only keeps it alive until SIGTERM or SIGINT, then exits.

Offline by construction: the model is a local GGUF path, ``offline`` is set, and no Hugging Face
repository, URL or token is given, so llama.cpp never tries to download anything.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time
from pathlib import Path
from types import FrameType


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, type=Path, help="path of the GGUF file")
    parser.add_argument("--alias", required=True, help="model name served by /v1/models and answers")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", required=True, type=int)
    parser.add_argument("--threads", required=True, type=int, help="generation and prompt threads")
    parser.add_argument("--ctx", type=int, default=8192, help="context size in tokens (one slot)")
    parser.add_argument("--pid-file", type=Path, help="written once the server listens")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if not args.model.is_file():
        print(f"llm_dev_server: no model at {args.model}", file=sys.stderr)
        return 1
    if args.host not in ("127.0.0.1", "::1", "localhost"):
        print(f"llm_dev_server: refusing to listen on {args.host}: loopback only", file=sys.stderr)
        return 2
    # Belt and braces: nothing below has a hub repository to fetch, and these keep it that way.
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ.pop("HF_TOKEN", None)

    import xllamacpp as xlc  # the venv's package; imported late so --help works anywhere

    params = xlc.CommonParams()
    params.model.path = str(args.model)
    params.model_alias = {args.alias}
    params.offline = True
    params.hostnames = [args.host]
    params.port = args.port
    params.n_ctx = args.ctx
    params.n_parallel = 1  # one slot: on 2 cores a second concurrent answer only slows the first
    params.cpuparams.n_threads = args.threads
    params.cpuparams_batch.n_threads = args.threads
    params.n_threads_http = 2
    params.ui = False  # no web UI: an API for tests only
    params.cache_ram_mib = 256  # the prompt cache kept in RAM (8 GiB by default)
    params.warmup = True
    params.endpoint_metrics = True
    # A client that waits for a slow answer must not be cut off by the server first.
    params.timeout_read = 3600
    params.timeout_write = 3600

    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    started = time.monotonic()
    server = xlc.Server(params)
    print(
        f"llm_dev_server: {args.alias} listening on {server.listening_address} "
        f"(threads {args.threads}, ctx {args.ctx}) after {time.monotonic() - started:.1f}s",
        file=sys.stderr,
        flush=True,
    )
    if args.pid_file is not None:
        args.pid_file.write_text(f"{os.getpid()}\n")
    while not stop.wait(1.0):
        pass
    print("llm_dev_server: stopping", file=sys.stderr, flush=True)
    # The server's threads do not join cleanly on every build: exit without running destructors.
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
