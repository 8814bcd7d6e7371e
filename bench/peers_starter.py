"""The starter of bench_peers.py for the systems reached over HTTP: Stateous and Restate.

A process of its own, so that its CPU is counted apart from the systems'. It speaks
one JSON object a line: a command on stdin (`workload` pickup, sequential or
throughput; `runs`; `steps` 1 or 5; `starters`; `prefix`, which makes the runs' names
unique), an answer on stdout: `began` (run -> when its start was sent), `ended` (run
-> when the caller had its result, where the system answers one) and, for a
throughput, `done` (when the starter saw the last run end). The moments that a
system records itself (Stateous's ledger, Restate's `completed_at`, the steps'
stamps) are read by bench_peers.py afterwards. Standard library only.
Run: python peers_starter.py stateous PORT | restate INGRESS_PORT ADMIN_PORT
"""

from __future__ import annotations

import http.client
import json
import random
import sys
import threading
import time
from typing import Any

#: How often a waiting starter asks whether its runs ended.
POLL = 0.01
#: How often a throughput's end is asked for (rarer: each question costs the system).
POLL_THROUGHPUT = 0.1
#: The longest a starter waits for its runs to end before it gives up.
PATIENCE = 300.0
#: A Restate handler per number of steps.
HANDLERS = {1: "one", 5: "five"}


def ask(link: http.client.HTTPConnection, method: str, path: str, body: Any = None) -> Any:
    """Send one request on a kept-alive connection; the decoded answer, refused if not 2xx."""
    data = None if body is None else json.dumps(body)
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    link.request(method, path, data, headers)
    answer = link.getresponse()
    raw = answer.read()
    if answer.status >= 300:
        raise SystemExit(f"{method} {path}: {answer.status} {raw[:300]!r}")
    return json.loads(raw) if raw else None


class Stateous:
    """A run is a token started by `POST /tokens`; its end shows in `GET /stats`."""

    def __init__(self, port: int) -> None:
        self.port = port

    def link(self) -> http.client.HTTPConnection:
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)

    def start(self, link: http.client.HTTPConnection, run: str, steps: int) -> None:
        ask(link, "POST", "/tokens", {"token": run, "context": {"run": run, "steps": steps}})

    def completed(self, link: http.client.HTTPConnection) -> int:
        """The runs completed so far; refused at once when one failed."""
        ended = ask(link, "GET", "/stats").get("ended", {})
        if ended.get("failed"):
            raise SystemExit(f"Stateous: {ended['failed']} run(s) failed: see supervise.log")
        return ended.get("completed", 0)

    def run_to_end(self, link: http.client.HTTPConnection, run: str, steps: int) -> float | None:
        """Start a run and wait for it to end; the ledger has when (None: not seen here)."""
        before = self.completed(link)
        self.start(link, run, steps)
        wait_for(self, link, before + 1, POLL)
        return None


class Restate:
    """A run is an invocation of `Bench/one` or `Bench/five` through the ingress; the
    admin API's SQL counts those that completed."""

    def __init__(self, port: int, admin: int) -> None:
        self.port, self.admin = port, admin

    def link(self) -> http.client.HTTPConnection:
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)

    def start(self, link: http.client.HTTPConnection, run: str, steps: int) -> None:
        ask(link, "POST", f"/Bench/{HANDLERS[steps]}/send", run)

    def completed(self, link: http.client.HTTPConnection) -> int:
        admin = http.client.HTTPConnection("127.0.0.1", self.admin, timeout=60)
        query = "SELECT count(*) AS n FROM sys_invocation WHERE status = 'completed'"
        rows = ask(admin, "POST", "/query", {"query": query})["rows"]
        admin.close()
        return rows[0]["n"]

    def run_to_end(self, link: http.client.HTTPConnection, run: str, steps: int) -> float | None:
        """Call the handler and wait for its answer, which comes once the run has ended."""
        ask(link, "POST", f"/Bench/{HANDLERS[steps]}", run)
        return time.time()


System = Stateous | Restate


def wait_for(system: System, link: http.client.HTTPConnection, count: int, every: float) -> None:
    """Wait until `count` runs have completed, asking every `every` seconds."""
    deadline = time.monotonic() + PATIENCE
    while system.completed(link) < count:
        if time.monotonic() > deadline:
            raise SystemExit(f"fewer than {count} runs completed in {PATIENCE:.0f} s")
        time.sleep(every)


def pickup(system: System, command: dict[str, Any]) -> dict[str, Any]:
    """Start 1-step runs one at a time, a pause between them in which the workers idle."""
    link, began = system.link(), {}
    before = system.completed(link)
    for number in range(command["runs"]):
        run = f"pick-{command['prefix']}-{number}"
        began[run] = time.time()
        system.start(link, run, 1)
        time.sleep(random.uniform(0.05, 0.1))
    wait_for(system, link, before + command["runs"], POLL)
    return {"began": began, "ended": {}}


def sequential(system: System, command: dict[str, Any]) -> dict[str, Any]:
    """Run `steps`-step runs one after the other, each to its end."""
    link, began, ended = system.link(), {}, {}
    for number in range(command["runs"]):
        run = f"seq-{command['prefix']}-{number}"
        began[run] = time.time()
        end = system.run_to_end(link, run, command["steps"])
        if end is not None:
            ended[run] = end
    return {"began": began, "ended": ended}


def throughput(system: System, command: dict[str, Any]) -> dict[str, Any]:
    """Start `runs` runs from `starters` threads, each on its own connection, as fast as
    the system accepts them; then wait until all have ended."""
    link, starters, began = system.link(), command["starters"], {}
    before = system.completed(link)
    lock = threading.Lock()

    def starter(index: int) -> None:
        own = system.link()
        for number in range(index, command["runs"], starters):
            run = f"rate-{command['prefix']}-{number}"
            moment = time.time()
            system.start(own, run, command["steps"])
            with lock:
                began[run] = moment
        own.close()

    threads = [threading.Thread(target=starter, args=(index,)) for index in range(starters)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wait_for(system, link, before + command["runs"], POLL_THROUGHPUT)
    return {"began": began, "ended": {}, "done": time.time()}


def main() -> None:
    kind, ports = sys.argv[1], [int(port) for port in sys.argv[2:]]
    system: System = Stateous(*ports) if kind == "stateous" else Restate(*ports)
    workloads = {"pickup": pickup, "sequential": sequential, "throughput": throughput}
    for line in sys.stdin:
        command = json.loads(line)
        print(json.dumps(workloads[command["workload"]](system, command)), flush=True)


if __name__ == "__main__":
    main()
