"""A real HTTP server on 127.0.0.1 that takes Hindsight's retain requests and keeps every item sent,
for the turn writer's tests: a server that is down, busy, or slow, switched while a test runs.

Hindsight cannot be told to go down for 30 s and come back, nor to answer 503 on demand; this server
can. :meth:`RetainSink.down` stops listening (connections are refused, as from a stopped server) and
:meth:`RetainSink.up` listens again on the same port; ``status`` other than 200 answers every request
with it (and ``Retry-After: 1``); ``delay_s`` holds each answer. Each accepted item is recorded as
sent, with no upsert of its own, so a test sees every copy a client sent, in the order they arrived.
"""

from __future__ import annotations

import http.server
import json
import re
import threading
import time
from dataclasses import dataclass, field
from typing import Any

_RETAIN = re.compile(r"^/v1/default/banks/([^/]+)/memories$")


@dataclass(frozen=True)
class Item:
    bank_id: str
    content: str
    tags: tuple[str, ...]
    document_id: str | None
    timestamp: str | None


@dataclass
class RetainSink:
    status: int = 200
    delay_s: float = 0.0
    items: list[Item] = field(default_factory=list)
    #: Requests answered with a status other than 200.
    refused: int = 0

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self.port = 0
        self._httpd: http.server.ThreadingHTTPServer | None = None
        self.up()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def up(self) -> None:
        """Listen (again, on the same port once it had one)."""
        sink = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if sink.delay_s:
                    time.sleep(sink.delay_s)
                match = _RETAIN.match(self.path)
                status = sink.status if match else 404
                if status != 200:
                    with sink._lock:
                        sink.refused += 1
                    self._send(status, {"detail": "busy" if match else "not found"}, retry_after=True)
                    return
                assert match is not None
                payload: dict[str, Any] = json.loads(body)
                bank = match.group(1)
                with sink._lock:
                    for raw in payload["items"]:
                        sink.items.append(
                            Item(
                                bank,
                                raw["content"],
                                tuple(raw.get("tags", ())),
                                raw.get("document_id"),
                                raw.get("timestamp"),
                            )
                        )
                count = len(payload["items"])
                self._send(200, {"success": True, "bank_id": bank, "items_count": count, "async": False})

            def _send(self, status: int, doc: dict[str, Any], *, retry_after: bool = False) -> None:
                data = json.dumps(doc).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                if retry_after:
                    self.send_header("Retry-After", "1")
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        httpd = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        httpd.daemon_threads = True
        self.port = httpd.server_address[1]
        self._httpd = httpd
        threading.Thread(target=httpd.serve_forever, daemon=True).start()

    def down(self) -> None:
        """Stop listening: a connection is refused, as from a server that is not running."""
        httpd, self._httpd = self._httpd, None
        if httpd is not None:
            httpd.shutdown()
            httpd.server_close()

    def contents(self) -> list[str]:
        with self._lock:
            return [item.content for item in self.items]

    def close(self) -> None:
        self.down()
