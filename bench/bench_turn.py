"""Benchmark: does one kind of heavy write, sent in a loop, hold `/health` on other connections?

Run: .venv/bin/python bench/bench_turn.py [--seconds 5] [--size 900000] [--rounds 1] [--db URL]
Needs `wrk` (Debian package). One `stateous serve` (SQLite, or `--db`). In each phase wrk
sends one kind of request from 8 kept-alive connections, as fast as they are answered,
while this process asks `GET /health` on a connection of its own every 5 ms and times
each answer. The phases: reads of `/health` (the floor), starts whose context holds a text of
`--size` characters, memory writes of a value of that size on held tasks, claims and
reports that set 100 timers (the most one report may) with a new context of that size,
and heartbeats of 1,000 tasks (the most one heartbeat names). Prints, per phase, the
heavy requests per second and `/health`'s p50, p99 and worst time. Target: `/health`
p99 within 20 ms in every phase.
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
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import msgspec  # noqa: E402

from bench.bench_serve import COMMON, wrk  # noqa: E402
from stateous import END, START, Workflow  # noqa: E402
from stateous.compiler.compile import compile_workflow  # noqa: E402
from stateous.model.graph_file import dump  # noqa: E402

#: Connections that send the heavy requests.
CLIENTS = 8
#: The pause between two `/health` asked, in seconds.
PROBE_EVERY = 0.005
#: The target for `/health`'s p99 under every load, in ms.
TARGET_P99 = 20.0


class Item(msgspec.Struct):
    title: str


def workflow() -> Workflow:
    flow = Workflow("turn", context=Item)
    draft, review = flow.state("draft"), flow.state("review")
    submitted, remind = flow.event("submitted"), flow.event("remind")
    flow.transition(START, draft)
    flow.transition(draft, review, on=submitted)
    flow.transition(draft, draft, on=remind)
    flow.transition(review, END, on=submitted)
    return flow


def scripts(size: int, held: list[int]) -> dict[str, str]:
    """The wrk script of each phase, by name; `held` are tasks claimed by `bench-<i>`, one a
    connection, for the memory writes and heartbeats."""
    big = f'local big = string.rep("x", {size})\n'
    tasks = "local held = {" + ", ".join(str(task) for task in held) + "}\n"
    timers = json.dumps([{"event": "remind", "after": "1h"}] * 100)
    beats = json.dumps(list(range(1, 1001)))
    return {
        "reads": COMMON + 'function request() return wrk.format("GET", "/health") end\n',
        "starts": COMMON
        + big
        + """
function request()
  counter = counter + 1
  local body = '{"token": "B-' .. thread_id .. '-' .. counter .. '", "context": {"title": "'
    .. big .. '"}}'
  return wrk.format("POST", "/tokens", json, body)
end
""",
        "memory": COMMON
        + big
        + tasks
        + """
function request()
  local task = held[thread_id + 1]
  local body = '{"key": "k", "value": "' .. big .. '", "supervisor": "bench-' .. thread_id
    .. '"}'
  return wrk.format("PUT", "/tasks/" .. task .. "/memory", json, body)
end
""",
        "reports": COMMON
        + big
        + f"local timers = '{timers}'\n"
        + """
local task = nil
function request()
  if task then
    local body = '{"kind": "waiting", "supervisor": "cycle-' .. thread_id
      .. '", "schedules": ' .. timers .. ', "context": {"title": "' .. big .. '"}}'
    local path = "/tasks/" .. task .. "/report"
    task = nil
    return wrk.format("POST", path, json, body)
  end
  local body = '{"supervisor": "cycle-' .. thread_id .. '", "states": ["draft"]}'
  return wrk.format("POST", "/tasks/claim", json, body)
end
function response(status, headers, body)
  if status == 200 then
    local found = body:match('"task":(%d+)')
    if found and body:match('"attempt"') then task = found end
  end
end
""",
        "heartbeats": COMMON
        + tasks
        + f"local beats = '{beats}'\n"
        + """
function request()
  local body = '{"supervisor": "bench-' .. thread_id .. '", "tasks": ' .. beats .. '}'
  return wrk.format("POST", "/tasks/heartbeat", json, body)
end
""",
    }


def ask(port: int, method: str, path: str, body: dict | None = None) -> tuple[int, dict]:
    link = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    data = None if body is None else json.dumps(body)
    link.request(method, path, data, {"Content-Type": "application/json"})
    answer = link.getresponse()
    raw = answer.read()
    link.close()
    return answer.status, json.loads(raw) if raw else {}


def probe(port: int, stop: threading.Event, times: list[float]) -> None:
    """Ask `/health` on one kept-alive connection until `stop`; keep each answer's time."""
    link = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    while not stop.is_set():
        began = time.perf_counter()
        link.request("GET", "/health")
        link.getresponse().read()
        times.append((time.perf_counter() - began) * 1000)
        time.sleep(PROBE_EVERY)
    link.close()


def phase(port: int, script: str, seconds: float) -> tuple[dict, list[float]]:
    """Run one phase: wrk's summary and the times of `/health` meanwhile."""
    times: list[float] = []
    stop = threading.Event()
    prober = threading.Thread(target=probe, args=(port, stop, times))
    prober.start()
    try:
        result = wrk(f"http://127.0.0.1:{port}", script, seconds, connections=CLIENTS)
    finally:
        stop.set()
        prober.join()
    return result, times


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))] if ordered else float("nan")


def hold_tasks(port: int) -> list[int]:
    """Start a token for each connection and claim its task as `bench-<i>`."""
    held = []
    for index in range(CLIENTS):
        ask(port, "POST", "/tokens", {"token": f"H-{index}", "context": {"title": "x"}})
        status, grant = ask(
            port, "POST", "/tasks/claim", {"supervisor": f"bench-{index}", "states": ["draft"]}
        )
        assert status == 200, (status, grant)
        held.append(grant["task"])
    return held


def serve(graph: Path, db: str, port: int) -> subprocess.Popen[bytes]:
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "stateous",
            "serve",
            str(graph),
            "--listen",
            f"127.0.0.1:{port}",
            "--db",
            db,
            "--lease",
            "1h",
        ],
        cwd=ROOT,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if ask(port, "GET", "/health")[0] == 200:
                return server
        except OSError:
            time.sleep(0.01)
    server.kill()
    sys.exit("serve did not answer /health within 30 s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=5)
    parser.add_argument("--size", type=int, default=900_000, help="characters of a big text")
    parser.add_argument("--rounds", type=int, default=1, help="phases run again; medians shown")
    parser.add_argument("--db", help="a database URL instead of a fresh SQLite file")
    args = parser.parse_args()
    if shutil.which("wrk") is None:
        sys.exit("wrk is needed: apt-get install wrk")
    folder = Path(tempfile.mkdtemp(prefix="stateous-bench-turn-"))
    graph = folder / "turn.json"
    graph.write_bytes(dump(compile_workflow(workflow())))
    port = 19000 + os.getpid() % 1000
    server = serve(graph, args.db or f"sqlite:///{folder / 'turn.db'}", port)
    try:
        by_phase = scripts(args.size, hold_tasks(port))
        figures: dict[str, list[tuple[float, float, float, float, int]]] = {}
        for _ in range(args.rounds):
            for name, script in by_phase.items():
                result, times = phase(port, script, args.seconds)
                figures.setdefault(name, []).append(
                    (
                        result["rate"],
                        percentile(times, 0.5),
                        percentile(times, 0.99),
                        max(times),
                        result["errors"],
                    )
                )
        print(
            f"/health every {PROBE_EVERY * 1000:.0f} ms beside {CLIENTS} clients; medians of "
            f"{args.rounds} round(s); target p99 <= {TARGET_P99:.0f} ms"
        )
        for name, rows in figures.items():
            columns = zip(*rows, strict=True)
            rate, p50, p99, worst, errors = (statistics.median(column) for column in columns)
            mark = "ok" if p99 <= TARGET_P99 else "OVER"
            print(
                f"{name + ':':12} {rate:8.1f} requests/s  non-2xx {errors:5.0f}  /health p50 "
                f"{p50:6.2f} ms  p99 {p99:7.2f} ms  worst {worst:7.2f} ms  {mark}"
            )
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=60)
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
