"""A small, real OpenAI-compatible embeddings server on 127.0.0.1, for tests.

Why one is written here: no package installable here serves ``/v1/embeddings`` offline. The
llama.cpp server needs a GGUF model fetched from a hub, infinity and Text Embeddings Inference
need torch or a Rust build plus a hub download. So this module serves the endpoint itself over a
real socket (stdlib ``http.server``), with the real all-MiniLM-L6-v2 model run by
:class:`dreamer.embeddings.local.LocalEmbedder`; the client under test speaks real HTTP to it.

Switches for fault tests (:meth:`EmbeddingsServer.fail`): ``unavailable`` answers 503 with a
``Retry-After``, ``garbage`` answers 200 with a body that is not an embeddings list, ``short``
answers one vector too few, ``hang`` holds the request without answering, ``refuse`` answers 401.
A switch may apply to the next ``times`` requests only. Every request's headers and body are kept
in :attr:`EmbeddingsServer.requests`.

Run alone: ``python -m tests.support.embeddings_server [--port N] [--key KEY]``.
"""

from __future__ import annotations

import argparse
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from dreamer.embeddings.local import LocalEmbedder

MODEL_NAME = "all-minilm-l6-v2"


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class _Faults:
    mode: str = "ok"
    times: int | None = None
    retry_after: str = "0"

    def take(self) -> str:
        if self.mode == "ok":
            return "ok"
        mode = self.mode
        if self.times is not None:
            self.times -= 1
            if self.times <= 0:
                self.mode, self.times = "ok", None
        return mode


@dataclass
class EmbeddingsServer:
    """The server's state; :func:`serve` starts one on a free port."""

    embedder: LocalEmbedder
    key: str | None = None
    requests: list[Received] = field(default_factory=list)
    _faults: _Faults = field(default_factory=_Faults)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _stop: threading.Event = field(default_factory=threading.Event)
    url: str = ""

    def fail(self, mode: str, *, times: int | None = None, retry_after: str = "0") -> None:
        """Answer the next ``times`` requests (all, if None) with the fault ``mode``."""
        with self._lock:
            self._faults = _Faults(mode, times, retry_after)

    def heal(self) -> None:
        self.fail("ok")

    def _next_fault(self) -> tuple[str, str]:
        with self._lock:
            return self._faults.take(), self._faults.retry_after

    def embedding_requests(self) -> list[dict[str, Any]]:
        return [json.loads(r.body) for r in self.requests if r.path.endswith("/embeddings")]


def _handler(server: EmbeddingsServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            return None

        def _answer(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
            raw = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(raw)

        def do_GET(self) -> None:
            if self.path.rstrip("/") in ("/v1/models", "/models"):
                self._answer(200, {"object": "list", "data": [{"id": MODEL_NAME, "object": "model"}]})
            else:
                self._answer(404, {"error": {"message": f"no route {self.path}"}})

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length)
            server.requests.append(Received(self.path, dict(self.headers.items()), body))
            if self.path.rstrip("/") not in ("/v1/embeddings", "/embeddings"):
                self._answer(404, {"error": {"message": f"no route {self.path}"}})
                return
            if server.key is not None and self.headers.get("Authorization") != f"Bearer {server.key}":
                self._answer(401, {"error": {"message": "invalid api key"}})
                return
            mode, retry_after = server._next_fault()
            if mode == "unavailable":
                self._answer(503, {"error": {"message": "model loading"}}, {"Retry-After": retry_after})
                return
            if mode == "refuse":
                self._answer(401, {"error": {"message": "invalid api key"}})
                return
            if mode == "hang":
                server._stop.wait(60)
                return
            try:
                request = json.loads(body)
                texts = request["input"]
                texts = [texts] if isinstance(texts, str) else list(texts)
                if not all(isinstance(t, str) for t in texts):
                    raise TypeError("input must be strings")
            except (ValueError, KeyError, TypeError) as exc:
                self._answer(400, {"error": {"message": f"bad request: {exc}"}})
                return
            if mode == "garbage":
                self._answer(200, b'{"data": "the model is warming up"}')
                return
            vectors = server.embedder.embed_sync(texts)
            rows = [
                {"object": "embedding", "index": i, "embedding": [float(x) for x in vector]}
                for i, vector in enumerate(vectors)
            ]
            if mode == "short":
                rows = rows[:-1]
            # Answer in reverse order: a client must place rows by their index, not by position.
            self._answer(
                200,
                {
                    "object": "list",
                    "model": request.get("model", MODEL_NAME),
                    "data": rows[::-1],
                    "usage": {"prompt_tokens": 0, "total_tokens": 0},
                },
            )

    return Handler


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        return None  # a client that timed out and hung up is expected in fault tests


@contextmanager
def serve(embedder: LocalEmbedder, *, key: str | None = None, port: int = 0) -> Iterator[EmbeddingsServer]:
    """Serve on 127.0.0.1 in a background thread until the block ends."""
    state = EmbeddingsServer(embedder, key)
    httpd = _QuietServer(("127.0.0.1", port), _handler(state))
    httpd.daemon_threads = True
    state.url = f"http://127.0.0.1:{httpd.server_address[1]}"
    thread = threading.Thread(target=httpd.serve_forever, name="embeddings-server", daemon=True)
    thread.start()
    try:
        yield state
    finally:
        state._stop.set()
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8081)
    parser.add_argument("--key", default=None)
    args = parser.parse_args()
    with serve(LocalEmbedder(), key=args.key, port=args.port) as server:
        print(f"serving {server.url}/v1/embeddings (model {MODEL_NAME})", flush=True)
        threading.Event().wait()


if __name__ == "__main__":
    main()
