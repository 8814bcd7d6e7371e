"""A fake control plane: a real HTTP server on a real port that answers as a test says.

It answers `GET /health` and `GET /workflow` with the graph it is given, each claim
with the next of its scripted answers (then 204: no task), each heartbeat with the next
of its heartbeat answers (then `{"lost": []}`), each report with the next of its report
answers (then `{}`), and notes and memory writes with 204. It keeps every claim,
heartbeat and report it got, with the time it came. An answer is JSON, raw bytes, or
one that misbehaves: an answer that never ends, one that trickles, one whose length
says a terabyte, one held back, or bytes written as they are. The misbehaving ones stop
after a cap, so that a supervisor without limits fails its test and does not take the
machine down with it.
"""

from __future__ import annotations

import http.server
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import msgspec

from stateous.model.graph_file import checksum, load
from stateous.model.names import STARTED

_encode = msgspec.json.encode
#: How much of an answer that never ends is sent at most, in bytes.
ENDLESS_CAP = 256 * 1024 * 1024
_CHUNK = 64 * 1024


class Answer(Protocol):
    """One answer to one request."""

    def send(self, handler: Handler) -> None: ...


@dataclass(frozen=True)
class Raw:
    """Bytes as the body, with a status and a content type."""

    body: bytes
    status: int = 200
    kind: str = "application/json"

    def send(self, handler: Handler) -> None:
        handler.send_response(self.status)
        handler.send_header("Content-Type", self.kind)
        handler.send_header("Content-Length", str(len(self.body)))
        handler.end_headers()
        handler.wfile.write(self.body)


def json(value: Any, status: int = 200) -> Raw:
    """A JSON answer."""
    return Raw(_encode(value), status)


@dataclass(frozen=True)
class Endless:
    """An answer that never ends: blanks as fast as the supervisor reads them (up to a cap)."""

    chunked: bool = False

    def send(self, handler: Handler) -> None:
        handler.close_connection = True
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Connection", "close")
        if self.chunked:
            handler.send_header("Transfer-Encoding", "chunked")
        handler.end_headers()
        piece = b" " * _CHUNK
        if self.chunked:
            piece = f"{_CHUNK:x}\r\n".encode() + piece + b"\r\n"
        sent = 0
        while sent < ENDLESS_CAP and not handler.plane.closing.is_set():
            handler.wfile.write(piece)
            sent += _CHUNK


@dataclass(frozen=True)
class Trickle:
    """An answer that promises 100 kB and sends one byte every `every` seconds."""

    seconds: float = 60.0
    every: float = 0.5

    def send(self, handler: Handler) -> None:
        handler.close_connection = True
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", "100000")
        handler.end_headers()
        handler.wfile.flush()
        deadline = time.monotonic() + self.seconds
        while time.monotonic() < deadline and not handler.plane.closing.wait(self.every):
            handler.wfile.write(b" ")
            handler.wfile.flush()


@dataclass(frozen=True)
class Delayed:
    """An answer sent after `seconds` (or at once when the plane closes), as a control plane
    that holds a request sends it."""

    seconds: float
    then: Raw

    def send(self, handler: Handler) -> None:
        handler.plane.closing.wait(self.seconds)
        self.then.send(handler)


@dataclass(frozen=True)
class Declared:
    """An answer whose Content-Length says a terabyte; it sends a few bytes and closes."""

    def send(self, handler: Handler) -> None:
        handler.close_connection = True
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(10**12))
        handler.end_headers()
        handler.wfile.write(b'{"task": 1')


@dataclass(frozen=True)
class Halved:
    """An answer whose connection breaks halfway through its body, as a cut link leaves it."""

    whole: Raw

    def send(self, handler: Handler) -> None:
        handler.close_connection = True
        handler.send_response(self.whole.status)
        handler.send_header("Content-Type", self.whole.kind)
        handler.send_header("Content-Length", str(len(self.whole.body)))
        handler.end_headers()
        handler.wfile.write(self.whole.body[: len(self.whole.body) // 2])


@dataclass(frozen=True)
class Written:
    """An answer written as it is given, head and body, byte for byte; then the connection
    closes."""

    data: bytes

    def send(self, handler: Handler) -> None:
        handler.close_connection = True
        handler.wfile.write(self.data)


_NOBODY_LOST = json({"lost": []})
_TAKEN = json({})


def grant(task: Any = 2, token: Any = "ORDER-2", **fields: Any) -> dict[str, Any]:
    """A grant of the draft of `token`, as the control plane sends it; `fields` change it."""
    made = {
        "task": task,
        "token": token,
        "state": "draft",
        "visit": 1,
        "attempt": 1,
        "context": {"title": "an order"},
        "memory": {},
        "entered_by": {"name": STARTED},
        "lease": 120,
    }
    made.update(fields)
    return made


def without(name: str) -> dict[str, Any]:
    """A grant of task 1 that lacks the field `name`."""
    made = grant(1, "ORDER-1")
    del made[name]
    return made


def nested(depth: int) -> Raw:
    """A grant of task 1 whose context holds lists nested `depth` levels deep."""
    text = _encode(grant(1, "ORDER-1", context={"deep": "DEEP"}))
    return Raw(text.replace(b'"DEEP"', b"[" * depth + b"]" * depth))


@dataclass
class Seen:
    """What the fake control plane got, in order, with monotonic times."""

    claims: list[float] = field(default_factory=list)
    #: The request id of each claim.
    claim_requests: list[str] = field(default_factory=list)
    heartbeats: list[tuple[float, list[int]]] = field(default_factory=list)
    reports: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    notes: list[tuple[int, dict[str, Any]]] = field(default_factory=list)


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    plane: FakePlane

    def _body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        data = self.rfile.read(length) if length else b""
        return msgspec.json.decode(data) if data else None

    def _empty(self) -> None:
        self.send_response(204)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self) -> None:
        if self.path == "/health":
            json({"workflow": "orders", "checksum": self.plane.checksum}).send(self)
        elif self.path.partition("?")[0] == "/workflow":  # its one graph, whatever is asked
            Raw(self.plane.graph).send(self)
        else:
            json({"error": f"no path {self.path}", "code": "not_found"}, 404).send(self)

    def do_POST(self) -> None:
        body = self._body()
        parts = self.path.strip("/").split("/")
        plane = self.plane
        try:
            if parts == ["tasks", "claim"]:
                plane.seen.claims.append(time.monotonic())
                plane.seen.claim_requests.append(body["request"])
                answer = plane.next("claims", None)
                if answer is None:
                    self._empty()
                else:
                    answer.send(self)
            elif parts == ["tasks", "heartbeat"]:
                plane.seen.heartbeats.append((time.monotonic(), body["tasks"]))
                plane.answer("heartbeats", _NOBODY_LOST).send(self)
            elif parts[-1] == "report":
                plane.seen.reports.append((int(parts[1]), body))
                plane.answer("report_answers", _TAKEN).send(self)
            elif parts[-1] == "note":
                plane.seen.notes.append((int(parts[1]), body))
                self._empty()
            else:
                json({"error": f"no path {self.path}", "code": "not_found"}, 404).send(self)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def do_PUT(self) -> None:
        self._body()
        self._empty()

    def log_message(self, format: str, *args: Any) -> None:
        return


class FakePlane:
    """The fake control plane on a free port of 127.0.0.1, in a thread of its own.

    `claims`, `heartbeats` and `report_answers` are the answers still to give, in order.
    """

    def __init__(
        self,
        graph: Path,
        claims: list[Answer] | None = None,
        heartbeats: list[Answer] | None = None,
        report_answers: list[Answer] | None = None,
    ) -> None:
        self.graph = graph.read_bytes()
        self.checksum = checksum(load(self.graph))
        self.claims = list(claims or [])
        self.heartbeats = list(heartbeats or [])
        self.report_answers = list(report_answers or [])
        self.seen = Seen()
        self.closing = threading.Event()
        self._lock = threading.Lock()
        handler = type("BoundHandler", (Handler,), {"plane": self})
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def next(self, queue: str, default: Answer | None) -> Answer | None:
        """Take the next answer of a queue, or the default when it is empty."""
        with self._lock:
            waiting: list[Answer] = getattr(self, queue)
            return waiting.pop(0) if waiting else default

    def answer(self, queue: str, default: Answer) -> Answer:
        """Take the next answer of a queue that has a default."""
        return self.next(queue, None) or default

    def reported(self, task: int) -> list[dict[str, Any]]:
        """The outcomes of the reports of `task` so far: their bodies, without the `next`
        by which a report asks for the supervisor's next task."""
        return [
            {key: value for key, value in body.items() if key != "next"}
            for number, body in self.seen.reports
            if number == task
        ]

    def close(self) -> None:
        self.closing.set()
        self.server.shutdown()
        self.server.server_close()
