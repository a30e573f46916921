"""A TCP forwarder on 127.0.0.1 that a test can cut and mend: the fault of a database that goes
away (a restart, a partition) while its clients stay up, which a real server cannot be told to do
for a while and then undo.

Between cut and mend, every open connection is closed and a new one is accepted and closed at
once, as a client sees a server that is gone. Everything else is passed on byte for byte.
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import threading
from collections.abc import Iterator

__all__ = ["TcpCut", "tcp_cut"]


class TcpCut:
    """Forwards ``127.0.0.1:<port>`` to ``target``; :meth:`cut` and :meth:`mend` take it away and back."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._pairs: list[tuple[socket.socket, socket.socket]] = []
        self._cut = False
        self._stop = False
        self.refused = 0  # connections accepted and closed while cut
        self._thread = threading.Thread(target=self._serve, name="tcp-cut", daemon=True)
        self._thread.start()

    def cut(self) -> None:
        """Close every connection, and every new one until :meth:`mend`."""
        with self._lock:
            self._cut = True
            pairs, self._pairs = self._pairs, []
        for a, b in pairs:
            for s in (a, b):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
                s.close()

    def mend(self) -> None:
        with self._lock:
            self._cut = False

    def close(self) -> None:
        self._stop = True
        self.cut()
        self._listener.close()
        self._thread.join(timeout=5)

    def _serve(self) -> None:
        self._listener.settimeout(0.1)
        while not self._stop:
            try:
                client, _ = self._listener.accept()
            except (TimeoutError, OSError):
                continue
            with self._lock:
                cut = self._cut
            if cut:
                self.refused += 1
                client.close()
                continue
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._pairs.append((client, upstream))
            threading.Thread(target=self._pump, args=(client, upstream), daemon=True).start()

    def _pump(self, a: socket.socket, b: socket.socket) -> None:
        sel = selectors.DefaultSelector()
        try:
            sel.register(a, selectors.EVENT_READ, b)
            sel.register(b, selectors.EVENT_READ, a)
            while True:
                for key, _ in sel.select(timeout=0.5):
                    data = key.fileobj.recv(65536)  # type: ignore[union-attr]
                    if not data:
                        return
                    key.data.sendall(data)
        except (OSError, ValueError):
            return
        finally:
            sel.close()
            for s in (a, b):
                s.close()


@contextlib.contextmanager
def tcp_cut(host: str, port: int) -> Iterator[TcpCut]:
    proxy = TcpCut((host, port))
    try:
        yield proxy
    finally:
        proxy.close()
