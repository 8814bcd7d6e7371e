"""Real `stateous supervise` processes, their folders, and small servers that stand in the way.

A test writes the `orders` graph file with `write_graph`, starts `stateous serve` with the
launcher of `tests.control.serving`, makes a supervisor's folder with `write_folder`
(`stateous init supervisor`, then one file of routines and its own stateous.yaml), and
starts `python -m stateous
supervise FOLDER` with `Supervisors.start`. The log lines of the supervisor are read on a
thread, so a test waits for one with `Supervised.wait_log`. Every process started here is
killed when its `Supervisors` closes, whatever the test did.
"""

from __future__ import annotations

import http.server
import re
import signal
import socket
import sqlite3
import subprocess
import textwrap
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

from stateous import END, START, Workflow
from stateous.compiler.compile import compile_workflow
from stateous.model.graph_file import checksum, dump, load
from tests.conftest import run_stateous
from tests.control.serving import STOP_TIMEOUT, command, environment

#: How long a supervisor may take to print its first line.
START_TIMEOUT = 20.0
#: A log line of the supervisor: time, logger, then the message.
LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} stateous\.supervisor: (.*)$")


class Item(msgspec.Struct, forbid_unknown_fields=True):
    """The context of an order: a title, and no other field."""

    title: str


class Verdict(msgspec.Struct):
    """The payload of `reviewed`."""

    approved: bool
    note: str = ""


def orders(review_timeout: str = "1h", context: type = Item) -> Workflow:
    """`orders`: draft (retries=1) submits, review approves to END or sends back to draft."""
    flow = Workflow("orders", context=context)
    draft = flow.state("draft", retries=1)
    review = flow.state("review", timeout=review_timeout)
    submitted = flow.event("submitted")
    reviewed = flow.event("reviewed", payload=Verdict)
    flow.transition(START, draft)
    flow.transition(draft, review, on=submitted)
    flow.transition(review, END, on=reviewed, when="payload.approved == true")
    flow.transition(review, draft, on=reviewed, otherwise=True)
    return flow


def write_straight_graph(path: Path, **draft: Any) -> Path:
    """Write `orders` without the way back at `path`: draft, with the options `draft`,
    submits to review, which ends the token."""
    flow = Workflow("orders", context=Item)
    first = flow.state("draft", **draft)
    review = flow.state("review")
    flow.transition(START, first)
    flow.transition(first, review, on=flow.event("submitted"))
    flow.transition(review, END, on=flow.event("reviewed", payload=Verdict))
    path.write_bytes(dump(compile_workflow(flow)))
    return path


def write_graph(path: Path, review_timeout: str = "1h", context: type = Item) -> str:
    """Write the graph file of `orders` at `path`; return its checksum.

    Another `review_timeout` or `context` model makes another version of the workflow,
    with another checksum.
    """
    data = dump(compile_workflow(orders(review_timeout, context)))
    path.write_bytes(data)
    return checksum(load(data))


#: What every file of routines starts with.
ROUTINE_IMPORTS = """\
from __future__ import annotations

import asyncio
import time
from pathlib import Path

from stateous import on_state

from contract import ItemContext, Verdict, events, states

HERE = Path(__file__).resolve().parent
"""

#: The routines of the happy path: draft submits (a second visit notes the verdict and
#: waits), review approves unless the title is "reject me".
ORDERS = """
@on_state(states.draft)
def draft(ctx: ItemContext) -> events.submitted | None:
    if ctx.visit > 1:
        ctx.note(f"sent back: {ctx.entered_by.payload['note']}")
        return None
    return events.submitted


@on_state(states.review)
def review(ctx: ItemContext) -> events.reviewed:
    if ctx["title"] == "reject me":
        return events.reviewed(Verdict(approved=False, note="not this one"))
    return events.reviewed(Verdict(approved=True))
"""

#: A review routine that approves at once, for folders that test the draft.
APPROVE = """
@on_state(states.review)
def review(ctx: ItemContext) -> events.reviewed:
    return events.reviewed(Verdict(approved=True))
"""


def write_settings(folder: Path, url: str, name: str = "box-1", tasks: int = 4) -> None:
    (folder / "stateous.yaml").write_text(f'url: "{url}"\ntasks: {tasks}\nname: {name}\n')


def write_folder(
    folder: Path,
    url: str,
    graph: Path,
    *routines: str,
    name: str = "box-1",
    tasks: int = 4,
) -> Path:
    """A supervisor's folder made by `stateous init supervisor GRAPH FOLDER`; return it.

    The stubs that init writes give way to one file of `routines` (each piece dedented;
    the routines of the happy path without any), and stateous.yaml
    names the control plane at `url`, the supervisor `name` and its `tasks`.
    """
    made = run_stateous("init", "supervisor", str(graph), str(folder), cwd=folder.parent)
    assert made.returncode == 0, made.stderr
    for stub in ("draft.py", "review.py"):
        (folder / stub).unlink()
    write_settings(folder, url, name, tasks)
    pieces = [textwrap.dedent(piece) for piece in routines or (ORDERS,)]
    (folder / "routines.py").write_text(ROUTINE_IMPORTS + "\n".join(pieces))
    return folder


def outbox(folder: Path) -> list[tuple[str, int, int, str]]:
    """The messages in the folder's outbox: (kind, task, attempt, token), oldest first."""
    path = folder / ".stateous" / "outbox.db"
    if not path.exists():
        return []
    with sqlite3.connect(path, timeout=10) as connection:
        rows = connection.execute(
            "SELECT kind, task, attempt, token FROM messages ORDER BY id"
        ).fetchall()
    connection.close()
    return [(kind, task, attempt, token) for kind, task, attempt, token in rows]


def wait_until(
    check: Callable[[], Any], what: str, timeout: float = 10.0, every: float = 0.05
) -> Any:
    """Poll `check` until it returns something true; return it, or fail naming `what`."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout} seconds (last: {result!r})")
        time.sleep(every)


def free_port() -> int:
    """A port that nothing listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Supervised:
    """One running `stateous supervise` process, with its stderr read on a thread."""

    def __init__(self, process: subprocess.Popen[str], folder: Path) -> None:
        self.process = process
        self.folder = folder
        self.lines: list[str] = []
        self._changed = threading.Condition()  # on an RLock: `log` takes it again
        self._ended = False
        self._reader = threading.Thread(target=self._read, name="supervise-stderr", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            with self._changed:
                self.lines.append(line.rstrip("\n"))
                self._changed.notify_all()
        with self._changed:
            self._ended = True
            self._changed.notify_all()

    @property
    def log(self) -> list[str]:
        """The messages of the supervisor's log lines so far, without time and logger."""
        with self._changed:
            found = [LOG_LINE.match(line) for line in self.lines]
        return [match[1] for match in found if match]

    def wait_log(self, message: str | re.Pattern[str], timeout: float = 10.0) -> str:
        """Wait for a log message equal to `message` (or matching the pattern); return it."""

        def fits(text: str) -> bool:
            return (
                bool(message.fullmatch(text))
                if isinstance(message, re.Pattern)
                else (text == message)
            )

        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                for text in self.log:
                    if fits(text):
                        return text
                left = deadline - time.monotonic()
                if self._ended or left <= 0:
                    raise AssertionError(
                        f"no log line {message!r} within {timeout} s; stderr: {self.lines}"
                    )
                self._changed.wait(min(left, 0.5))

    def send(self, sig: int) -> None:
        """Send a signal, if the process still runs."""
        if self.process.poll() is None:
            self.process.send_signal(sig)

    def wait(self, timeout: float = STOP_TIMEOUT) -> int:
        """Wait for the process to end and its stderr to be read; return the exit code."""
        code = self.process.wait(timeout=timeout)
        self._reader.join(timeout=timeout)
        return code

    def stop(self, sig: int = signal.SIGTERM, timeout: float = STOP_TIMEOUT) -> int:
        self.send(sig)
        return self.wait(timeout)

    def kill(self) -> int:
        """kill -9 the process and wait for it."""
        return self.stop(signal.SIGKILL)


class Supervisors:
    """Starts `stateous supervise` processes, and kills them all when closed."""

    def __init__(self, cwd: Path) -> None:
        self.cwd = cwd
        self.processes: list[Supervised] = []

    def start(self, folder: Path, env: dict[str, str] | None = None) -> Supervised:
        """Start `supervise FOLDER`, with `env` added to the environment, without waiting."""
        process = subprocess.Popen(
            command("supervise", str(folder)),
            cwd=self.cwd,
            env={**environment(), **(env or {})},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        supervised = Supervised(process, folder)
        self.processes.append(supervised)
        return supervised

    def serving(
        self, folder: Path, name: str = "box-1", env: dict[str, str] | None = None
    ) -> Supervised:
        """Start `supervise FOLDER` and wait until it says what it serves."""
        supervised = self.start(folder, env)
        supervised.wait_log(re.compile(re.escape(name) + r" serves .*"), START_TIMEOUT)
        return supervised

    def refused(self, folder: Path) -> tuple[int, list[str]]:
        """Run `supervise FOLDER` that must not start: its exit code and its stderr lines."""
        supervised = self.start(folder)
        code = supervised.wait(START_TIMEOUT)
        return code, supervised.lines

    def close(self) -> None:
        for supervised in self.processes:
            if supervised.process.poll() is None:
                supervised.process.kill()
            try:
                supervised.wait()
            except subprocess.TimeoutExpired:
                continue
            if supervised.process.stderr is not None:
                supervised.process.stderr.close()


# a proxy that loses the answer of a claim


def _read_message(stream: Any, first: bytes) -> tuple[bytes, dict[str, str], bytes]:
    """Read the rest of an HTTP/1.1 message whose first line is `first`; body by length."""
    headers: dict[str, str] = {}
    raw = [first]
    while True:
        line = stream.readline()
        raw.append(line)
        if line in (b"\r\n", b"\n", b""):
            break
        name, _, value = line.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length", "0"))
    body = stream.read(length) if length else b""
    return b"".join(raw), headers, body


def _asks(first: bytes) -> str | None:
    """What a request line asks that may be granted a task: "claim", "report", or None."""
    if first.startswith(b"POST /tasks/claim "):
        return "claim"
    if first.startswith(b"POST /tasks/") and b"/report " in first:
        return "report"
    return None


def _grant_in(asks: str | None, status_line: bytes, answer: bytes) -> dict[str, Any] | None:
    """The grant an answer carries: a claim's (status 200), or a report's `grant`."""
    if asks is None or b" 200 " not in status_line:
        return None
    decoded = msgspec.json.decode(answer)
    return dict(decoded) if asks == "claim" else decoded.get("grant")


def _refusal(status: int, code: str, error: str) -> bytes:
    """An HTTP/1.1 answer that refuses with `code`, as the control plane words one."""
    body = msgspec.json.encode({"error": error, "code": code})
    head = f"HTTP/1.1 {status} Refused\r\nContent-Type: application/json\r\n"
    return f"{head}Content-Length: {len(body)}\r\n\r\n".encode() + body


#: The answer of a control plane whose database is busy.
BUSY = _refusal(503, "database_busy", "the database is busy; try again")


class ClaimDropper:
    """A TCP proxy to a control plane that loses the first answer that grants a task.

    It forwards each request of a client on a connection of its own to the control
    plane. The first answer that grants a task to a `losing` request (a "claim", or a
    "report" that asked `next`; "spend": the first spend's answer; None: none) is not
    forwarded:
    the proxy closes the client's connection instead. It keeps the body of every claim it
    saw, and every grant it forwarded, in order. After it lost that answer, it closes
    every connection at its first request for `cut_for` seconds, as a control plane that
    cannot be reached; the first `busy` reports that ask `next` it refuses itself, as a
    control plane whose database is busy.
    """

    def __init__(
        self,
        upstream_port: int,
        losing: str | None = "claim",
        hold: float = 0,
        cut_for: float = 0,
        busy: int = 0,
    ) -> None:
        self.upstream_port = upstream_port
        self.losing = losing
        #: How long each report that asks `next` is held before it is forwarded.
        self.hold = hold
        self.cut_for = cut_for
        #: How many more reports that ask `next` to refuse with `database_busy`.
        self.busy = busy
        self._cut_until = 0.0
        #: The body of every report, in the order they came.
        self.reports: list[dict[str, Any]] = []
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self.listener.getsockname()[1])
        self.url = f"http://127.0.0.1:{self.port}"
        self.claims: list[dict[str, Any]] = []
        self.dropped: list[dict[str, Any]] = []
        self.granted: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._open = True
        threading.Thread(target=self._accept, name="claim-dropper", daemon=True).start()

    def _accept(self) -> None:
        while self._open:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
        reader, answers = client.makefile("rb"), upstream.makefile("rb")
        try:
            while True:
                first = reader.readline()
                if not first:
                    return
                head, _, body = _read_message(reader, first)
                if time.monotonic() < self._cut_until:
                    return
                if _asks(first) == "report":
                    report = msgspec.json.decode(body)
                    with self._lock:
                        self.reports.append(report)
                        refused = self.busy > 0 and "next" in report
                        if refused:
                            self.busy -= 1
                    if refused:
                        client.sendall(BUSY)
                        continue
                    time.sleep(self.hold if "next" in report else 0)
                upstream.sendall(head + body)
                status_line = answers.readline()
                answer_head, _, answer = _read_message(answers, status_line)
                asks = _asks(first)
                grant = _grant_in(asks, status_line, answer)
                with self._lock:
                    if asks == "claim":
                        self.claims.append(msgspec.json.decode(body))
                    spend = self.losing == "spend" and b"/spend " in first
                    lost = spend or (grant is not None and asks == self.losing)
                    if lost and not self.dropped:
                        self.dropped.append({"ask": msgspec.json.decode(body), "grant": grant})
                        self._cut_until = time.monotonic() + self.cut_for
                        return
                    if grant is not None:
                        self.granted.append(grant)
                client.sendall(answer_head + answer)
        except OSError:
            return
        finally:
            reader.close()
            answers.close()
            client.close()
            upstream.close()

    def close(self) -> None:
        self._open = False
        self.listener.close()


# servers that are not a control plane


class _NotStateous(http.server.BaseHTTPRequestHandler):
    status = 404
    body = b"<html><body>Not Found</body></html>"

    def do_GET(self) -> None:
        self.send_response(self.status)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, format: str, *args: Any) -> None:
        return


class NotAControlPlane:
    """A small web server that answers every GET with `status` and a page of HTML."""

    def __init__(self, status: int) -> None:
        handler = type("Handler", (_NotStateous,), {"status": status})
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
