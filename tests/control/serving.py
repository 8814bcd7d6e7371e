"""`stateous serve` as a real process: graph files, a launcher, and a small HTTP client.

A test writes a graph file with `write_graph`, starts `python -m stateous serve` with
`Launcher.serve`, reads the URL from the `serving on` line, talks HTTP to it through
`Served.request`, and stops it with SIGTERM, SIGINT or SIGKILL. Every process that a
launcher started is killed when the launcher closes, whatever the test did.
"""

from __future__ import annotations

import http.client
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import msgspec

from stateous import END, START, Workflow
from stateous.compiler.compile import compile_workflow
from stateous.model.graph_file import GraphFile, dump
from tests.conftest import ROOT

#: How long a process may take to print its first line (serving or error).
START_TIMEOUT = 20.0
#: How long a process may take to stop after a signal.
STOP_TIMEOUT = 15.0
SERVING = re.compile(r"^serving on (http://(\S+):(\d+)) \(Ctrl-C stops\)$")

Answer = tuple[int, Any]


class Item(msgspec.Struct):
    """The context of an order."""

    title: str


class Verdict(msgspec.Struct):
    """The payload of `reviewed`."""

    approved: bool


class Job(msgspec.Struct):
    """The context of the `timers` workflow: `kind` picks the first state."""

    kind: str


def orders(
    *,
    review_timeout: str = "1h",
    draft_retries: int = 1,
    guard: str = "payload.approved == true",
    extra_state: bool = False,
) -> Workflow:
    """The `orders` workflow: draft, then review, whose verdict ends the token or sends it back.

    `review_timeout` and `draft_retries` change only how the work is done; `guard` and
    `extra_state` change the structure.
    """
    flow = Workflow("orders", context=Item)
    draft = flow.state("draft", retries=draft_retries)
    review = flow.state("review", timeout=review_timeout)
    submitted = flow.event("submitted")
    reviewed = flow.event("reviewed", payload=Verdict)
    flow.transition(START, draft)
    flow.transition(draft, review, on=submitted)
    flow.transition(review, END, on=reviewed, when=guard)
    if extra_state:
        rework = flow.state("rework")
        flow.transition(review, rework, on=reviewed, otherwise=True)
        flow.transition(rework, review, on=submitted)
    else:
        flow.transition(review, draft, on=reviewed, otherwise=True)
    return flow


def timers(timeout: str = "2s") -> Workflow:
    """The `timers` workflow: `waiting` ends on its timeout; `stuck` has no transition on it."""
    flow = Workflow("timers", context=Job)
    waiting = flow.state("waiting", timeout=timeout)
    stuck = flow.state("stuck", timeout=timeout)
    poke = flow.event("poke")
    flow.transition(START, waiting, when="ctx['kind'] == 'wait'")
    flow.transition(START, stuck, otherwise=True)
    flow.transition(waiting, END, on="timeout")
    flow.transition(stuck, END, on=poke)
    return flow


def write_graph(path: Path, flow: Workflow) -> GraphFile:
    """Compile `flow` and write its graph file at `path`; return the graph."""
    graph = compile_workflow(flow)
    path.write_bytes(dump(graph))
    return graph


def environment() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}


def command(*args: str) -> list[str]:
    return [sys.executable, "-m", "stateous", *args]


class ServeFailed(AssertionError):
    """The process ended, or said nothing in time, instead of serving."""


class Served:
    """One running `stateous serve` process and a client for its API."""

    def __init__(self, process: subprocess.Popen[str], started: float) -> None:
        self.process = process
        self.started = started
        self.lines: list[str] = []
        self._lines: queue.SimpleQueue[str | None] = queue.SimpleQueue()
        self._reader = threading.Thread(target=self._read, name="serve-stderr", daemon=True)
        self._reader.start()
        self.url = ""
        self.host = ""
        self.port = 0
        self.before: list[str] = []

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self._lines.put(line.rstrip("\n"))
        self._lines.put(None)

    def next_line(self, timeout: float) -> str | None:
        """The next line of stderr, or None at its end; raise ServeFailed after `timeout`."""
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            raise ServeFailed(f"no line on stderr within {timeout} seconds") from None
        if line is not None:
            self.lines.append(line)
        return line

    def wait_serving(self, timeout: float = START_TIMEOUT) -> None:
        """Read stderr until the `serving on` line; remember the lines before it."""
        deadline = time.monotonic() + timeout
        while True:
            line = self.next_line(max(0.0, deadline - time.monotonic()))
            if line is None:
                code = self.process.wait(timeout=STOP_TIMEOUT)
                raise ServeFailed(f"serve ended with {code} instead of serving: {self.lines}")
            found = SERVING.match(line)
            if found:
                self.url, self.host, self.port = found[1], found[2], int(found[3])
                self.before = self.lines[:-1]
                return

    def rest(self, timeout: float = STOP_TIMEOUT) -> list[str]:
        """Every line of stderr after the ones already read, until the process ends."""
        deadline = time.monotonic() + timeout
        start = len(self.lines)
        while self.next_line(max(0.0, deadline - time.monotonic())) is not None:
            pass
        return self.lines[start:]

    # HTTP

    def connect(self, timeout: float = 10.0) -> http.client.HTTPConnection:
        """A new keep-alive connection to the server."""
        host = "127.0.0.1" if self.host in ("0.0.0.0", "localhost") else self.host
        return http.client.HTTPConnection(host, self.port, timeout=timeout)

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        headers: dict[str, str] | None = None,
        connection: http.client.HTTPConnection | None = None,
    ) -> Answer:
        """Send one request (on `connection`, or a fresh one); return the status and the JSON."""
        own = connection is None
        link = self.connect() if connection is None else connection
        try:
            data = None if body is None else msgspec.json.encode(body)
            typed = data is not None or method in ("POST", "PUT")
            sent = {"Content-Type": "application/json"} if typed else {}
            link.request(method, path, body=data, headers={**sent, **(headers or {})})
            response = link.getresponse()
            raw = response.read()
            return response.status, msgspec.json.decode(raw) if raw else None
        finally:
            if own:
                link.close()

    def ok(self, method: str, path: str, body: Any = None) -> Any:
        """Send a request that must succeed (2xx); return its JSON."""
        status, answer = self.request(method, path, body)
        assert 200 <= status < 300, (method, path, status, answer)
        return answer

    def history(self, token: str) -> list[dict[str, Any]]:
        return self.ok("GET", f"/tokens/{token}/history")  # type: ignore[no-any-return]

    def kinds(self, token: str) -> list[str]:
        return [entry["kind"] for entry in self.history(token)]

    def wait_history(
        self, token: str, kind: str, count: int = 1, timeout: float = 10.0, every: float = 0.2
    ) -> list[dict[str, Any]]:
        """Poll the history until it has `count` entries of `kind`; return the history."""
        deadline = time.monotonic() + timeout
        while True:
            entries = self.history(token)
            if sum(entry["kind"] == kind for entry in entries) >= count:
                return entries
            if time.monotonic() > deadline:
                shown = [entry["kind"] for entry in entries]
                raise AssertionError(f"no {kind!r} in {timeout} s; the history of {token}: {shown}")
            time.sleep(every)

    # stopping

    def stop(self, sig: int = signal.SIGTERM, timeout: float = STOP_TIMEOUT) -> int:
        """Send `sig`, wait for the process to end and return its exit code."""
        if self.process.poll() is None:
            self.process.send_signal(sig)
        code = self.process.wait(timeout=timeout)
        self.rest(timeout)
        return code

    def kill(self) -> int:
        """kill -9 the process and wait for it."""
        return self.stop(signal.SIGKILL)


class Launcher:
    """Starts `stateous serve` processes in a folder, and kills them all when closed."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.processes: list[Served] = []

    def spawn(
        self,
        graph: Path,
        db: Path | None = None,
        *options: str,
        listen: str | None = "127.0.0.1:0",
        sigint_ignored: bool = False,
    ) -> Served:
        """Start `serve GRAPH --db sqlite:///DB --listen LISTEN OPTIONS`, without waiting.

        `sigint_ignored` starts it as a shell script starts a command in the background:
        with SIGINT ignored (`trap "" INT`), which the command inherits.
        """
        args = ["serve", str(graph)]
        if db is not None:
            args += ["--db", f"sqlite:///{db}"]
        if listen is not None:
            args += ["--listen", listen]
        argv = command(*args, *options)
        if sigint_ignored:
            argv = ["sh", "-c", 'trap "" INT; exec "$@"', "sh", *argv]
        started = time.monotonic()
        process = subprocess.Popen(
            argv,
            cwd=self.folder,
            env=environment(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        served = Served(process, started)
        self.processes.append(served)
        return served

    def serve(self, graph: Path, db: Path | None = None, *options: str, **keywords: Any) -> Served:
        """Start serve and wait for its `serving on` line."""
        served = self.spawn(graph, db, *options, **keywords)
        served.wait_serving()
        return served

    def refused(
        self, graph: Path, db: Path | None = None, *options: str, **keywords: Any
    ) -> tuple[int, list[str], float]:
        """Start serve that must not start: its exit code, its stderr lines, its seconds."""
        served = self.spawn(graph, db, *options, **keywords)
        lines = served.rest(START_TIMEOUT)
        code = served.process.wait(timeout=STOP_TIMEOUT)
        return code, lines, time.monotonic() - served.started

    def close(self) -> None:
        for served in self.processes:
            if served.process.poll() is None:
                served.process.kill()
            try:
                served.process.wait(timeout=STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                continue
            served._reader.join(timeout=STOP_TIMEOUT)
            if served.process.stderr is not None:
                served.process.stderr.close()
