"""A real HTTP server in front of a control plane that notes the credential of every request.

It listens on a free port of 127.0.0.1, speaks kept-alive HTTP/1.1 as the control
plane does, passes each request on to the control plane behind it and its answer
back, and keeps, in order, the method, the path and the `Authorization` header of
each request (None when there was none). The control plane's own checks of
credentials are not needed for that: this sees what a client sends.
"""

from __future__ import annotations

import http.client
import http.server
import json
import threading
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Seen:
    """One request as it arrived."""

    method: str
    path: str
    authorization: str | None


class _Forward(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    recorder: Recorder

    def _pass(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        self.recorder.note(Seen(self.command, self.path, self.headers.get("Authorization")))
        upstream = http.client.HTTPConnection("127.0.0.1", self.recorder.upstream, timeout=30)
        try:
            sent = {"Content-Type": self.headers.get("Content-Type", "application/json")}
            upstream.request(self.command, self.path, body, sent)
            answer = upstream.getresponse()
            data = answer.read()
        finally:
            upstream.close()
        if self.recorder.echo and answer.status >= 400:
            data = echoed(data, self.headers.get("Authorization"))
        self.send_response(answer.status)
        self.send_header("Content-Type", answer.getheader("Content-Type", "application/json"))
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self._pass()

    def do_POST(self) -> None:
        self._pass()

    def do_PUT(self) -> None:
        self._pass()

    def log_message(self, format: str, *args: Any) -> None:
        return


def echoed(refusal: bytes, authorization: str | None) -> bytes:
    """A refusal whose sentence repeats the request's `Authorization`, as a careless proxy's
    may."""
    body = json.loads(refusal)
    body["error"] += f" (the request had Authorization: {authorization})"
    return json.dumps(body).encode()


class Recorder:
    """The server; `url` is its address, `seen` the requests so far. With `echo`, each
    refusal's sentence repeats the `Authorization` that came with its request."""

    def __init__(self, upstream: int, *, echo: bool = False) -> None:
        self.upstream = upstream
        self.echo = echo
        self.seen: list[Seen] = []
        self._lock = threading.Lock()
        handler = type("Handler", (_Forward,), {"recorder": self})
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def note(self, seen: Seen) -> None:
        with self._lock:
            self.seen.append(seen)

    def requests(self) -> list[Seen]:
        with self._lock:
            return list(self.seen)

    def authorizations(self) -> set[str | None]:
        """Every `Authorization` header that arrived, None for a request without one."""
        return {seen.authorization for seen in self.requests()}

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


#: A secret that the tests give the clients, and look for where it must not be.
SECRET = "st-8f3Kq9Lw2Xv7.Rn5_Tz1~A+b/c="
#: The header that carries it.
BEARER = f"Bearer {SECRET}"
