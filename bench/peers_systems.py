"""The systems bench_peers.py compares, each started fresh for a round and stopped after it.

Every system runs the same runs: 1 or 5 steps that return at once. Each has a driver,
a process that takes the workloads on stdin (`peers_starter.py` over HTTP for
Stateous and Restate, `peers_dbos_driver.py` for DBOS, which is its own worker), its
processes by role (for their CPU), the Postgres database whose backends count, and
the moments that it records itself: Stateous's ledger (`completed` entries, to the
microsecond), Restate's `sys_invocation.completed_at` (to the millisecond), and the
stamps the first step of a pickup run writes.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import socket
import sqlite3
import subprocess
import sys
import time
import tomllib
from datetime import UTC, datetime
from itertools import pairwise
from pathlib import Path
from typing import Any

import msgspec
import psycopg
from bench_supervise import make_folder, start_serve, start_supervise
from peers_install import dbos_python, restate_python, restate_server
from peers_processes import create_database, drop_database, postgres_durability

from stateous import END, START, Workflow
from stateous.compiler.compile import compile_workflow
from stateous.model.graph_file import dump

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
STEPS = 5


class Run(msgspec.Struct):
    run: str
    steps: int


def workflow() -> Workflow:
    """`s1` to `s5`, one routine each; a 1-step run ends after `s1` (`done`)."""
    flow = Workflow("peers", context=Run)
    states = [flow.state(f"s{number}") for number in range(1, STEPS + 1)]
    more, done = flow.event("more"), flow.event("done")
    flow.transition(START, states[0])
    for state, following in pairwise(states):
        flow.transition(state, following, on=more)
    flow.transition(states[0], END, on=done)
    flow.transition(states[-1], END, on=done)
    return flow


ROUTINES = '''\
"""Steps that return at once; the first step of a pickup run notes when it began."""

import os
import time

from stateous import on_state

from contract import RunContext, events, states

STAMPS = os.environ["PEERS_STAMPS"]


@on_state(states.s1)
def s1(ctx: RunContext) -> events.more | events.done:
    if ctx.token.startswith("pick"):
        with open(STAMPS, "a") as stamps:
            stamps.write(f"{ctx.token} {time.time():.6f}\\n")
    return events.done if ctx["steps"] == 1 else events.more
''' + "".join(
    f"""

@on_state(states.s{number})
def s{number}(ctx: RunContext) -> events.{"done" if number == STEPS else "more"}:
    return events.{"done" if number == STEPS else "more"}
"""
    for number in range(2, STEPS + 1)
)


class Driver:
    """A process that runs the workloads: one JSON command a line in, one answer out."""

    def __init__(self, command: list[str], cwd: Path, env: dict[str, str] | None = None) -> None:
        self.process = subprocess.Popen(
            command,
            cwd=cwd,
            env={**os.environ, **(env or {})},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def answer(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"the driver ended with {self.process.wait()}")
        return json.loads(line)

    def ask(self, command: dict[str, Any]) -> dict[str, Any]:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(command) + "\n")
        self.process.stdin.flush()
        return self.answer()

    def close(self) -> None:
        if self.process.stdin:
            self.process.stdin.close()
        stop(self.process)


def stop(process: subprocess.Popen[Any], timeout: float = 20) -> None:
    """End a process the bench started: SIGTERM, then SIGKILL if it lingers."""
    if process.poll() is None:
        process.terminate()
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def read_stamps(path: Path) -> dict[str, float]:
    if not path.exists():
        return {}
    return {run: float(moment) for run, moment in (line.split() for line in path.open())}


def pragma(source: Path) -> str:
    """The journal mode and `synchronous` a module of the package sets, read from its code."""
    text = source.read_text()
    found = [re.search(rf"PRAGMA {name} = (\w+)", text) for name in ("journal_mode", "synchronous")]
    return "journal_mode={}, synchronous={}".format(
        *(match[1] if match else "?" for match in found)
    )


class Stateous:
    """`stateous serve` on SQLite or Postgres, one `stateous supervise` of 8 slots, and
    the starter in a process of its own."""

    def __init__(self, backend: str, tag: str, eager: bool = True) -> None:
        self.backend, self.tag, self.eager = backend, tag, eager
        self.label = f"Stateous, {'SQLite' if backend == 'sqlite' else 'Postgres'}"
        if not eager:
            self.label += ", no eager grants"
        self.database: str | None = None
        self.processes: dict[str, int] = {}
        self.started: list[subprocess.Popen[Any]] = []

    def open(self, folder: Path) -> None:
        graph = folder / "peers.json"
        graph.write_bytes(dump(compile_workflow(workflow())))
        if self.backend == "postgres":
            self.database = f"peers_stateous_{self.tag}"
            self.db = create_database(self.database)
        else:
            self.db = f"sqlite:///{folder / 'peers.db'}"
        serve, port = start_serve(folder, graph, self.db)
        self.started.append(serve)
        self.stamps_file = folder / "stamps"
        supervisor = make_folder(folder, graph, port, ROUTINES, eager=self.eager)
        env = {"PEERS_STAMPS": str(self.stamps_file)}
        supervise = start_supervise(folder, supervisor, env)
        self.started.append(supervise)
        self.driver = Driver(
            [sys.executable, str(HERE / "peers_starter.py"), "stateous", str(port)], HERE
        )
        self.processes = {
            "control plane": serve.pid,
            "supervisor": supervise.pid,
            "starter": self.driver.process.pid,
        }

    def ends(self, runs: list[str]) -> dict[str, float]:
        """When each run's `completed` entry was written, from the ledger."""
        query = "SELECT token, at FROM ledger WHERE kind = 'completed'"
        if self.backend == "postgres":
            with psycopg.connect(self.db) as connection:
                rows = connection.execute(query).fetchall()
        else:
            with sqlite3.connect(self.db.removeprefix("sqlite:///")) as connection:
                rows = connection.execute(query).fetchall()
        moments = {
            token: datetime.fromisoformat(at).replace(tzinfo=UTC).timestamp() for token, at in rows
        }
        return {run: moments[run] for run in runs if run in moments}

    def last_end(self, answer: dict[str, Any]) -> float:
        return max(self.ends(list(answer["began"])).values())

    def stamps(self, answer: dict[str, Any]) -> dict[str, float]:
        return read_stamps(self.stamps_file)

    def durability(self) -> str:
        serve = pragma(ROOT / "stateous" / "control" / "store" / "sqlite.py")
        outbox = pragma(ROOT / "stateous" / "supervisor" / "outbox.py")
        held = postgres_durability() if self.backend == "postgres" else serve
        return f"{held}; the supervisor's outbox: {outbox}"

    def close(self) -> None:
        self.driver.close()
        for process in reversed(self.started):
            stop(process)
        if self.database:
            drop_database(self.database)


class Restate:
    """`restate-server` (one node, all roles) with `partitions` partitions and an invoker
    limited to 8 invocations at once, the bench's 8 slots; the service on hypercorn;
    the starter in a process of its own."""

    def __init__(self, partitions: int, tag: str) -> None:
        self.partitions, self.tag = partitions, tag
        self.label = (
            "Restate, 1 partition" if partitions == 1 else f"Restate, {partitions} partitions"
        )
        self.database: str | None = None
        self.processes: dict[str, int] = {}
        self.started: list[subprocess.Popen[Any]] = []

    def environment(self, folder: Path) -> dict[str, str]:
        return {
            **os.environ,
            "RESTATE_DEFAULT_NUM_PARTITIONS": str(self.partitions),
            "RESTATE_WORKER__INVOKER__CONCURRENT_INVOCATIONS_LIMIT": "8",
            "RESTATE_INGRESS__BIND_ADDRESS": f"127.0.0.1:{self.ingress}",
            "RESTATE_ADMIN__BIND_ADDRESS": f"127.0.0.1:{self.admin}",
            "RESTATE_BIND_ADDRESS": f"127.0.0.1:{free_port()}",
            "RESTATE_LISTEN_MODE": "tcp",
            "RESTATE_DISABLE_TELEMETRY": "true",
            "RESTATE_LOG_FILTER": "warn",
        }

    def open(self, folder: Path) -> None:
        self.ingress, self.admin, service = free_port(), free_port(), free_port()
        self.stamps_file = folder / "stamps"
        self.env = self.environment(folder)
        hypercorn = [str(restate_python()), "-m", "hypercorn", "peers_restate_service:app"]
        self.started.append(
            subprocess.Popen(
                [*hypercorn, "--bind", f"127.0.0.1:{service}"],
                cwd=HERE,
                env={**os.environ, "PEERS_STAMPS": str(self.stamps_file)},
                stdout=subprocess.DEVNULL,
                stderr=(folder / "hypercorn.log").open("w"),
            )
        )
        self.started.append(
            subprocess.Popen(
                [str(restate_server()), "--base-dir", str(folder / "restate-data"), "--no-logo"],
                cwd=folder,
                env=self.env,
                stdout=(folder / "restate.log").open("w"),
                stderr=subprocess.STDOUT,
            )
        )
        self.call(self.admin, "GET", "/health", None, until=30)
        self.call(
            self.admin, "POST", "/deployments", {"uri": f"http://127.0.0.1:{service}"}, until=30
        )
        self.call(self.ingress, "POST", "/Bench/one", "warm", until=30)
        starter = [sys.executable, str(HERE / "peers_starter.py"), "restate"]
        self.driver = Driver([*starter, str(self.ingress), str(self.admin)], HERE)
        self.processes = {
            "restate-server": self.started[1].pid,
            "service (hypercorn)": self.started[0].pid,
            "starter": self.driver.process.pid,
        }

    def call(self, port: int, method: str, path: str, body: Any, until: float = 0) -> Any:
        """One request, tried again for `until` seconds while the server comes up."""
        deadline = time.monotonic() + until
        while True:
            try:
                link = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
                headers = {"Content-Type": "application/json", "Accept": "application/json"}
                link.request(method, path, None if body is None else json.dumps(body), headers)
                answer = link.getresponse()
                raw = answer.read()
                if answer.status < 300:
                    return json.loads(raw) if raw else None
                failure = f"{answer.status} {raw[:200]!r}"
            except OSError as ex:
                failure = str(ex)
            if time.monotonic() > deadline:
                raise RuntimeError(f"Restate: {method} {path}: {failure}")
            time.sleep(0.2)

    def last_end(self, answer: dict[str, Any]) -> float:
        query = "SELECT max(completed_at) AS last FROM sys_invocation WHERE status = 'completed'"
        rows = self.call(self.admin, "POST", "/query", {"query": query})["rows"]
        return datetime.fromisoformat(rows[0]["last"].replace("Z", "+00:00")).timestamp()

    def ends(self, runs: list[str]) -> dict[str, float]:
        return {}

    def stamps(self, answer: dict[str, Any]) -> dict[str, float]:
        return read_stamps(self.stamps_file)

    def durability(self) -> str:
        dumped = subprocess.run(
            [str(restate_server()), "--dump-config"], env=self.env, capture_output=True, text=True
        ).stdout
        config = tomllib.loads(dumped)
        provider = config.get("bifrost", {}).get("default-provider", "?")
        fsync = not config.get("log-server", {}).get("rocksdb-disable-wal-fsync", False)
        partitions = config.get("default-num-partitions", "?")
        return (
            f"its log ({provider} loglet on the log-server): RocksDB WAL fsync "
            f"{'on' if fsync else 'off'}; {partitions} partition(s); invoker limit "
            f"{config.get('worker', {}).get('invoker', {}).get('concurrent-invocations-limit')}"
        )

    def close(self) -> None:
        self.driver.close()
        for process in reversed(self.started):
            stop(process)


class Dbos:
    """DBOS Transact in one process that starts the runs and runs them, on SQLite or on a
    Postgres database of its own."""

    def __init__(self, backend: str, tag: str) -> None:
        self.backend, self.tag = backend, tag
        self.label = f"DBOS, {'SQLite' if backend == 'sqlite' else 'Postgres'} (in-process)"
        self.database: str | None = None
        self.processes: dict[str, int] = {}

    def open(self, folder: Path) -> None:
        if self.backend == "postgres":
            self.database = f"peers_dbos_{self.tag}"
            url = create_database(self.database)
        else:
            url = f"sqlite:///{folder / 'dbos.sqlite'}"
        self.driver = Driver([str(dbos_python()), str(HERE / "peers_dbos_driver.py"), url], folder)
        self.settings = self.driver.answer()
        self.processes = {"DBOS process": self.driver.process.pid}

    def last_end(self, answer: dict[str, Any]) -> float:
        return answer["done"]

    def ends(self, runs: list[str]) -> dict[str, float]:
        return {}

    def stamps(self, answer: dict[str, Any]) -> dict[str, float]:
        return answer["stamps"]

    def durability(self) -> str:
        own = ", ".join(f"{name}={value}" for name, value in self.settings.items())
        return f"its connections: {own}"

    def close(self) -> None:
        self.driver.close()
        if self.database:
            drop_database(self.database)


System = Stateous | Restate | Dbos
