"""Raw HTTP/1.1 over a socket, for what `http.client` will not send or cannot show.

Smuggling attempts, broken framing, pipelined requests, clients that never read their
answers, and whether the server closed the connection after answering.
"""

from __future__ import annotations

import select
import socket
import time
from typing import Any, NamedTuple

import msgspec

#: The codes of docs/reference/http.md's table, which every refusal must carry.
DOCUMENTED_CODES = {
    "token_not_found",
    "task_not_found",
    "not_found",
    "method_not_allowed",
    "bad_request",
    "unauthorized",
    "forbidden",
    "invalid_argument",
    "invalid_context",
    "invalid_payload",
    "invalid_token_id",
    "invalid_body",
    "event_not_allowed",
    "token_not_active",
    "child_token",
    "task_not_held",
    "attempt_over",
    "database_busy",
    "not_serving",
    "unexpected",
}


class Reply(NamedTuple):
    """One answer: its status, its headers (lower-case names) and its JSON body or None."""

    status: int
    headers: dict[str, str]
    body: Any


def open_socket(port: int, timeout: float = 5.0) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=timeout)


def request_bytes(
    method: str,
    path: str,
    body: Any = None,
    headers: dict[str, str] | None = None,
    *,
    typed: bool = True,
) -> bytes:
    """A well-formed HTTP/1.1 request; `body` is encoded as JSON. A POST or PUT says
    `Content-Type: application/json`, as our clients do, unless not `typed`."""
    data = b"" if body is None else msgspec.json.encode(body)
    lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1"]
    if typed and method in ("POST", "PUT"):
        lines.append("Content-Type: application/json")
    lines += [f"{name}: {value}" for name, value in (headers or {}).items()]
    if data:
        lines.append(f"Content-Length: {len(data)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + data


def closed_by_server(sock: socket.socket, timeout: float) -> bool:
    """Wait up to `timeout` for the server to end the connection; unread answers are dropped."""
    deadline = time.monotonic() + timeout
    while (left := deadline - time.monotonic()) > 0:
        if select.select([sock], [], [], left)[0]:
            try:
                if not sock.recv(1 << 20):
                    return True
            except ConnectionError:
                return True
    return False


def read_until_closed(sock: socket.socket, timeout: float = 5.0) -> tuple[bytes, bool]:
    """Every byte the server sends within `timeout`, and whether it then closed the connection."""
    deadline = time.monotonic() + timeout
    chunks = []
    while (left := deadline - time.monotonic()) > 0:
        if not select.select([sock], [], [], left)[0]:
            break
        try:
            chunk = sock.recv(1 << 20)
        except ConnectionError:
            return b"".join(chunks), True
        if not chunk:
            return b"".join(chunks), True
        chunks.append(chunk)
    return b"".join(chunks), False


def parse_replies(data: bytes) -> list[Reply]:
    """Split what a server sent into answers; a cut-off last answer is left out."""
    replies = []
    while (end := data.find(b"\r\n\r\n")) >= 0:
        head, data = data[:end].decode("latin-1").split("\r\n"), data[end + 4 :]
        status = int(head[0].split(" ")[1])
        headers = {}
        for line in head[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        length = int(headers.get("content-length", "0"))
        if len(data) < length:
            break
        body, data = data[:length], data[length:]
        replies.append(Reply(status, headers, msgspec.json.decode(body) if body else None))
    return replies


def exchange(port: int, data: bytes, timeout: float = 5.0) -> tuple[list[Reply], bool]:
    """Send `data` on a new connection; the answers, and whether the server then closed it."""
    with open_socket(port) as sock:
        sock.sendall(data)
        received, closed = read_until_closed(sock, timeout)
    return parse_replies(received), closed


def is_refusal(reply: Reply, status: int, code: str) -> bool:
    """Whether `reply` is our JSON refusal with this status and code."""
    return (
        reply.status == status
        and reply.headers.get("content-type") == "application/json"
        and isinstance(reply.body, dict)
        and set(reply.body) == {"error", "code"}
        and reply.body["code"] == code
        and code in DOCUMENTED_CODES
        and bool(reply.body["error"])
    )


def pipelining_without_reading(
    port: int, path: str, connections: int = 8, depth: int = 40
) -> list[socket.socket]:
    """Open `connections` that each send `depth` GETs of `path` at once and never read. Each
    takes at most 64 KiB into its receive buffer, so that what it leaves unread stays on
    the server's side, as it would for a client far away (on loopback the kernel would
    otherwise grow the buffer to tens of MB and take whole answers off the server)."""
    request = request_bytes("GET", path)
    opened = []
    for _ in range(connections):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
        sock.settimeout(5.0)
        sock.connect(("127.0.0.1", port))
        sock.sendall(request * depth)
        opened.append(sock)
    return opened


def big_token_body(token: str) -> dict[str, Any]:
    """The start of an `orders` token whose context is about 1 MB."""
    return {"token": token, "context": {"title": "x" * 1_000_000}}
