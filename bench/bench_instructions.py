"""Benchmark: the instructions `serve` runs per start, fire, claim-and-report cycle and
eager report.

Run: .venv/bin/python bench/bench_instructions.py [--ops 800] [--runs 3] [--before CHECKOUT]
     [--phases starts,fires,cycles,eager] [--labels]
Needs valgrind (Debian package). Starts `serve` under callgrind with its counting off, makes
200 tokens over HTTP, then counts the instructions of `--ops` operations sent by 8 clients
at once, each on a kept-alive connection, and prints them per operation. Callgrind counts
instructions, not time: the figure does not move with the load of a shared machine, which
makes the rates of bench_serve.py swing by a third. It counts the process's own code only
(Python, SQLite, libc), not the kernel's (the sync, the sockets, the futexes of threads
handing the GIL over), and the threads take turns, so a group commit gathers fewer writes
than under real load. `--before` alternates with another checkout's code (its `.venv` or
this one's); the medians of `--runs` runs are printed. No target: it tells where a change
lands when the rates cannot. With `--labels`, each claim sends the labels of its box
(`os: linux` and a `box` of its own), as a supervisor with labels in `stateous.yaml` does.
The `eager` phase counts the reports of tokens of five steps (bench_peers.py's graph) that
ask for the supervisor's next task (`next`), with the body a real supervisor sends: each
answer grants the token's next step, or after its last the oldest queued first step.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_serve import workflow  # noqa: E402
from peers_systems import STEPS  # noqa: E402
from peers_systems import workflow as five_steps  # noqa: E402

from stateous.compiler.compile import compile_workflow  # noqa: E402
from stateous.model.graph_file import dump  # noqa: E402

CLIENTS = 8
TOKENS = 200
PHASES = ("starts", "fires", "cycles", "eager")
#: The states a supervisor of the five steps serves, which its asks name.
STEP_STATES = [f"s{number}" for number in range(1, STEPS + 1)]


def call(connection: http.client.HTTPConnection, path: str, body: dict | None) -> tuple[int, bytes]:
    """POST `body` (None: an empty body) and answer the status and the body read."""
    data = b"" if body is None else json.dumps(body).encode()
    connection.request("POST", path, data, {"Content-Type": "application/json"})
    response = connection.getresponse()
    return response.status, response.read()


def operate(
    port: int, phase: str, client: int, count: int, labels: bool, grant: dict[str, Any]
) -> None:
    """One client's share of the operations of `phase`; `grant`, the task an eager client
    holds first."""
    claim: dict[str, object] = {"supervisor": f"box-{client}", "states": ["draft"]}
    if labels:
        claim["labels"] = {"os": "linux", "box": f"box-{client}"}
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    for n in range(count):
        if phase == "starts":
            call(connection, "/tokens", {"token": f"S-{client}-{n}", "context": {"title": "x"}})
        elif phase == "fires":
            call(connection, f"/tokens/T-{(client * 7919 + n) % TOKENS}/events/remind", None)
        elif phase == "eager":
            grant = report_next(connection, f"box-{client}", grant)
        else:
            status, data = call(connection, "/tasks/claim", claim)
            assert status == 200, status
            task = json.loads(data)["task"]
            report = {"kind": "event", "event": "submitted", "supervisor": f"box-{client}"}
            call(connection, f"/tasks/{task}/report", report)
    connection.close()


def report_next(
    connection: http.client.HTTPConnection, supervisor: str, grant: dict[str, Any]
) -> dict[str, Any]:
    """Report the step `grant` as a supervisor does, asking `next`; answer the next grant."""
    last = grant["state"] == STEP_STATES[-1]
    report = {
        **{"kind": "event", "event": "done" if last else "more", "payload": None},
        **{"attempt": grant["attempt"], "supervisor": supervisor},
        "next": {"states": STEP_STATES, "checksum": grant["checksum"], "request": uuid.uuid4().hex},
    }
    status, data = call(connection, f"/tasks/{grant['task']}/report", report)
    assert status == 200, (status, data)
    granted = json.loads(data)["grant"]
    assert granted is not None, "no task queued: more tokens are needed"
    return {**granted, "checksum": grant["checksum"]}


def eager_grants(connection: http.client.HTTPConnection) -> list[dict[str, Any]]:
    """A task claimed by each client, reported once (every statement of an eager report
    compiled); the grants that those reports answered."""
    health = call_get(connection, "/health")
    grants = []
    for client in range(CLIENTS):
        claim = {"supervisor": f"box-{client}", "states": STEP_STATES}
        status, data = call(connection, "/tasks/claim", {**claim, "checksum": health["checksum"]})
        assert status == 200, (status, data)
        grant = {**json.loads(data), "checksum": health["checksum"]}
        grants.append(report_next(connection, f"box-{client}", grant))
    return grants


def call_get(connection: http.client.HTTPConnection, path: str) -> Any:
    """GET `path`'s answer, read as JSON."""
    connection.request("GET", path)
    return json.loads(connection.getresponse().read())


def count(checkout: Path, phase: str, ops: int, labels: bool) -> float:
    """Millions of instructions per operation of `phase`, counted in `checkout`'s serve."""
    folder = Path(tempfile.mkdtemp(prefix="stateous-instructions-"))
    graph = folder / "bench.json"
    graph.write_bytes(dump(compile_workflow(five_steps() if phase == "eager" else workflow())))
    out = folder / "callgrind.out"
    port = 19000 + os.getpid() % 1000
    python = checkout / ".venv/bin/python"
    command = [
        *("valgrind", "--tool=callgrind", "--instr-atstart=no"),
        f"--callgrind-out-file={out}",
        str(python if python.exists() else Path(sys.executable)),
        *("-m", "stateous", "serve", str(graph), "--listen", f"127.0.0.1:{port}"),
        *("--db", f"sqlite:///{folder / 'bench.db'}"),
    ]
    server = subprocess.Popen(
        command, cwd=checkout, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        connection = wait_for(port)
        grants: list[dict[str, Any]] = [{}] * CLIENTS
        if phase == "eager":
            for n in range(TOKENS + ops // STEPS):
                call(
                    connection, "/tokens", {"token": f"T-{n}", "context": {"run": "x", "steps": 5}}
                )
            grants = eager_grants(connection)
        else:
            for n in range(TOKENS + (ops if phase == "cycles" else 0)):
                call(connection, "/tokens", {"token": f"T-{n}", "context": {"title": "x"}})
            for n in range(TOKENS):  # every statement of the phase compiled once
                call(connection, f"/tokens/T-{n}/events/remind", None)
        subprocess.run(["callgrind_control", "-i", "on", str(server.pid)], capture_output=True)
        clients = [
            threading.Thread(
                target=operate,
                args=(port, phase, client, ops // CLIENTS, labels, grants[client]),
            )
            for client in range(CLIENTS)
        ]
        for client in clients:
            client.start()
        for client in clients:
            client.join()
        subprocess.run(["callgrind_control", "-d", str(server.pid)], capture_output=True)
        return instructions(folder) / (ops // CLIENTS * CLIENTS) / 1e6
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=120)
        shutil.rmtree(folder, ignore_errors=True)


def wait_for(port: int) -> http.client.HTTPConnection:
    """A kept-alive connection to serve, once it answers /health (slowly, under valgrind)."""
    deadline = time.monotonic() + 300
    while True:
        try:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
            connection.request("GET", "/health")
            if connection.getresponse().read() is not None:
                return connection
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def instructions(folder: Path) -> int:
    """The instructions of the dump that callgrind_control asked for (the newest file)."""
    for _ in range(100):
        dumps = sorted(folder.glob("callgrind.out*"), key=os.path.getmtime)
        for path in reversed(dumps):
            for line in path.read_text(errors="replace").splitlines():
                if line.startswith(("summary:", "totals:")):
                    return int(line.split()[1])
        time.sleep(0.1)
    raise RuntimeError("callgrind wrote no dump")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ops", type=int, default=800)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--before", type=Path, help="a checkout whose code to compare with")
    parser.add_argument("--phases", default=",".join(PHASES))
    parser.add_argument("--labels", action="store_true", help="claims send labels")
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        sys.exit("valgrind is needed: apt-get install valgrind")
    codes = {"after": ROOT, **({"before": args.before.resolve()} if args.before else {})}
    for phase in args.phases.split(","):
        figures: dict[str, list[float]] = {name: [] for name in codes}
        for _ in range(args.runs):
            for name, checkout in codes.items():
                figures[name].append(count(checkout, phase, args.ops, args.labels))
        for name, runs in figures.items():
            listed = ", ".join(f"{run:.3f}" for run in runs)
            print(
                f"{phase:7} {name:6} {statistics.median(runs):.3f} M instructions per operation"
                f" ({listed}; {codes[name]})"
            )


if __name__ == "__main__":
    main()
