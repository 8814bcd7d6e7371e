"""Benchmark: `stateous serve` on SQLite (or --db), over HTTP by wrk with 8 keep-alive clients.

Run: .venv/bin/python bench/bench_serve.py [--seconds 5] [--tokens-in-db 1000000]
     .venv/bin/python bench/bench_serve.py --db postgresql://USER@HOST:5432/EMPTY_DATABASE
Needs `wrk` (Debian package). Prints tokens started, events fired and claim-and-report
cycles per second, p50/p99 latency, the server's CPU time per request (steadier than the
rates on a noisy machine) and its threads' context switches per request (each a hand-off
between threads: waitress's loop and request threads, the GIL, a write waiting for its
group's commit), the server's peak RSS, the time to its first
/health answer, and GET /health p50 on kept-alive and on new connections.
Targets on 2 cores: >= 1,000 starts/s, >= 1,000 fires/s, >= 400 cycles/s, p99 < 50 ms,
peak RSS < 45 MiB, first /health within 0.3 s, /health p50 < 2 ms both ways. On Postgres
(a fresh database each run): fires and cycles at least those of SQLite on the same machine;
the machine's noise is large, so compare several runs that alternate the two.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import re
import shutil
import signal
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


class Item(msgspec.Struct):
    title: str
    amount: int = 0


def workflow() -> Workflow:
    flow = Workflow("bench", context=Item)
    draft = flow.state("draft")
    review = flow.state("review", timeout="1h")
    submitted = flow.event("submitted")
    remind = flow.event("remind")
    flow.transition(START, draft)
    flow.transition(draft, review, on=submitted)
    flow.transition(draft, draft, on=remind)
    flow.transition(review, END, on=submitted)
    return flow


COMMON = """
local json = {["Content-Type"] = "application/json"}
local counter = 0
local thread_id = 0
local threads = {}
function setup(thread)
  thread:set("id", #threads)
  table.insert(threads, thread)
end
function init(args)
  thread_id = id
end
"""
START_LUA = (
    COMMON
    + """
function request()
  counter = counter + 1
  local body = '{"token": "S-' .. thread_id .. '-' .. counter .. '", "context": {"title": "x"}}'
  return wrk.format("POST", "/tokens", json, body)
end
"""
)
FIRE_LUA = (
    COMMON
    + """
function request()
  counter = counter + 1
  local token = "F-" .. ((thread_id * 7919 + counter) % 1000)
  return wrk.format("POST", "/tokens/" .. token .. "/events/remind", json, "")
end
"""
)
CYCLE_LUA = (
    COMMON
    + """
local task = nil
reports = 0
function request()
  if task then
    local body = '{"kind": "event", "event": "submitted", "supervisor": "bench-'
      .. thread_id .. '"}'
    local path = "/tasks/" .. task .. "/report"
    task = nil
    return wrk.format("POST", path, json, body)
  end
  local body = '{"supervisor": "bench-' .. thread_id .. '", "states": ["draft"]}'
  return wrk.format("POST", "/tasks/claim", json, body)
end
function response(status, headers, body)
  if status == 200 then
    local found = body:match('"task":(%d+)')
    if found and body:match('"attempt"') then
      task = found
    else
      reports = reports + 1
    end
  end
end
function done(summary, latency, requests)
  local total = 0
  for _, thread in ipairs(threads) do
    total = total + thread:get("reports")
  end
  io.write(string.format("REPORTS %d\\n", total))
end
"""
)


def wrk(
    url: str,
    script: str,
    seconds: float,
    connections: int = 8,
    close: bool = False,
    threads: int = 2,
) -> dict:
    """Run wrk and read its summary: requests/s, p50 and p99 in ms, and the reports."""
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as file:
        file.write(script)
    command = [
        "wrk",
        f"-t{min(threads, connections)}",
        f"-c{connections}",
        f"-d{int(seconds)}s",
        "--latency",
        "-s",
        file.name,
    ]
    if close:
        command += ["-H", "Connection: close"]
    output = subprocess.run([*command, url], capture_output=True, text=True, check=True).stdout
    os.unlink(file.name)

    def latency(label: str) -> float:
        match = re.search(rf"^\s+{label}%\s+([\d.]+)(us|ms|s)\s*$", output, re.MULTILINE)
        if match is None:
            return float("nan")
        value, unit = float(match.group(1)), match.group(2)
        return value / 1000 if unit == "us" else value * 1000 if unit == "s" else value

    rate = float(re.search(r"Requests/sec:\s+([\d.]+)", output).group(1))
    non_2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", output)
    reports = re.search(r"REPORTS (\d+)", output)
    return {
        "rate": rate,
        "p50": latency("50"),
        "p99": latency("99"),
        "errors": int(non_2xx.group(1)) if non_2xx else 0,
        "reports": int(reports.group(1)) if reports else None,
        "raw": output,
    }


def post(port: int, path: str, body: dict) -> int:
    connection = http.client.HTTPConnection("127.0.0.1", port)
    connection.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
    status = connection.getresponse().status
    connection.close()
    return status


def wait_for_health(port: int, seconds: float = 30) -> None:
    """Wait until `serve` on `port` answers `GET /health` (OSError after `seconds`)."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
            connection.request("GET", "/health")
            if connection.getresponse().status == 200:
                return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.005)


def fill(database: Path, tokens: int) -> None:
    """Put `tokens` ended tokens (each with a done task and its ledger rows) into the file."""
    import apsw

    from stateous.control.store.sqlite import SqliteStore

    SqliteStore(database).close()
    connection = apsw.Connection(str(database))
    stamp = "2026-01-01 00:00:00.000000"
    with connection:
        connection.executemany(
            "INSERT INTO tokens (token, state, status, visit, context, entered_at, moved_at) "
            "VALUES (?, 'review', 'completed', 1, '{\"title\":\"x\",\"amount\":0}', ?, ?)",
            ((f"OLD-{index}", stamp, stamp) for index in range(tokens)),
        )
        connection.executemany(
            "INSERT INTO tasks (token, state, visit, status, attempt, queued_at) "
            "VALUES (?, 'draft', 1, 'done', 1, ?)",
            ((f"OLD-{index}", stamp) for index in range(tokens)),
        )
        connection.executemany(
            "INSERT INTO ledger (token, seq, at, kind, data, pos) VALUES "
            "(?, 1, ?, 'completed', '{}', (SELECT coalesce(max(pos), 0) + 1 FROM ledger))",
            ((f"OLD-{index}", stamp) for index in range(tokens)),
        )
    connection.close()


def show(what: str, rate: float, result: dict, used: tuple[float, int]) -> None:
    """One line of figures; `used` is what the server spent in the phase: its CPU time in
    seconds and its threads' context switches."""
    requests = max(1, requests_done(result))
    print(
        f"{what + ':':8} {rate:8.0f}/s  p50 {result['p50']:.2f} ms  p99 {result['p99']:.2f} ms"
        f"  non-2xx {result['errors']}  server CPU {used[0] * 1000 / requests:.3f} ms/request"
        f"  {used[1] / requests:.1f} switches/request"
    )


def cpu_seconds(pid: int) -> float:
    """The CPU time a process has used so far, user and system, in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def switches(pid: int) -> int:
    """The context switches of a process's threads so far, voluntary or not."""
    total = 0
    for status in Path(f"/proc/{pid}/task").glob("*/status"):
        with contextlib.suppress(OSError):
            total += sum(
                int(line.split()[1])
                for line in status.read_text().splitlines()
                if "ctxt_switches:" in line
            )
    return total


def spent(pid: int) -> tuple[float, int]:
    """The CPU seconds and context switches a process has used so far."""
    return cpu_seconds(pid), switches(pid)


def used_since(pid: int, before: tuple[float, int]) -> tuple[float, int]:
    """What a process has used since `before`, a reading of `spent`."""
    now = spent(pid)
    return now[0] - before[0], now[1] - before[1]


def requests_done(result: dict) -> int:
    match = re.search(r"(\d+) requests in", result["raw"])
    return int(match.group(1)) if match else 0


def peak_rss(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"VmHWM:\s+(\d+) kB", status).group(1)) / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=5)
    parser.add_argument("--tokens-in-db", type=int, default=0, help="ended tokens put in first")
    parser.add_argument("--db", help="a database URL instead of a fresh SQLite file")
    args = parser.parse_args()
    if shutil.which("wrk") is None:
        sys.exit("wrk is needed: apt-get install wrk")
    folder = Path(tempfile.mkdtemp(prefix="stateous-bench-"))
    graph = folder / "bench.json"
    graph.write_bytes(dump(compile_workflow(workflow())))
    database = folder / "bench.db"
    if args.tokens_in_db:
        began = time.perf_counter()
        fill(database, args.tokens_in_db)
        print(f"filled {args.tokens_in_db} ended tokens in {time.perf_counter() - began:.1f}s")
    port = 18000 + os.getpid() % 1000
    began = time.perf_counter()
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
            args.db or f"sqlite:///{database}",
        ],
        cwd=ROOT,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_health(port)
        print(f"first /health answered {time.perf_counter() - began:.3f}s after the start")
        url = f"http://127.0.0.1:{port}"
        kept = wrk(url + "/health", "", 2, connections=1)
        fresh = wrk(url + "/health", "", 2, connections=1, close=True)
        print(f"GET /health p50, one client: kept-alive {kept['p50']:.2f} ms,", end=" ")
        print(f"a new connection each time {fresh['p50']:.2f} ms")
        before = spent(server.pid)
        started = wrk(url, START_LUA, args.seconds)
        show("starts", started["rate"], started, used_since(server.pid, before))
        for index in range(1000):
            post(port, "/tokens", {"token": f"F-{index}", "context": {"title": "x"}})
        before = spent(server.pid)
        fired = wrk(url, FIRE_LUA, args.seconds)
        show("fires", fired["rate"], fired, used_since(server.pid, before))
        # One wrk thread per connection: each is one supervisor, claiming then reporting.
        before = spent(server.pid)
        cycles = wrk(url, CYCLE_LUA, args.seconds, threads=8)
        per_second = (cycles["reports"] or 0) / args.seconds
        show("cycles", per_second, cycles, used_since(server.pid, before))
        print(f"server peak RSS: {peak_rss(server.pid):.1f} MiB")
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=30)
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
