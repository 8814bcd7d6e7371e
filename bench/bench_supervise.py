"""Benchmark: tokens through a real `stateous supervise` beside a real `stateous serve` on SQLite.

Run: .venv/bin/python bench/bench_supervise.py [--tokens 500] [--idle-seconds 20]
A two-state workflow whose routines are `def`s that return their event at once, a folder
made by `stateous init supervisor` with `tasks: 8`. The bench starts the tokens over HTTP
as fast as one kept-alive connection allows, and counts from the first start to the last
completion. Then it reads the supervisor's CPU time from /proc while it has nothing to do.
Targets: >= 100 tokens/s through the supervisor; < 0.5 CPU seconds per idle minute.
"""

from __future__ import annotations

import argparse
import http.client
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import msgspec  # noqa: E402

from stateous import END, START, Workflow  # noqa: E402
from stateous.compiler.compile import compile_workflow  # noqa: E402
from stateous.model.graph_file import dump  # noqa: E402

SERVING = re.compile(r"^serving on http://127\.0\.0\.1:(\d+) \(Ctrl-C stops\)$")
#: The most tokens one `GET /tokens` lists, so the most this bench can count.
LIST_LIMIT = 1000


class Item(msgspec.Struct):
    title: str


def workflow() -> Workflow:
    flow = Workflow("bench", context=Item)
    draft = flow.state("draft")
    review = flow.state("review")
    submitted = flow.event("submitted")
    approved = flow.event("approved")
    flow.transition(START, draft)
    flow.transition(draft, review, on=submitted)
    flow.transition(review, END, on=approved)
    return flow


ROUTINES = """\
from stateous import on_state

from contract import ItemContext, events, states


@on_state(states.draft)
def draft(ctx: ItemContext) -> events.submitted:
    return events.submitted


@on_state(states.review)
def review(ctx: ItemContext) -> events.approved:
    return events.approved
"""


def environment() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}


def stateous(*args: str) -> list[str]:
    return [sys.executable, "-m", "stateous", *args]


def make_folder(
    work: Path, graph: Path, port: int, routines: str = ROUTINES, *, eager: bool = True
) -> Path:
    """A supervisor's folder for `graph` with `routines`, 8 slots, reaching serve on `port`;
    its reports ask for its next task unless `eager` is False."""
    folder = work / "bench-supervisor"
    subprocess.run(
        stateous("init", "supervisor", str(graph), str(folder)),
        cwd=work,
        env=environment(),
        check=True,
        capture_output=True,
    )
    for stub in folder.glob("*.py"):
        if stub.name != "contract.py":
            stub.unlink()
    (folder / "routines.py").write_text(routines)
    (folder / "stateous.yaml").write_text(
        f'url: "http://127.0.0.1:{port}"\ntasks: 8\nname: bench-box\n'
        f"eager: {'true' if eager else 'false'}\n"
    )
    return folder


def start_serve(
    work: Path, graph: Path, db: str | None = None
) -> tuple[subprocess.Popen[str], int]:
    """`stateous serve` of `graph` on `db` (a fresh SQLite file in `work` by default)."""
    db = db or f"sqlite:///{work / 'bench.db'}"
    process = subprocess.Popen(
        stateous("serve", str(graph), "--db", db, "--listen", "127.0.0.1:0"),
        cwd=work,
        env=environment(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stderr is not None
    for line in process.stderr:
        found = SERVING.match(line.strip())
        if found:
            # serve's later lines are read on, so that a full pipe never stops it
            threading.Thread(target=process.stderr.read, daemon=True).start()
            return process, int(found[1])
    raise SystemExit(f"serve ended with {process.wait()} before serving")


def start_supervise(
    work: Path, folder: Path, env: dict[str, str] | None = None
) -> subprocess.Popen[str]:
    """`stateous supervise` of `folder`, once it says what it serves; `env` is added."""
    log = (work / "supervise.log").open("w")
    process = subprocess.Popen(
        stateous("supervise", str(folder)),
        cwd=work,
        env={**environment(), **(env or {})},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=log,
        text=True,
    )
    deadline = time.monotonic() + 20
    while " serves " not in (work / "supervise.log").read_text():
        if process.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"supervise did not start: {(work / 'supervise.log').read_text()}")
        time.sleep(0.05)
    return process


def call(connection: http.client.HTTPConnection, method: str, path: str, body: Any = None) -> Any:
    data = None if body is None else msgspec.json.encode(body)
    headers = {"Content-Type": "application/json"} if method in ("POST", "PUT") else {}
    connection.request(method, path, body=data, headers=headers)
    response = connection.getresponse()
    raw = response.read()
    if response.status >= 300:
        raise SystemExit(f"{method} {path}: {response.status} {raw!r}")
    return msgspec.json.decode(raw) if raw else None


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time of a process, in seconds, from /proc/<pid>/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    utime, stime = int(fields[11]), int(fields[12])
    return (utime + stime) / os.sysconf("SC_CLK_TCK")


def throughput(port: int, tokens: int) -> tuple[float, float]:
    """Start the tokens, wait for their completion; (seconds to start, seconds to complete)."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    poller = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    first = time.perf_counter()
    for number in range(tokens):
        call(connection, "POST", "/tokens", {"token": f"T-{number}", "context": {"title": "t"}})
    started = time.perf_counter() - first
    deadline = first + 300
    while True:
        done = call(poller, "GET", f"/tokens?status=completed&limit={LIST_LIMIT}")
        if len(done) >= tokens:
            break
        if time.perf_counter() > deadline:
            raise SystemExit(f"only {len(done)} of {tokens} tokens completed in 300 s")
        time.sleep(0.05)
    completed = time.perf_counter() - first
    connection.close()
    poller.close()
    return started, completed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=500)
    parser.add_argument("--idle-seconds", type=float, default=20.0)
    args = parser.parse_args()
    if not 1 <= args.tokens <= LIST_LIMIT:
        raise SystemExit(f"--tokens is 1 to {LIST_LIMIT}")
    work = Path(tempfile.mkdtemp(prefix="bench-supervise-"))
    processes: list[subprocess.Popen[str]] = []
    try:
        graph = work / "bench.json"
        graph.write_bytes(dump(compile_workflow(workflow())))
        serve, port = start_serve(work, graph)
        processes.append(serve)
        supervise = start_supervise(work, make_folder(work, graph, port))
        processes.append(supervise)

        cpu_before = cpu_seconds(serve.pid), cpu_seconds(supervise.pid)
        started, completed = throughput(port, args.tokens)
        serve_cpu = cpu_seconds(serve.pid) - cpu_before[0]
        supervise_cpu = cpu_seconds(supervise.pid) - cpu_before[1]
        print(f"tokens: {args.tokens}, 2 tasks each, tasks: 8")
        print(f"started all in {started:.2f} s ({args.tokens / started:.0f} starts/s)")
        print(
            f"first start to last completion: {completed:.2f} s = "
            f"{args.tokens / completed:.0f} tokens/s (target >= 100)"
        )
        print(
            f"CPU in that time: serve {serve_cpu:.2f} s, supervise {supervise_cpu:.2f} s "
            f"({supervise_cpu * 1000 / (2 * args.tokens):.2f} ms of the supervisor per task)"
        )

        time.sleep(2.0)  # the last reports and claims settle
        before, clock = cpu_seconds(supervise.pid), time.monotonic()
        time.sleep(args.idle_seconds)
        used, elapsed = cpu_seconds(supervise.pid) - before, time.monotonic() - clock
        print(
            f"idle supervisor: {used:.2f} CPU s in {elapsed:.1f} s = "
            f"{used * 60 / elapsed:.2f} CPU s per minute (target < 0.5)"
        )
    finally:
        for process in reversed(processes):
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
