"""Benchmark: how many slow clients it takes to delay a fire, and a heartbeat, on `stateous serve`.

Run: .venv/bin/python bench/bench_slow_clients.py [--steps 0,100,200,...] [--every 2]
     [--delay 0.5] [-- SERVE OPTIONS, e.g. --connection-limit 2000]
Starts `serve` on a fresh SQLite file, then opens slow clients in steps, a third of each kind:
headers sent one byte every `--every` seconds, a body sent likewise after whole headers, and
forty pipelined GETs of a 100 kB token whose answers are never read. A client that the server
closes (its channel timeout) is opened again, as a patient attacker would. At each step it times
five fires and five heartbeats, each on a kept-alive connection and on a new one; a request is
delayed when it takes longer than `--delay` seconds or gets no answer in 5 s. It prints, for
each way, the fewest slow clients that delayed it.
Target: more than 200 slow clients before any fire or heartbeat is delayed, on a new connection
as on a kept-alive one.
"""

from __future__ import annotations

import argparse
import http.client
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import msgspec  # noqa: E402

from stateous import END, START, Workflow  # noqa: E402
from stateous.compiler.compile import compile_workflow  # noqa: E402
from stateous.model.graph_file import dump  # noqa: E402

TARGET = 200
KINDS = ("headers", "body", "unread")
ANSWER_TIMEOUT = 5.0


class Item(msgspec.Struct):
    title: str


def workflow() -> Workflow:
    """One state that `remind` re-enters, so that fires never run out, and `done` ends."""
    flow = Workflow("slow", context=Item)
    draft = flow.state("draft")
    remind = flow.event("remind")
    flow.transition(START, draft)
    flow.transition(draft, draft, on=remind)
    flow.transition(draft, END, on=flow.event("done"))
    return flow


#: The header of every POST (the control plane refuses one without it).
JSON_TYPE = {"Content-Type": "application/json"}


def request(port: int, method: str, path: str, body: object = None) -> object:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=ANSWER_TIMEOUT)
    try:
        data = None if body is None else msgspec.json.encode(body)
        connection.request(method, path, body=data, headers=JSON_TYPE)
        response = connection.getresponse()
        raw = response.read()
        assert 200 <= response.status < 300, (method, path, response.status, raw[:200])
        return msgspec.json.decode(raw) if raw else None
    finally:
        connection.close()


class Crowd:
    """The slow clients, driven by one thread: each trickler sends a byte every `every` s."""

    def __init__(self, port: int, every: float) -> None:
        self.port = port
        self.every = every
        self.clients: dict[socket.socket, str] = {}
        self.lock = threading.Lock()
        self.reopened = 0
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._drive, daemon=True)
        self.thread.start()

    def _open(self, kind: str) -> socket.socket:
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.settimeout(ANSWER_TIMEOUT)
        sock.connect(("127.0.0.1", self.port))
        if kind == "headers":
            sock.sendall(b"POST /tokens HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
        elif kind == "body":
            sock.sendall(
                b"POST /tokens HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 9000\r\n\r\n"
            )
        else:
            sock.sendall(b"GET /tokens/BIG-1 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" * 40)
        sock.setblocking(False)
        return sock

    def grow(self, count: int) -> None:
        """Open clients until there are `count`, a third of each kind."""
        while len(self.clients) < count:
            kind = KINDS[len(self.clients) % len(KINDS)]
            sock = self._open(kind)
            with self.lock:
                self.clients[sock] = kind

    def _drive(self) -> None:
        while not self.stopping.wait(self.every):
            with self.lock:
                clients = list(self.clients.items())
            for sock, kind in clients:
                if self._alive(sock, kind):
                    continue
                sock.close()
                with self.lock:
                    del self.clients[sock]
                    self.reopened += 1
                try:
                    fresh = self._open(kind)
                except OSError:
                    continue
                with self.lock:
                    self.clients[fresh] = kind

    @staticmethod
    def _alive(sock: socket.socket, kind: str) -> bool:
        """Send the next byte of a trickler; tell whether the server still holds the client."""
        try:
            if kind != "unread":
                sock.send(b"a")
                return True
            # A closed connection reads as EOF; a live one has nothing for a client that
            # never reads, so peek.
            return sock.recv(1, socket.MSG_PEEK) != b""
        except BlockingIOError:
            return True
        except OSError:
            return False

    def close(self) -> None:
        self.stopping.set()
        self.thread.join()
        for sock in self.clients:
            sock.close()


def timed(call: object) -> float:
    """Seconds that `call()` took, or infinity when it failed or timed out."""
    began = time.perf_counter()
    try:
        call()  # type: ignore[operator]
    except (OSError, http.client.HTTPException, AssertionError):
        return float("inf")
    return time.perf_counter() - began


class Probe:
    """Fires and heartbeats, on a kept-alive connection and on a new one each time."""

    def __init__(self, port: int, task: int) -> None:
        self.port = port
        self.task = task
        self.kept = http.client.HTTPConnection("127.0.0.1", port, timeout=ANSWER_TIMEOUT)
        self.kept.connect()

    def _kept(self, method: str, path: str, body: object = None) -> None:
        data = None if body is None else msgspec.json.encode(body)
        self.kept.request(method, path, body=data, headers=JSON_TYPE)
        response = self.kept.getresponse()
        response.read()
        assert response.status == 200, response.status

    def ways(self) -> dict[str, object]:
        fire = ("POST", "/tokens/FIRE-1/events/remind")
        beat = ("POST", "/tasks/heartbeat", {"supervisor": "bench", "tasks": [self.task]})
        return {
            "fire, kept-alive": lambda: self._kept(*fire),
            "fire, new connection": lambda: request(self.port, *fire),
            "heartbeat, kept-alive": lambda: self._kept(*beat),
            "heartbeat, new connection": lambda: request(self.port, *beat),
        }

    def worst(self, times: int = 5) -> dict[str, float]:
        """The slowest of `times` tries of each way, in seconds."""
        worst = {}
        for name, call in self.ways().items():
            worst[name] = max(timed(call) for _ in range(times))
            if worst[name] == float("inf") and name.endswith("kept-alive"):
                self.kept.close()
                self.kept = http.client.HTTPConnection(
                    "127.0.0.1", self.port, timeout=ANSWER_TIMEOUT
                )
        return worst


def start_serve(folder: Path, options: list[str]) -> tuple[subprocess.Popen[bytes], int]:
    """Start `serve` on a free port; answer the process and its port."""
    graph = folder / "slow.json"
    graph.write_bytes(dump(compile_workflow(workflow())))
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen(
        [
            *(sys.executable, "-m", "stateous", "serve", str(graph)),
            *("--listen", f"127.0.0.1:{port}", "--db", f"sqlite:///{folder / 'slow.db'}"),
            *options,
        ],
        cwd=ROOT,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 20
    while True:
        try:
            request(port, "GET", "/health")
            return server, port
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def prepare(port: int) -> int:
    """Tokens to fire and to read, and a claimed task to beat; answer the task's id."""
    request(port, "POST", "/tokens", {"token": "FIRE-1", "context": {"title": "x"}})
    request(port, "POST", "/tokens", {"token": "BIG-1", "context": {"title": "x" * 100_000}})
    request(port, "POST", "/tokens", {"token": "BEAT-1", "context": {"title": "x"}})
    grant = request(port, "POST", "/tasks/claim", {"supervisor": "bench", "states": ["draft"]})
    return int(grant["task"])  # type: ignore[index]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", default="0,100,200,300,400,600,800,1000,1200")
    parser.add_argument("--every", type=float, default=2.0, help="seconds between trickled bytes")
    parser.add_argument("--delay", type=float, default=0.5, help="seconds that count as delayed")
    parser.add_argument("serve", nargs=argparse.REMAINDER, help="options for serve, after --")
    args = parser.parse_args()
    steps = [int(step) for step in args.steps.split(",")]
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    folder = Path(tempfile.mkdtemp(prefix="stateous-slow-"))
    options = [option for option in args.serve if option != "--"]
    server, port = start_serve(folder, options)
    crowd = None
    first_delayed: dict[str, int] = {}
    try:
        probe = Probe(port, prepare(port))
        crowd = Crowd(port, args.every)
        print(f"{'slow clients':>12}  " + "  ".join(f"{name:>25}" for name in probe.ways()))
        for step in steps:
            crowd.grow(step)
            time.sleep(1.0)
            worst = probe.worst()
            shown = [
                f"{'none' if s == float('inf') else f'{s * 1000:.0f} ms':>25}"
                for s in worst.values()
            ]
            print(f"{step:>12}  " + "  ".join(shown), flush=True)
            for name, seconds in worst.items():
                if seconds > args.delay:
                    first_delayed.setdefault(name, step)
        print(f"(slow clients the server closed and that came back: {crowd.reopened})")
    finally:
        if crowd is not None:
            crowd.close()
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=30)
        shutil.rmtree(folder, ignore_errors=True)
    fewest = min(first_delayed.values(), default=None)
    for name in probe.ways():
        found = first_delayed.get(name)
        said = f"{found} slow clients" if found is not None else f"none up to {steps[-1]}"
        print(f"{name}: first delayed at {said}")
    print(f"target: more than {TARGET} slow clients before any delay")
    return 0 if fewest is None or fewest > TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
