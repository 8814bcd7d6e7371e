"""Benchmark: how fast a queued task is claimed by idle supervisors, and what they cost fires.

Run: .venv/bin/python bench/bench_pickup.py [--idle 200] [--seconds 5] [--firers 2] [--rounds 3]
One `stateous serve` on SQLite. `--idle` idle supervisors are threads of one helper process,
each on its own kept-alive connection, claiming as `stateous supervise` does (a claim with
`"wait": 20`, the same request id across it; after a claim answered at once, a jittered
pause of up to its `Retry-After`, or of 0.5-1 s) and reporting each grant at once. The
bench measures fires per second from `--firers` processes (each firing `poke` on a token
of its own, kept alive), the median of `--rounds` rounds, first with no supervisor, then
with the idle ones connected (their waits end and start again meanwhile). Then it starts
a token every 20-60 ms beside the fires, and reads from the ledger (its times, to the
microsecond) how long each first task waited between `task_queued` and `task_claimed`.
It prints serve's CPU time per fire in each phase, and per second for the idle fleet
alone (figures that hold on a loaded machine, where rates do not), and its peak RSS.
Targets: fires keep >= 90 % of their rate; pickup p50 <= 10 ms, p99 <= 50 ms;
serve peak RSS < 80 MiB with 200 waiting supervisors.
"""

from __future__ import annotations

import argparse
import http.client
import multiprocessing
import os
import random
import re
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import msgspec  # noqa: E402

from stateous import END, START, Workflow  # noqa: E402
from stateous.client.http import Connection  # noqa: E402
from stateous.compiler.compile import compile_workflow  # noqa: E402
from stateous.model.graph_file import dump  # noqa: E402

SERVING = re.compile(r"^serving on http://127\.0\.0\.1:(\d+) \(Ctrl-C stops\)$")
WAIT = 20


class Item(msgspec.Struct):
    title: str


def workflow() -> Workflow:
    """`work` (claimed by the idle supervisors), then `hold`, which `poke` enters again."""
    flow = Workflow("pickup", context=Item)
    work, hold = flow.state("work"), flow.state("hold")
    done, poke, end = flow.event("done"), flow.event("poke"), flow.event("end")
    flow.transition(START, work)
    flow.transition(work, hold, on=done)
    flow.transition(hold, hold, on=poke)
    flow.transition(hold, END, on=end)
    return flow


def ask(link: http.client.HTTPConnection, method: str, path: str, body: Any) -> tuple[int, Any]:
    link.request(method, path, msgspec.json.encode(body), {"Content-Type": "application/json"})
    answer = link.getresponse()
    raw = answer.read()
    return answer.status, msgspec.json.decode(raw) if raw else None


def idle_supervisor(port: int, name: str, stop: Any) -> None:
    """Claim as `supervise` does (through its client, which reads `Retry-After`); report
    each grant's `done` at once."""
    link = Connection(f"http://127.0.0.1:{port}", timeout=WAIT + 10)
    while not stop.is_set():
        body = {"supervisor": name, "states": ["work"], "request": uuid.uuid4().hex, "wait": WAIT}
        began = time.monotonic()
        status, grant = link.call("POST", "/tasks/claim", body)
        if status == 200:
            report = {"kind": "event", "event": "done", "attempt": grant["attempt"]}
            link.call("POST", f"/tasks/{grant['task']}/report", {**report, "supervisor": name})
        elif time.monotonic() - began < WAIT / 2:
            most = link.retry_after or 1.0
            stop.wait(random.uniform(most / 2, most))


def idle_supervisors(port: int, count: int, stop: Any) -> None:
    threads = [
        threading.Thread(target=idle_supervisor, args=(port, f"idle-{n}", stop), daemon=True)
        for n in range(count)
    ]
    for thread in threads:
        thread.start()
    stop.wait()


def firer(port: int, token: str, seconds: float, counts: Any, index: int) -> None:
    """Fire `poke` on `token` for `seconds`; count the fires answered 200."""
    link = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    deadline, fired = time.monotonic() + seconds, 0
    while time.monotonic() < deadline:
        status, _ = ask(link, "POST", f"/tokens/{token}/events/poke", {})
        fired += status == 200
    counts[index] = fired


def start(port: int, token: str) -> None:
    link = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    status, body = ask(link, "POST", "/tokens", {"token": token, "context": {"title": "x"}})
    assert status == 201, body
    link.close()


def fire_rate(port: int, tokens: list[str], seconds: float) -> float:
    counts = multiprocessing.Array("i", len(tokens))
    processes = [
        multiprocessing.Process(target=firer, args=(port, token, seconds, counts, n))
        for n, token in enumerate(tokens)
    ]
    for process in processes:
        process.start()
    for process in processes:
        process.join()
    return sum(counts) / seconds


def fires(pid: int, port: int, tokens: list[str], args: argparse.Namespace) -> tuple[float, float]:
    """The median fire rate of `--rounds` rounds, and serve's CPU seconds per fire."""
    rates, costs = [], []
    for _ in range(args.rounds):
        used = cpu_seconds(pid)
        rate = fire_rate(port, tokens, args.seconds)
        rates.append(rate)
        costs.append((cpu_seconds(pid) - used) / (rate * args.seconds))
    return statistics.median(rates), statistics.median(costs)


def pickups(db: Path, tokens: list[str]) -> list[float]:
    """Milliseconds from each token's first `task_queued` to its first `task_claimed`."""
    waited = []
    with sqlite3.connect(db) as connection:
        for token in tokens:
            rows = connection.execute(
                "SELECT kind, at FROM ledger WHERE token = ? AND kind IN "
                "('task_queued', 'task_claimed') ORDER BY seq LIMIT 2",
                (token,),
            ).fetchall()
            times = dict((kind, datetime.fromisoformat(at).timestamp()) for kind, at in rows)
            if "task_claimed" in times:
                waited.append((times["task_claimed"] - times["task_queued"]) * 1000)
    return waited


def cpu_seconds(pid: int) -> float:
    """The CPU time (user and system) that a process has used, in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def peak_rss(pid: int) -> int:
    """The peak resident memory of a process, in KiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--idle", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--firers", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="bench-pickup-"))
    graph, db = folder / "pickup.json", folder / "pickup.sqlite"
    graph.write_bytes(dump(compile_workflow(workflow())))
    options = ["--db", f"sqlite:///{db}", "--listen", "127.0.0.1:0", "--lease", "10m"]
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
    try:
        firing = [f"FIRE-{n}" for n in range(args.firers)]
        for token in firing:  # to `hold`: claim `work` once, report done
            start(port, token)
            link = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            _, grant = ask(link, "POST", "/tasks/claim", {"supervisor": "b", "states": ["work"]})
            report = {"kind": "event", "event": "done", "attempt": 1, "supervisor": "b"}
            assert ask(link, "POST", f"/tasks/{grant['task']}/report", report)[0] == 200
        alone, alone_cpu = fires(serve.pid, port, firing, args)
        stop = multiprocessing.Event()
        idle = multiprocessing.Process(target=idle_supervisors, args=(port, args.idle, stop))
        idle.start()
        time.sleep(3)  # every idle supervisor has claimed once and waits
        used = cpu_seconds(serve.pid)
        time.sleep(args.seconds)
        fleet_cpu = (cpu_seconds(serve.pid) - used) / args.seconds
        beside, beside_cpu = fires(serve.pid, port, firing, args)
        probes: list[str] = []

        def probe() -> None:
            deadline = time.monotonic() + args.seconds
            while time.monotonic() < deadline:
                token = f"PICK-{len(probes) + 1}"
                start(port, token)
                probes.append(token)
                time.sleep(random.uniform(0.02, 0.06))

        prober = threading.Thread(target=probe)
        prober.start()
        probed = fire_rate(port, firing, args.seconds)
        prober.join()
        time.sleep(1)
        waited = sorted(pickups(db, probes))
        rss = peak_rss(serve.pid)
        stop.set()
        idle.join(timeout=WAIT + 15)
        if idle.is_alive():
            idle.kill()
    finally:
        serve.terminate()
        serve.wait(timeout=30)
    claimed = len(waited)
    p50 = statistics.median(waited) if waited else float("nan")
    p99 = waited[min(claimed - 1, int(claimed * 0.99))] if waited else float("nan")
    print(f"fires/s alone: {alone:.0f}; beside {args.idle} idle supervisors: {beside:.0f}")
    print(f"  kept {beside / alone:.0%} of the rate (target >= 90 %)")
    print(f"  serve's CPU per fire: alone {alone_cpu * 1000:.2f} ms, ", end="")
    print(f"beside them {beside_cpu * 1000:.2f} ms")
    print(f"the idle fleet alone costs serve {fleet_cpu * 1000:.0f} ms of CPU per second")
    print(f"fires/s while the probe starts tokens for the fleet to claim: {probed:.0f}")
    print(f"pickup of {claimed}/{len(probes)} tasks: p50 {p50:.1f} ms (<= 10), ", end="")
    print(f"p99 {p99:.1f} ms (<= 50)")
    print(f"serve peak RSS: {rss / 1024:.1f} MiB (target < 80 with 200 waiting)")


if __name__ == "__main__":
    main()
