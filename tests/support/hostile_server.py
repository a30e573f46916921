"""A real HTTP server on 127.0.0.1 that answers every request the same hostile way, for fault tests.

Why one is written here: the real Hindsight server and the LLM stub answer like good servers; these
faults come from a misconfigured proxy or a hostile host, and they must cross a real socket (httpx's
own timeouts and redirect handling are part of what is tested).

:class:`HostileServer` answers each GET, POST and HEAD with the :class:`Answer` set on it:
- ``Answer.echo()``: 400 with a plain-text body that echoes the request's Authorization header where a
  500-character cut splits it, then again whole and in its repr;
- ``Answer.redirect(location)``: a 3xx to ``location``, the body repeating it;
- ``Answer(trickle_s=...)``: the body sent one byte every ``trickle_s`` seconds, so no single read
  waits long but the whole answer takes ``len(body) * trickle_s``.
``{auth}`` in a location or body is replaced with the request's Authorization header, URL-quoted
(``{auth_raw}``: as sent). Every request's method, path and headers are kept in :attr:`requests`.
"""

from __future__ import annotations

import http.server
import threading
import time
import urllib.parse
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Answer:
    status: int = 200
    body: str = ""
    headers: tuple[tuple[str, str], ...] = ()
    content_type: str = "application/json"
    trickle_s: float = 0.0
    echo_auth: bool = False

    @classmethod
    def echo(cls) -> Answer:
        return cls(status=400, content_type="text/plain", echo_auth=True)

    @classmethod
    def redirect(cls, location: str, status: int = 302) -> Answer:
        return cls(
            status=status,
            body=f"Found. Redirecting to {location}",
            headers=(("Location", location),),
            content_type="text/plain",
        )


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]


@dataclass
class HostileServer:
    answer: Answer = field(default_factory=Answer.echo)
    requests: list[Seen] = field(default_factory=list)

    def __post_init__(self) -> None:
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                if length:
                    self.rfile.read(length)
                server.requests.append(Seen(self.command, self.path, dict(self.headers.items())))
                answer = server.answer
                auth = self.headers.get("Authorization", "")
                quoted = urllib.parse.quote(auth, safe="")

                def fill(text: str) -> str:
                    return text.replace("{auth}", quoted).replace("{auth_raw}", auth)

                if answer.echo_auth:
                    payload = ("x" * 480 + " " + auth + f" you sent {auth!r}").encode()
                else:
                    payload = fill(answer.body).encode()
                self.send_response(answer.status)
                self.send_header("Content-Type", answer.content_type)
                self.send_header("Content-Length", str(len(payload)))
                for name, value in answer.headers:
                    self.send_header(name, fill(value))
                self.end_headers()
                if self.command == "HEAD":
                    return
                try:
                    if answer.trickle_s > 0:
                        for i in range(len(payload)):
                            self.wfile.write(payload[i : i + 1])
                            self.wfile.flush()
                            time.sleep(answer.trickle_s)
                    else:
                        self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            do_GET = do_POST = do_HEAD = do_PUT = do_PATCH = do_DELETE = _answer

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
