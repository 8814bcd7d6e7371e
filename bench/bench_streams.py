"""Benchmark: what open, idle live streams (`GET /stream`) cost fires and claims.

Run: .venv/bin/python bench/bench_streams.py [--streams 200] [--seconds 5] [--rounds 3]
     [--firers 2] [--claimers 2] [--db postgresql://USER@HOST:5432/EMPTY_DATABASE]
One `stateous serve` (SQLite by default; `--db` for Postgres) with its default 8 request
threads. The bench measures fires per second (`--firers` processes, each firing `poke` on a
token of its own on a kept-alive connection) and claim-and-report cycles per second
(`--claimers` processes claiming `work` and reporting `done`), first with no stream open,
then with `--streams` streams held open by a helper process, each following a token that
does not move (`?token=IDLE-n`), so each commit wakes the streams' thread for nothing to
send. It checks that every stream was answered 200 and that a stream of a fired token
still gets its entries. The runs alternate (alone, beside, beside, alone, ...),
`--rounds` of each, and the medians are shown, with the CPU time `serve` spent per
operation, which other work on a shared machine disturbs less than the rates.
`--all-idle` makes the last stream follow an idle token too. Target: the streams cost
fires and claims less than 10 %.
"""

from __future__ import annotations

import argparse
import http.client
import multiprocessing
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench_pickup import SERVING, ask, cpu_seconds, firer, workflow  # noqa: E402

from stateous.compiler.compile import compile_workflow  # noqa: E402
from stateous.model.graph_file import dump  # noqa: E402


def starter(port: int, tokens: list[str]) -> None:
    link = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    for token in tokens:
        status, body = ask(link, "POST", "/tokens", {"token": token, "context": {"title": "x"}})
        assert status == 201, body


def start_all(port: int, tokens: list[str], processes: int = 4) -> None:
    parts = [tokens[n::processes] for n in range(processes)]
    workers = [multiprocessing.Process(target=starter, args=(port, part)) for part in parts]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()


def claimer(port: int, name: str, seconds: float, counts: Any, index: int) -> None:
    link = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    deadline, cycles = time.monotonic() + seconds, 0
    while time.monotonic() < deadline:
        status, grant = ask(link, "POST", "/tasks/claim", {"supervisor": name, "states": ["work"]})
        if status != 200:
            break  # no more queued tasks
        report = {"kind": "event", "event": "done", "attempt": grant["attempt"], "supervisor": name}
        cycles += ask(link, "POST", f"/tasks/{grant['task']}/report", report)[0] == 200
    counts[index] = cycles


def rate(target: Any, port: int, names: list[str], seconds: float) -> float:
    counts = multiprocessing.Array("i", len(names))
    workers = [
        multiprocessing.Process(target=target, args=(port, name, seconds, counts, n))
        for n, name in enumerate(names)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return sum(counts) / seconds


def hold_streams(port: int, paths: list[str], opened: Any, stop: Any) -> None:
    """Open a stream for each path and keep them open, reading what comes, until `stop`."""
    sockets = []
    for path in paths:
        sock = socket.create_connection(("127.0.0.1", port))
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
        sockets.append(sock)
    for sock in sockets:
        head = b""
        while b"\r\n\r\n" not in head:
            head += sock.recv(4096)
        opened.value += head.startswith(b"HTTP/1.1 200")
        sock.setblocking(False)
    received = 0
    while not stop.wait(0.2):
        for sock in sockets:
            try:
                received += len(sock.recv(65536))
            except BlockingIOError:
                continue
    opened.value = opened.value * 1_000_000 + min(received, 999_999)


def measure(
    port: int, pid: int, target: Any, names: list[str], seconds: float
) -> tuple[float, float]:
    """Operations per second, and milliseconds of `serve` CPU per operation."""
    used = cpu_seconds(pid)
    per_second = rate(target, port, names, seconds)
    used = cpu_seconds(pid) - used
    return per_second, used * 1000 / max(per_second * seconds, 1)


def serve_process(db: str, folder: Path) -> tuple[subprocess.Popen[str], int]:
    graph = folder / "streams.json"
    graph.write_bytes(dump(compile_workflow(workflow())))
    options = ["--db", db, "--listen", "127.0.0.1:0", "--lease", "10m"]
    serve = subprocess.Popen(
        [sys.executable, "-m", "stateous", "serve", str(graph), *options],
        cwd=folder,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stderr=subprocess.PIPE,
        text=True,
    )
    assert serve.stderr is not None
    port = 0
    while not port:
        found = SERVING.match(serve.stderr.readline().strip())
        port = int(found[1]) if found else 0
    return serve, port


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--streams", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=3, help="alone, then beside, this often")
    parser.add_argument("--firers", type=int, default=2)
    parser.add_argument("--claimers", type=int, default=2)
    parser.add_argument("--queued", type=int, default=1500, help="tasks queued for each run")
    parser.add_argument("--db", default=None)
    parser.add_argument("--all-idle", action="store_true", help="no stream follows a fired token")
    parser.add_argument(
        "--keep-alive",
        action="store_true",
        help="hold idle kept-alive connections (a GET /health each) instead of streams, to compare",
    )
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="bench-streams-"))
    serve, port = serve_process(args.db or f"sqlite:///{folder / 'streams.sqlite'}", folder)
    runs: dict[str, list[tuple[float, float]]] = {}
    answered = received = 0
    try:
        firing = [f"FIRE-{n}" for n in range(args.firers)]
        idle = [f"IDLE-{n}" for n in range(args.streams)]
        start_all(port, firing + idle)
        link = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        for _ in firing + idle:  # every one to `hold`, so only the queued tasks are claimed
            _, grant = ask(link, "POST", "/tasks/claim", {"supervisor": "b", "states": ["work"]})
            report = {"kind": "event", "event": "done", "attempt": 1, "supervisor": "b"}
            assert ask(link, "POST", f"/tasks/{grant['task']}/report", report)[0] == 200
        claiming = [f"box-{n}" for n in range(args.claimers)]
        followed = idle[-1] if args.all_idle else firing[0]
        paths = [f"/stream?token={token}" for token in idle[:-1]] + [f"/stream?token={followed}"]
        if args.keep_alive:
            paths = ["/health"] * len(paths)
        for round_ in range(args.rounds * 2):
            # Alone, beside, beside, alone, ...: a database that grows favours neither.
            beside = round_ % 4 in (1, 2)
            start_all(port, [f"R{round_}-{n}" for n in range(args.queued)])
            if beside:
                stop, opened = multiprocessing.Event(), multiprocessing.Value("q", 0)
                holder = multiprocessing.Process(
                    target=hold_streams, args=(port, paths, opened, stop)
                )
                holder.start()
                time.sleep(3)  # every stream open
            for name, target, names in (("fires", firer, firing), ("claims", claimer, claiming)):
                key = f"{name} {'beside' if beside else 'alone'}"
                runs.setdefault(key, []).append(
                    measure(port, serve.pid, target, names, args.seconds)
                )
            if beside:
                stop.set()
                holder.join()
                answered, received = divmod(opened.value, 1_000_000)
                time.sleep(1)  # the streams closed
    finally:
        serve.terminate()
        serve.wait(timeout=30)
    show(args, runs, answered, received, len(paths))


def show(
    args: argparse.Namespace,
    runs: dict[str, list[tuple[float, float]]],
    answered: int,
    received: int,
    streams: int,
) -> None:
    idle = "kept-alive connections" if args.keep_alive else "open streams"
    print(
        f"database: {'postgres' if args.db else 'sqlite'}; {os.cpu_count()} cores; "
        f"load average {os.getloadavg()[0]:.1f}; medians of {args.rounds} rounds"
    )
    print(f"{idle} answered 200: {answered} of {streams}; bytes read by them: {received}")
    for name in ("fires", "claims"):
        alone, beside = runs[f"{name} alone"], runs[f"{name} beside"]
        rate_alone = statistics.median(run[0] for run in alone)
        rate_beside = statistics.median(run[0] for run in beside)
        cpu_alone = statistics.median(run[1] for run in alone)
        cpu_beside = statistics.median(run[1] for run in beside)
        cost = (1 - rate_beside / rate_alone) * 100 if rate_alone else 0.0
        cpu_cost = (cpu_beside / cpu_alone - 1) * 100 if cpu_alone else 0.0
        verdict = "ok" if cost < 10 else "MISSED (target: < 10 %)"
        print(
            f"{name} per second: {rate_alone:,.0f} alone, {rate_beside:,.0f} beside "
            f"{args.streams} {idle} ({cost:+.1f} %, {verdict}); serve CPU per {name[:-1]}: "
            f"{cpu_alone:.2f} ms alone, {cpu_beside:.2f} ms beside ({cpu_cost:+.1f} %)"
        )


if __name__ == "__main__":
    main()
