"""Experiment: what a request would cost `serve` behind an HTTP edge with no hand-offs.

Run: .venv/bin/python bench/bench_edge.py [--seconds 5] [--runs 2]
Needs `wrk`. Serves the workflow of bench_serve.py on a fresh SQLite file in three ways,
alternating: `stateous serve` (waitress: a loop thread and a pool of request threads;
since the loop serves the writes itself, once a turn), and the same WSGI app, the same
engine and store, behind a loop of one thread written here (selectors; it reads a
request, calls the app and sends the answer in that thread, so every write commits alone,
with its own sync). Prints, per
phase (GET /health, starts, fires, claim-and-report cycles; 8 keep-alive clients), the
rate, p99, the server's CPU time and context switches per request.

The loop here is no server: no limits, timeouts, streams or waiting claims, and no
HTTP beyond what wrk sends. It tells how much of a request's cost is the hand-offs
between threads (bench/README.md, "Where a request's time goes under load").

A third way, "a commit a turn", serves from the same loop but commits once a turn: the
first write of a turn of the loop opens a transaction, each write runs in a savepoint of
its own, and the answers of the turn are sent after its one commit, so that the writes of
several clients share a sync as the group commit of `serve` makes them do, through the
store's own unit of work (`with store.turn()`), which `serve` now uses.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import io
import selectors
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench_serve import (  # noqa: E402
    CYCLE_LUA,
    FIRE_LUA,
    START_LUA,
    post,
    requests_done,
    spent,
    used_since,
    workflow,
    wrk,
)

from stateous.compiler.compile import compile_workflow  # noqa: E402
from stateous.control.store.sqlite import SqliteStore  # noqa: E402
from stateous.model.graph_file import dump  # noqa: E402

EDGES = ("waitress", "one thread", "a commit a turn")

App = Callable[[dict[str, Any], Callable[..., Any]], Any]


def answer(app: App, port: int, request: bytes, body: bytes) -> bytes:
    """Call the WSGI app for one request (its head and body) and return the whole answer."""
    lines = request.decode("latin-1").split("\r\n")
    method, target, _ = lines[0].split(" ", 2)
    path, _, query = target.partition("?")
    environ: dict[str, Any] = {
        "REQUEST_METHOD": method,
        "PATH_INFO": path,
        "QUERY_STRING": query,
        "SERVER_NAME": "127.0.0.1",
        "SERVER_PORT": str(port),
        "SERVER_PROTOCOL": "HTTP/1.1",
        "REMOTE_ADDR": "127.0.0.1",
        "CONTENT_LENGTH": str(len(body)),
        "wsgi.input": io.BytesIO(body),
        "wsgi.errors": sys.stderr,
        "wsgi.url_scheme": "http",
        "wsgi.version": (1, 0),
        "wsgi.multithread": False,
        "wsgi.multiprocess": False,
        "wsgi.run_once": False,
    }
    for line in lines[1:]:
        name, _, value = line.partition(":")
        key = name.strip().upper().replace("-", "_")
        if key == "CONTENT_TYPE":
            environ[key] = value.strip()
        elif key != "CONTENT_LENGTH":
            environ["HTTP_" + key] = value.strip()
    status: list[Any] = []
    content = b"".join(app(environ, lambda *given: status.extend(given[:2])))
    head = [f"HTTP/1.1 {status[0]}"]
    head += [f"{name}: {value}" for name, value in status[1] if name.lower() != "content-length"]
    head.append(f"Content-Length: {len(content)}\r\n\r\n")
    return "\r\n".join(head).encode("latin-1") + content


def complete(buffer: bytes) -> tuple[bytes, bytes, bytes] | None:
    """The first whole request in `buffer`: its head, its body and what follows; or None."""
    head, found, rest = buffer.partition(b"\r\n\r\n")
    if not found:
        return None
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    if len(rest) < length:
        return None
    return head, rest[:length], rest[length:]


def serve_one_thread(graph: str, db: str, port: int, per_turn: bool) -> None:
    """Serve the control plane's app from this thread alone, until killed; with
    `per_turn`, the writes of a turn of the loop commit together before it answers."""
    from stateous.control.serve import ControlPlane

    plane = ControlPlane(graph, db, f"127.0.0.1:{port}", 120.0, no_auth=True)
    store = plane.store
    assert isinstance(store, SqliteStore)
    app = plane._app()
    listener = plane.listener
    listener.listen(128)
    listener.setblocking(False)
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ)
    buffers: dict[socket.socket, bytes] = {}
    while True:
        answers: list[tuple[socket.socket, bytes]] = []
        ready = selector.select()
        with store.turn() if per_turn else contextlib.nullcontext():
            read(ready, listener, selector, buffers, answers, app, port)
        for connection, whole in answers:
            connection.sendall(whole)


def read(
    ready: list[tuple[selectors.SelectorKey, int]],
    listener: socket.socket,
    selector: selectors.BaseSelector,
    buffers: dict[socket.socket, bytes],
    answers: list[tuple[socket.socket, bytes]],
    app: Any,
    port: int,
) -> None:
    """Read what the ready sockets bring and answer each whole request into `answers`."""
    for key, _ in ready:
        if key.fileobj is listener:
            connection, _ = listener.accept()
            selector.register(connection, selectors.EVENT_READ)
            buffers[connection] = b""
            continue
        connection = key.fileobj  # type: ignore[assignment]
        try:
            data = connection.recv(65536)
        except OSError:
            data = b""
        if not data:
            selector.unregister(connection)
            connection.close()
            del buffers[connection]
            continue
        buffer = buffers[connection] + data
        while (found := complete(buffer)) is not None:
            head, body, buffer = found
            answers.append((connection, answer(app, port, head, body)))
        buffers[connection] = buffer


def start(edge: str, graph: Path, database: Path, port: int) -> subprocess.Popen[bytes]:
    """Start `serve` or the loop of one thread on a fresh database; return once it answers."""
    db = f"sqlite:///{database}"
    if edge == "waitress":
        argv = [sys.executable, "-m", "stateous", "serve", str(graph), "--db", db]
        argv += ["--listen", f"127.0.0.1:{port}"]
    else:
        argv = [sys.executable, __file__, "--one-thread", str(graph), db, str(port)]
        argv += ["--per-turn"] if edge == EDGES[2] else []
    server = subprocess.Popen(argv, cwd=ROOT, stderr=subprocess.DEVNULL)
    while True:
        try:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
            connection.request("GET", "/health")
            if connection.getresponse().status == 200:
                return server
        except OSError:
            time.sleep(0.01)


def phases(server: subprocess.Popen[bytes], port: int, seconds: float) -> dict[str, str]:
    """Run the four phases against a started server; one line of figures for each."""
    url = f"http://127.0.0.1:{port}"
    lines = {}

    def run(name: str, path: str, script: str, threads: int = 2) -> None:
        before = spent(server.pid)
        result = wrk(url + path, script, seconds, threads=threads)
        cpu, switches = used_since(server.pid, before)
        requests = max(1, requests_done(result))
        rate = result["rate"] if result["reports"] is None else result["reports"] / seconds
        lines[name] = (
            f"{rate:7.0f}/s  p99 {result['p99']:5.1f} ms  CPU {cpu * 1000 / requests:.3f} ms"
            f"  {switches / requests:4.1f} switches a request"
        )

    run("health", "/health", "")
    run("starts", "", START_LUA)
    for index in range(1000):
        post(port, "/tokens", {"token": f"F-{index}", "context": {"title": "x"}})
    run("fires", "", FIRE_LUA)
    run("cycles", "", CYCLE_LUA, threads=8)
    return lines


def main() -> None:
    if sys.argv[1:2] == ["--one-thread"]:
        serve_one_thread(sys.argv[2], sys.argv[3], int(sys.argv[4]), "--per-turn" in sys.argv)
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=5)
    parser.add_argument("--runs", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="stateous-edge-") as scratch:
        graph = Path(scratch, "bench.json")
        graph.write_bytes(dump(compile_workflow(workflow())))
        for run in range(1, args.runs + 1):
            for number, edge in enumerate(EDGES):
                database = Path(scratch, f"run-{run}-{number}.db")
                port = 18900 + number
                server = start(edge, graph, database, port)
                try:
                    for name, line in phases(server, port, args.seconds).items():
                        print(f"run {run}, {edge:15} {name:7} {line}")
                finally:
                    server.send_signal(signal.SIGTERM)
                    server.wait(timeout=30)


if __name__ == "__main__":
    main()
