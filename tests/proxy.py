"""A TCP proxy that a test can take down and bring back, for outages of a real server.

While it is down, it closes every connection it carried and every new one at once, as a
server that went away or a network that cut its peers does: the client sees a refused
or reset connection, never one that hangs.
"""

from __future__ import annotations

import contextlib
import socket
import threading


class Proxy:
    """Forward 127.0.0.1:`port` to `upstream` until `down()`; `up()` forwards again."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self._down = False
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                if self._down or self._closed:
                    client.close()
                    continue
            try:
                server = socket.create_connection(self.upstream, timeout=5)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._open |= {client, server}
            for source, sink in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                sink.sendall(data)
        self._drop(source, sink)

    def _drop(self, *ends: socket.socket) -> None:
        with self._lock:
            for end in ends:
                self._open.discard(end)
                with contextlib.suppress(OSError):
                    end.shutdown(socket.SHUT_RDWR)
                end.close()

    def down(self) -> None:
        """Cut every connection and refuse new ones."""
        with self._lock:
            self._down = True
            ends = list(self._open)
        self._drop(*ends)

    def up(self) -> None:
        with self._lock:
            self._down = False

    def close(self) -> None:
        self._closed = True
        self.down()
        self._listener.close()
