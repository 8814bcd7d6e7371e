"""A TCP proxy for the chaos run that cuts HTTP/1.1 requests at random points.

Each client (a supervisor, or the run's own driver) gets a port of its own, so that
the run can drop every connection of a supervisor it has just killed; with a standby,
each client gets one port per control plane, as it has one URL per control plane. The
proxy reads
each request whole (head and a body framed by Content-Length, as Stateous's clients
send them), and for a fraction of the requests cuts the connection at one of four
points: before anything is sent on, halfway through the request, after the request
has gone and its answer came back but before the answer is passed on, or halfway
through the answer. The other requests and answers are passed on unchanged.
"""

from __future__ import annotations

import contextlib
import random
import socket
import threading
from collections import Counter
from typing import BinaryIO

#: Where a request can be cut, in the order they happen.
CUT_POINTS = ("before sending", "mid-request", "after the request", "mid-answer")


def read_message(stream: BinaryIO) -> bytes:
    """One whole HTTP/1.1 message (a request or an answer) from `stream`; b"" at its end."""
    first = stream.readline()
    if not first:
        return b""
    raw = [first]
    length = 0
    while True:
        line = stream.readline()
        if not line:
            raise ConnectionError("the message ended inside its head")
        raw.append(line)
        if line in (b"\r\n", b"\n"):
            break
        name, _, value = line.decode("latin-1").partition(":")
        if name.strip().lower() == "content-length":
            length = int(value.strip())
    body = stream.read(length) if length else b""
    if len(body) < length:
        raise ConnectionError("the message ended inside its body")
    return b"".join(raw) + body


def _close(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    sock.close()


class Proxy:
    """Listens on ports of each client and forwards to a control plane (`upstream` by default)."""

    def __init__(self, upstream: int, cut: float, seed: int) -> None:
        self.upstream = upstream
        self.cut = cut
        self._random = random.Random(seed)
        self._lock = threading.Lock()
        self._open: dict[str, set[socket.socket]] = {}
        self._listeners: list[socket.socket] = []
        #: Requests seen, and the cuts among them by point.
        self.requests = 0
        self.cuts: Counter[str] = Counter()

    def listen(self, client: str, upstream: int | None = None) -> int:
        """Open a port for `client` to the control plane at `upstream`; return it."""
        listener = socket.create_server(("127.0.0.1", 0))
        self._listeners.append(listener)
        self._open.setdefault(client, set())
        target = self.upstream if upstream is None else upstream
        threading.Thread(
            target=self._accept,
            args=(listener, client, target),
            name=f"proxy-{client}-{target}",
            daemon=True,
        ).start()
        return int(listener.getsockname()[1])

    def drop(self, client: str) -> None:
        """Close every connection of `client` now, as its death would."""
        with self._lock:
            held = list(self._open[client])
        for sock in held:
            _close(sock)

    def close(self) -> None:
        for listener in self._listeners:
            listener.close()
        for client in list(self._open):
            self.drop(client)

    def _accept(self, listener: socket.socket, client: str, upstream: int) -> None:
        while True:
            try:
                sock, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(sock, client, upstream), daemon=True).start()

    def _decide(self) -> str | None:
        """The point at which to cut the next request, or None to pass it on."""
        with self._lock:
            self.requests += 1
            if self.cut <= 0 or self._random.random() >= self.cut:
                return None
            point = self._random.choice(CUT_POINTS)
            self.cuts[point] += 1
            return point

    def _serve(self, sock: socket.socket, client: str, port: int) -> None:
        try:
            upstream = socket.create_connection(("127.0.0.1", port), timeout=30)
        except OSError:
            _close(sock)  # the control plane is down: the client sees a refused connection
            return
        pair = {sock, upstream}
        with self._lock:
            self._open[client] |= pair
        requests, answers = sock.makefile("rb"), upstream.makefile("rb")
        try:
            self._forward(sock, upstream, requests, answers)
        except (OSError, ConnectionError, ValueError):
            pass
        finally:
            with self._lock:
                self._open[client] -= pair
            requests.close()
            answers.close()
            _close(sock)
            _close(upstream)

    def _forward(
        self, sock: socket.socket, upstream: socket.socket, requests: BinaryIO, answers: BinaryIO
    ) -> None:
        while True:
            request = read_message(requests)
            if not request:
                return
            point = self._decide()
            if point == "before sending":
                return
            if point == "mid-request":
                upstream.sendall(request[: len(request) // 2])
                return
            upstream.sendall(request)
            answer = read_message(answers)
            if not answer or point == "after the request":
                return
            if point == "mid-answer":
                sock.sendall(answer[: len(answer) // 2])
                return
            sock.sendall(answer)
