"""Benchmark: clients that ask for a large listing and never read it, against `stateous serve`.

Run: .venv/bin/python bench/bench_unread.py [--connections 40] [--tokens 1000]
     [--context 90000] [--seconds 10] [--code CHECKOUT]
Starts `serve` on a fresh SQLite file, starts `--tokens` tokens whose contexts hold `--context`
bytes each (the page `GET /tokens?limit=1000` is then about tokens x context bytes), then
opens `--connections` connections that each ask for that page and never read. For `--seconds`
it asks for `/health` every 0.1 s on a connection of its own and samples the server: it prints
the resident memory (VmRSS) before and at its peak, the most bytes of temporary files that the
server held open after unlinking them, how long `/health` took (median and slowest), and how
many of the connections the server closed (its log lines). `--code` runs `serve` from another
checkout's code (e.g. one made with `git archive`), to compare.
Target: `/health` under 1 s throughout, no temporary file, and the resident memory bounded by
what the request threads build, not by the number of connections.
"""

from __future__ import annotations

import argparse
import http.client
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import msgspec  # noqa: E402

from stateous import END, START, Workflow  # noqa: E402
from stateous.compiler.compile import compile_workflow  # noqa: E402
from stateous.model.graph_file import dump  # noqa: E402

PAGE = b"GET /tokens?limit=1000 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"


class Item(msgspec.Struct):
    title: str


def workflow() -> Workflow:
    """One state, where every token stays."""
    flow = Workflow("unread", context=Item)
    draft = flow.state("draft")
    flow.transition(START, draft)
    flow.transition(draft, END, on=flow.event("done"))
    return flow


def start_serve(folder: Path, code: Path) -> tuple[subprocess.Popen[bytes], int]:
    """Start `serve` from `code` on a free port; answer the process and its port."""
    graph = folder / "unread.json"
    graph.write_bytes(dump(compile_workflow(workflow())))
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen(
        [
            *(sys.executable, "-m", "stateous", "serve", str(graph)),
            *("--listen", f"127.0.0.1:{port}", "--db", f"sqlite:///{folder / 'unread.db'}"),
        ],
        cwd=code,
        env={**os.environ, "PYTHONPATH": str(code)},
        stderr=(folder / "serve.log").open("wb"),
    )
    deadline = time.monotonic() + 20
    while True:
        try:
            health(http.client.HTTPConnection("127.0.0.1", port, timeout=5))
            return server, port
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def health(connection: http.client.HTTPConnection) -> float:
    """Seconds that `GET /health` took on `connection`."""
    began = time.perf_counter()
    connection.request("GET", "/health")
    response = connection.getresponse()
    response.read()
    assert response.status == 200, response.status
    return time.perf_counter() - began


def fill(port: int, tokens: int, context: int) -> None:
    """Start `tokens` tokens with contexts of `context` bytes, on one kept-alive connection."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    for number in range(tokens):
        body = msgspec.json.encode({"token": f"BIG-{number}", "context": {"title": "x" * context}})
        connection.request("POST", "/tokens", body=body)
        response = connection.getresponse()
        response.read()
        assert response.status == 201, response.status
    connection.close()


def resident(pid: int) -> int:
    """VmRSS of process `pid`, in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def unlinked_bytes(pid: int) -> int:
    """The bytes of the files that `pid` holds open after they were unlinked."""
    total = 0
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            if os.readlink(fd).endswith(" (deleted)"):
                total += os.stat(fd).st_size
        except FileNotFoundError:
            continue
    return total


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--connections", type=int, default=40)
    parser.add_argument("--tokens", type=int, default=1000)
    parser.add_argument("--context", type=int, default=90_000, help="bytes of each context")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--code", type=Path, default=ROOT, help="the checkout to serve from")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="stateous-unread-"))
    server, port = start_serve(folder, args.code.resolve())
    stuck: list[socket.socket] = []
    try:
        fill(port, args.tokens, args.context)
        before = resident(server.pid)
        probe = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        for _ in range(args.connections):
            sock = socket.create_connection(("127.0.0.1", port))
            sock.sendall(PAGE)
            stuck.append(sock)
        peak, spilled, waits = before, 0, []
        deadline = time.monotonic() + args.seconds
        while time.monotonic() < deadline:
            waits.append(health(probe))
            peak = max(peak, resident(server.pid))
            spilled = max(spilled, unlinked_bytes(server.pid))
            time.sleep(0.1)
        mib = 1024 * 1024
        print(f"page: {args.tokens * args.context / 1e6:.0f} MB, {args.connections} connections")
        print(f"RSS before: {before / mib:.0f} MiB, peak: {peak / mib:.0f} MiB")
        print(f"temporary files (unlinked, open), most: {spilled / mib:.0f} MiB")
        print(
            f"/health: median {statistics.median(waits) * 1000:.0f} ms, "
            f"slowest {max(waits) * 1000:.0f} ms, {len(waits)} asked"
        )
        shut = (folder / "serve.log").read_text().count("closed a connection")
        print(f"connections closed by the server: {shut} of {args.connections}")
    finally:
        for sock in stuck:
            sock.close()
        server.terminate()
        server.wait(timeout=30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
