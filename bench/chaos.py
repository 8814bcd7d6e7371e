"""Chaos run: tokens through real `serve` and `supervise` processes while things break.

Run: .venv/bin/python bench/chaos.py [--seed 1] [--tokens 300] [--supervisors 4] [--kills 10]
     [--control-kills 2] [--cut 0.2] [--lease 5s] [--db sqlite|postgresql://...] [--standby]
     [--no-faults]

A workflow of four states (draft, review and ship have routines and retries; approval
waits for an `approved` event that this run fires from outside with an Idempotency-Key,
some twice on purpose) runs on one `stateous serve` and several `stateous supervise`
processes. Between them sits a proxy of this run's own (chaos_proxy.py) that cuts a
fraction of the requests at a random point. On a schedule that the seed fixes (by the
share of tokens ended), supervisors and the control plane get `kill -9`; a supervisor
starts again on the same folder, so its outbox drains, and the control plane on the same
database and port.

With `--standby` there are two control planes on the database, on two ports: one serves,
the other waits as `serve --standby`. Every client has a port on the proxy for each (a
supervisor's `stateous.yaml` lists both URLs) and moves to the other on a refused
connection or `not_serving`. A control-plane kill hits the one that serves; the standby
takes over, and the killed one starts again, after its pause, as the new standby, so that
there are always two. The summary adds the takeovers and the time from each kill to the
standby serving; a kill that no takeover followed is a failed check.

At the end the run reads every token and its history over HTTP and checks that:

- every token ended;
- no event was applied twice (one `approved` per token, one outcome per visit);
- no task was claimed by two supervisors at once (no attempt began while another lived);
- no report, note or memory write of an ended attempt was accepted;
- every supervisor's outbox is empty;
- the leases that ended are no more than the tasks the killed supervisors held when
  they were killed.

It prints a summary and exits 1 when a check fails. `--no-faults` makes the same run
without cuts or kills, for the time it takes.
"""

from __future__ import annotations

import argparse
import http.client
import os
import random
import re
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(ROOT), str(HERE)]

import msgspec  # noqa: E402
from chaos_proxy import CUT_POINTS, Proxy  # noqa: E402

from stateous import END, START, Workflow  # noqa: E402
from stateous.compiler.compile import compile_workflow  # noqa: E402
from stateous.model.durations import parse_duration  # noqa: E402
from stateous.model.graph_file import dump  # noqa: E402
from stateous.model.vocabulary import Kind, TaskStatus, TokenStatus  # noqa: E402

SERVING = re.compile(r"serving on http://127\.0\.0\.1:(\d+) \(Ctrl-C stops\)")
STANDBY = re.compile(r"standby on http://127\.0\.0\.1:(\d+): ")
#: The error of the failed attempt that the clock records when a lease ends.
LEASE_ENDED = re.compile(r" stopped answering: ")
ENDED = (TokenStatus.COMPLETED, TokenStatus.FAILED, TokenStatus.CANCELLED)
#: How long a process may take to start serving, or to stop after a signal.
START_TIMEOUT = 30.0
STOP_TIMEOUT = 15.0
#: The most tokens one `GET /tokens` lists.
LIST_LIMIT = 1000


class Job(msgspec.Struct):
    number: int


def workflow() -> Workflow:
    flow = Workflow("chaos", context=Job)
    draft = flow.state("draft", retries=3)
    review = flow.state("review", retries=3)
    approval = flow.state("approval")
    ship = flow.state("ship", retries=3)
    submitted, reviewed = flow.event("submitted"), flow.event("reviewed")
    approved, shipped = flow.event("approved"), flow.event("shipped")
    flow.transition(START, draft)
    flow.transition(draft, review, on=submitted)
    flow.transition(review, approval, on=reviewed)
    flow.transition(approval, ship, on=approved)
    flow.transition(ship, END, on=shipped)
    return flow


#: The routines: every fifth draft fails its first attempt on purpose; each writes notes,
#: and draft a memory key; review works longest, so that kills find tasks running.
ROUTINES = """\
import time

from stateous import on_state

from contract import JobContext, events, states

WORK = {work}


@on_state(states.draft)
def draft(ctx: JobContext) -> events.submitted:
    ctx.note(f"drafting {{ctx['number']}}, attempt {{ctx.attempt}}")
    ctx.memory["drafted"] = ctx.attempt
    if ctx["number"] % 5 == 0 and ctx.attempt == 1:
        raise RuntimeError("the first draft fails on purpose")
    time.sleep(WORK)
    return events.submitted


@on_state(states.review)
def review(ctx: JobContext) -> events.reviewed:
    ctx.note("reviewing")
    time.sleep(WORK * (1 + ctx["number"] % 3))
    ctx.note("reviewed")
    return events.reviewed


@on_state(states.ship)
def ship(ctx: JobContext) -> events.shipped:
    time.sleep(WORK / 2)
    ctx.note("shipped")
    return events.shipped
"""


def environment() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}


def stateous(*args: str) -> list[str]:
    return [sys.executable, "-m", "stateous", *args]


# the database, read directly for progress and for what a killed supervisor held


class Database:
    """Read-only questions to the control plane's database, outside the control plane."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.sqlite = url.startswith("sqlite:///")

    def rows(self, sql: str) -> list[tuple[Any, ...]]:
        with self._connect() as run:
            return list(run(sql))

    @contextmanager
    def _connect(self) -> Iterator[Callable[[str], Any]]:
        if self.sqlite:
            path = self.url.removeprefix("sqlite:///")
            with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=10)) as link:
                yield lambda sql: link.execute(sql).fetchall()
            return
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as link:
            yield lambda sql: link.execute(sql).fetchall()

    def ended(self) -> int:
        words = ", ".join(f"'{status}'" for status in ENDED)
        return int(self.rows(f"SELECT count(*) FROM tokens WHERE status IN ({words})")[0][0])

    def held_by(self, supervisor: str) -> set[tuple[int, int]]:
        """The tasks that `supervisor` holds now, each with the attempt it holds."""
        rows = self.rows(
            f"SELECT id, attempt FROM tasks WHERE status = '{TaskStatus.CLAIMED}' "
            f"AND claimed_by = '{supervisor}'"
        )
        return {(int(task), int(attempt)) for task, attempt in rows}


def outbox_size(folder: Path) -> int:
    path = folder / ".stateous" / "outbox.db"
    if not path.exists():
        return 0
    with closing(sqlite3.connect(path, timeout=10)) as link:
        return int(link.execute("SELECT count(*) FROM messages").fetchone()[0])


# the processes


class ControlPlane:
    """`stateous serve` on one database and one port, started again after each kill."""

    def __init__(self, work: Path, graph: Path, db: str, lease: str, name: str = "serve") -> None:
        self.work, self.graph, self.db, self.lease = work, graph, db, lease
        self.name = name
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None
        self.log = work / f"{name}.log"
        self._seen = 0  # where this process's part of the log begins

    def start(self, standby: bool = False) -> None:
        """Start it and wait until it serves, or, with `standby`, until it waits as one."""
        listen = f"127.0.0.1:{self.port}"
        argv = stateous(
            "serve", str(self.graph), "--db", self.db, "--listen", listen, "--lease", self.lease
        )
        self._seen = len(self.log.read_text()) if self.log.exists() else 0
        with self.log.open("a") as log:
            self.process = subprocess.Popen(
                [*argv, *(["--standby"] if standby else [])],
                cwd=self.work,
                env=environment(),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=log,
            )
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            found = SERVING.search(self._said()) or (standby and STANDBY.search(self._said()))
            if found:
                self.port = int(found[1])
                return
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"{self.name} did not start: {self._said()}")
            time.sleep(0.02)

    def _said(self) -> str:
        return self.log.read_text()[self._seen :]

    @property
    def serving(self) -> bool:
        """Whether this process has said that it serves (a standby, once it took over)."""
        return self.alive and SERVING.search(self._said()) is not None

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def kill(self) -> None:
        assert self.process is not None
        self.process.kill()
        self.process.wait()

    def stop(self) -> None:
        stop(self.process)


@dataclass
class Box:
    """One supervisor's folder, its ports on the proxy, and its process of the moment."""

    name: str
    folder: Path
    ports: list[int]
    process: subprocess.Popen[bytes] | None = None
    restart_at: float | None = None

    def start(self) -> None:
        with (self.folder.parent / f"{self.name}.log").open("a") as log:
            self.process = subprocess.Popen(
                stateous("supervise", str(self.folder)),
                cwd=self.folder.parent,
                env=environment(),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=log,
            )
        self.restart_at = None

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None


def stop(process: subprocess.Popen[bytes] | None) -> None:
    """SIGTERM, then SIGKILL when it does not stop in time."""
    if process is None or process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=STOP_TIMEOUT)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def make_folder(
    work: Path, graph: Path, name: str, ports: list[int], work_seconds: float, eager: bool = True
) -> Path:
    folder = work / name
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
    (folder / "routines.py").write_text(ROUTINES.format(work=work_seconds))
    urls = "".join(f'\n  - "http://127.0.0.1:{port}"' for port in ports)
    eager_line = f"eager: {'true' if eager else 'false'}\n"
    (folder / "stateous.yaml").write_text(f"url:{urls}\ntasks: 4\nname: {name}\n{eager_line}")
    return folder


# the driver: starts tokens and fires `approved` through the proxy, trying again after a cut


class DriverFailed(Exception):
    """The control plane refused what the outside world sent."""


class Driver:
    """The outside world: starts the tokens, and fires `approved` at tokens in approval.

    It knows a port per control plane, as a client with several URLs does: it moves to the
    next one when a connection fails or the answer is `not_serving`.
    """

    def __init__(self, ports: list[int], tokens: list[str], twice: set[str]) -> None:
        self.ports = ports
        self._turn = 0
        self.tokens = tokens
        self.twice = twice
        self.fired: set[str] = set()
        self.duplicates = 0  # answers that said a fire was a duplicate
        self.stopped = threading.Event()
        self.failure: str | None = None
        self.started_at = 0.0
        self._connection: http.client.HTTPConnection | None = None

    def call(self, method: str, path: str, body: Any = None, key: str | None = None) -> Any:
        """Send until an answer comes, over a new connection after each failure."""
        headers = {"Content-Type": "application/json"}
        if key is not None:
            headers["Idempotency-Key"] = key
        data = msgspec.json.encode(body if body is not None else {})
        while not self.stopped.is_set():
            if self._connection is None:
                port = self.ports[self._turn % len(self.ports)]
                self._connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            try:
                self._connection.request(method, path, body=data, headers=headers)
                response = self._connection.getresponse()
                raw = response.read()
            except (OSError, http.client.HTTPException):
                self._next()
                continue
            if response.status == 503:  # busy: the same again; not serving: the next one
                if b'"not_serving"' in raw:
                    self._next()
                time.sleep(0.05)
                continue
            if response.status >= 300:
                raise DriverFailed(f"{method} {path}: {response.status} {raw!r}")
            return msgspec.json.decode(raw)
        return None

    def _next(self) -> None:
        """Close the connection; the next one goes to the next control plane."""
        assert self._connection is not None
        self._connection.close()
        self._connection = None
        self._turn += 1
        time.sleep(0.05)

    def run(self) -> None:
        try:
            self._run()
        except DriverFailed as ex:
            self.failure = str(ex)

    def _run(self) -> None:
        self.started_at = time.monotonic()
        for token in self.tokens:
            number = int(token.rsplit("-", 1)[1])
            self.call("POST", "/tokens", {"token": token, "context": {"number": number}})
        while not self.stopped.is_set():
            listed = self.call("GET", f"/tokens?status=active&limit={LIST_LIMIT}", None) or []
            for token in listed:
                if token["state"] == "approval" and token["token"] not in self.fired:
                    self.fire(token["token"])
            if len(self.fired) == len(self.tokens):
                return
            self.stopped.wait(0.1)

    def fire(self, token: str) -> None:
        for _ in range(2 if token in self.twice else 1):
            answer = self.call("POST", f"/tokens/{token}/events/approved", {}, f"approve-{token}")
            if answer is None:
                return
            self.duplicates += bool(answer.get("duplicate"))
        self.fired.add(token)


# the schedule of kills


@dataclass(order=True)
class Fault:
    """A kill when this share of the tokens has ended: of a supervisor, or of serve."""

    at: float
    what: str = field(compare=False)  # "supervisor" or "control"
    box: int = field(compare=False, default=0)
    pause: float = field(compare=False, default=0.0)  # seconds until it starts again


def schedule(rng: random.Random, kills: int, control_kills: int, boxes: int, lease: float):
    """The kills of a run, in order; the seed fixes when, which, and how long each is down."""
    faults = [
        Fault(
            rng.uniform(0.05, 0.85), "supervisor", rng.randrange(boxes), rng.uniform(0, 0.5) * lease
        )
        for _ in range(kills)
    ]
    faults += [
        Fault(rng.uniform(0.1, 0.8), "control", pause=rng.uniform(0.5, 1.5) * lease)
        for _ in range(control_kills)
    ]
    return sorted(faults)


# the run


@dataclass
class Tally:
    """What happened during the run, for the summary and the lease check."""

    supervisor_kills: int = 0
    control_kills: int = 0
    #: (task, attempt) of every task that a supervisor held when it was killed.
    held_at_kills: set[tuple[int, int]] = field(default_factory=set)
    #: With a standby: seconds from each kill of the serving control plane to the next serving.
    takeovers: list[float] = field(default_factory=list)
    wall: float = 0.0


class Run:
    def __init__(self, args: argparse.Namespace, work: Path) -> None:
        self.args = args
        self.work = work
        self.lease = parse_duration(args.lease)
        self.rng = random.Random(args.seed)
        self.graph = work / "chaos.json"
        self.graph.write_bytes(dump(compile_workflow(workflow())))
        db = args.db if args.db != "sqlite" else f"sqlite:///{work / 'chaos.db'}"
        self.database = Database(db)
        names = ["serve-a", "serve-b"] if args.standby else ["serve"]
        self.planes = [ControlPlane(work, self.graph, db, args.lease, name) for name in names]
        self.serving = 0  # the index of the plane that serves, or served last
        self.tally = Tally()
        self.boxes: list[Box] = []
        self.proxy: Proxy | None = None
        #: When the last kill of the control plane was, until the killed one is back,
        #: and when it may start again.
        self.killed_at: float | None = None
        self.back_at = 0.0

    @property
    def control(self) -> ControlPlane:
        """The control plane that serves, or served last."""
        return self.planes[self.serving]

    def setup(self) -> Driver:
        for index, plane in enumerate(self.planes):
            plane.start(standby=index > 0)
        self.proxy = Proxy(self.control.port, self.args.cut, self.rng.randrange(2**32))
        for number in range(1, self.args.supervisors + 1):
            name = f"box-{number}"
            ports = self.listen(name)
            folder = make_folder(
                self.work, self.graph, name, ports, self.args.work, not self.args.no_eager
            )
            self.boxes.append(Box(name, folder, ports))
        for box in self.boxes:
            box.start()
        tokens = [f"T-{number}" for number in range(1, self.args.tokens + 1)]
        twice = {token for token in tokens if self.rng.random() < 0.2}
        return Driver(self.listen("driver"), tokens, twice)

    def listen(self, client: str) -> list[int]:
        """The client's ports on the proxy, one per control plane."""
        assert self.proxy is not None
        return [self.proxy.listen(client, plane.port) for plane in self.planes]

    def drive(self, driver: Driver) -> bool:
        """Run the kills while tokens move; True when every token ended in time."""
        faults = schedule(
            self.rng,
            self.args.kills,
            self.args.control_kills,
            self.args.supervisors,
            self.lease,
        )
        thread = threading.Thread(target=driver.run, name="driver", daemon=True)
        thread.start()
        deadline = time.monotonic() + self.args.timeout
        try:
            while time.monotonic() < deadline:
                if driver.failure is not None:
                    return False
                ended = self.database.ended()
                if ended >= self.args.tokens:
                    self.tally.wall = time.monotonic() - driver.started_at
                    return True
                now = time.monotonic()
                self.watch_control(now)
                for box in self.boxes:
                    if box.restart_at is not None and now >= box.restart_at:
                        box.start()
                while faults and ended >= faults[0].at * self.args.tokens:
                    fault = faults[0]
                    if fault.what == "control":
                        if not self.kill_control(fault):
                            break  # one is down: this kill waits until both are back
                    elif not self.kill_box(fault):
                        break
                    faults.pop(0)
                time.sleep(0.05)
            return False
        finally:
            self.finish_control()
            driver.stopped.set()
            thread.join(timeout=STOP_TIMEOUT)

    def finish_control(self) -> None:
        """Start again at once a control plane still down at the end."""
        for plane in self.planes:
            if not plane.alive:
                plane.start(standby=len(self.planes) > 1)
        self.killed_at = None

    def kill_control(self, fault: Fault) -> bool:
        """kill -9 the serving control plane, when every control plane is up.

        With a standby, wait for it to take over, to time it.
        """
        if self.killed_at is not None:
            return False  # one is down: this kill waits until it is back
        self.control.kill()
        self.tally.control_kills += 1
        self.killed_at = time.monotonic()
        self.back_at = self.killed_at + fault.pause
        if len(self.planes) > 1:
            waited = self.take_over(self.killed_at)
            if waited is not None:
                self.tally.takeovers.append(waited)
        return True

    def take_over(self, since: float) -> float | None:
        """Wait until a control plane serves; the seconds since `since`, None if none does."""
        deadline = since + START_TIMEOUT
        while time.monotonic() < deadline:
            serving = [index for index, plane in enumerate(self.planes) if plane.serving]
            if serving:
                self.serving = serving[0]
                return time.monotonic() - since
            time.sleep(0.01)
        return None

    def watch_control(self, now: float) -> None:
        """Start the killed control plane again after its pause (with a standby: as one)."""
        if self.killed_at is None or now < self.back_at:
            return
        killed = next(plane for plane in self.planes if not plane.alive)
        killed.start(standby=len(self.planes) > 1)
        self.killed_at = None

    def kill_box(self, fault: Fault) -> bool:
        """kill -9 the fault's supervisor, or the next one alive; count the tasks it held."""
        turn = self.boxes[fault.box :] + self.boxes[: fault.box]
        box = next((box for box in turn if box.alive), None)
        if box is None:
            return False
        assert box.process is not None and self.proxy is not None
        box.process.kill()
        box.process.wait()
        self.proxy.drop(box.name)
        time.sleep(0.2)  # a request that had reached serve before the kill is answered
        self.tally.held_at_kills |= self.database.held_by(box.name)
        self.tally.supervisor_kills += 1
        box.restart_at = time.monotonic() + fault.pause
        return True

    def settle(self) -> None:
        """Wait for a control plane to serve and the outboxes to drain; stop the supervisors."""
        if not self.control.serving:
            self.take_over(time.monotonic())  # after a kill that no takeover followed
        for box in self.boxes:
            if not box.alive:
                box.start()
        deadline = time.monotonic() + max(60.0, 4 * self.lease)
        while time.monotonic() < deadline and any(outbox_size(b.folder) for b in self.boxes):
            time.sleep(0.1)
        for box in self.boxes:
            stop(box.process)

    def close(self) -> None:
        for box in self.boxes:
            stop(box.process)
        if self.proxy is not None:
            self.proxy.close()
        for plane in sorted(self.planes, key=lambda plane: plane.serving):
            plane.stop()  # the standby first, so that it does not take over at the end


# reading back and checking


def read_back(port: int, tokens: list[str]) -> dict[str, tuple[dict[str, Any], list[Any]]]:
    """Every token and its history, straight from serve."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)

    def get(path: str) -> Any:
        connection.request("GET", path)
        response = connection.getresponse()
        raw = response.read()
        if response.status != 200:
            raise SystemExit(f"GET {path}: {response.status} {raw!r}")
        return msgspec.json.decode(raw)

    with closing(connection):
        return {
            token: (get(f"/tokens/{token}"), get(f"/tokens/{token}/history")) for token in tokens
        }


@dataclass
class Findings:
    """What the histories say; each problem is one sentence."""

    problems: list[str] = field(default_factory=list)
    #: (token, task, attempt) of every attempt whose lease ended.
    ended_leases: list[tuple[str, int, int]] = field(default_factory=list)

    @property
    def ended_attempts(self) -> list[tuple[int, int]]:
        """(task, attempt) of every attempt whose lease ended."""
        return [(task, attempt) for _, task, attempt in self.ended_leases]

    statuses: Counter[str] = field(default_factory=Counter)
    planned_failures: int = 0


def check_history(token: str, entries: list[dict[str, Any]], found: Findings) -> None:
    """Walk one history: who held each task when, and which outcomes were applied."""
    live: dict[int, tuple[int, str]] = {}  # task -> (attempt, supervisor) of its live attempt
    visit: dict[str, int] = {}
    applied: Counter[tuple[str, int]] = Counter()
    approved = 0
    for entry in entries:
        kind, data = entry["kind"], entry["data"]
        task = data.get("task")
        if kind == Kind.TASK_CLAIMED:
            if task in live:
                attempt, holder = live[task]
                found.problems.append(
                    f"{token}: task {task} claimed by {data['supervisor']} (attempt "
                    f"{data['attempt']}) while attempt {attempt} of {holder} was live"
                )
            live[task] = (data["attempt"], data["supervisor"])
        elif kind in (Kind.TASK_DONE, Kind.TASK_FAILED, Kind.NOTE, Kind.MEMORY_SET):
            if task not in live:
                found.problems.append(
                    f"{token}: {kind} of task {task} accepted when no attempt of it was live"
                )
            if kind == Kind.TASK_FAILED and task in live and LEASE_ENDED.search(data["error"]):
                found.ended_leases.append((token, task, live[task][0]))
            if kind == Kind.TASK_FAILED:
                found.planned_failures += "on purpose" in data["error"]
            if kind in (Kind.TASK_DONE, Kind.TASK_FAILED):
                live.pop(task, None)
        elif kind == Kind.TASK_CANCELLED:
            live.pop(task, None)
        elif kind == Kind.ENTERED:
            visit[data["state"]] = data["visit"]
        elif kind == Kind.EVENT_ACCEPTED:
            applied[(data["state"], visit.get(data["state"], 0))] += 1
            approved += data["event"] == "approved"
    for (state, number), count in applied.items():
        if count > 1:
            found.problems.append(f"{token}: {count} events applied in {state} (visit {number})")
    if approved > 1:
        found.problems.append(f"{token}: approved applied {approved} times")


def check(run: Run, driver: Driver, back: dict[str, tuple[dict[str, Any], list[Any]]]) -> Findings:
    found = Findings()
    for token, (view, entries) in back.items():
        found.statuses[view["status"]] += 1
        if view["status"] not in ENDED:
            found.problems.append(f"{token} has not ended: {view['status']} in {view['state']}")
        check_history(token, entries, found)
    for box in run.boxes:
        left = outbox_size(box.folder)
        if left:
            found.problems.append(f"the outbox of {box.name} still holds {left} message(s)")
    if len(run.planes) > 1 and len(run.tally.takeovers) < run.tally.control_kills:
        found.problems.append(
            f"the standby took over after {len(run.tally.takeovers)} of "
            f"{run.tally.control_kills} kill(s) of the serving control plane"
        )
    held = run.tally.held_at_kills
    if len(found.ended_leases) > len(held):
        others = [
            f"task {task} of {token} (attempt {attempt})"
            for token, task, attempt in found.ended_leases
            if (task, attempt) not in held
        ]
        more = f" and {len(others) - 10} more" if len(others) > 10 else ""
        found.problems.append(
            f"{len(found.ended_leases)} leases ended, but the killed supervisors held only "
            f"{len(held)} task(s) when killed; not held by one: {', '.join(others[:10])}{more}"
        )
    return found


def summary(run: Run, driver: Driver, found: Findings) -> list[str]:
    args, proxy, tally = run.args, run.proxy, run.tally
    assert proxy is not None
    statuses = ", ".join(f"{count} {status}" for status, count in sorted(found.statuses.items()))
    cuts = sum(proxy.cuts.values())
    points = ", ".join(f"{proxy.cuts[point]} {point}" for point in CUT_POINTS)
    lines = [
        f"chaos run: seed {args.seed}, {args.db.split(':', 1)[0]}, lease {args.lease}, "
        f"{args.supervisors} supervisors"
        + (", a standby" if args.standby else "")
        + (", eager grants off" if args.no_eager else ", eager grants on"),
        f"tokens: {args.tokens} ({statuses})",
        f"kills: {tally.supervisor_kills} of supervisors, {tally.control_kills} of the control "
        "plane",
        f"cuts: {cuts} of {proxy.requests} requests ({points})",
        f"approved fired at {len(driver.fired)} tokens, {len(driver.twice)} twice on purpose; "
        f"{driver.duplicates} answered as duplicates",
        f"failed attempts on purpose: {found.planned_failures}",
        f"ended leases: {len(found.ended_leases)}; tasks held by killed supervisors: "
        f"{len(tally.held_at_kills)}; ended leases of tasks no killed supervisor held: "
        f"{sum(held not in tally.held_at_kills for held in found.ended_attempts)}",
        f"wall time: {tally.wall:.1f} s from the first start to the last token ended",
    ]
    if args.standby:
        waits = tally.takeovers
        figures = (
            f"; from the kill to the standby serving: max {max(waits):.2f} s, "
            f"median {statistics.median(waits):.2f} s"
            if waits
            else ""
        )
        lines.insert(3, f"takeovers: {len(waits)}{figures}")
    return lines


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=1, help="fixes the kills and the cuts")
    parser.add_argument("--tokens", type=int, default=300)
    parser.add_argument("--supervisors", type=int, default=4)
    parser.add_argument("--kills", type=int, default=10, help="kill -9 of supervisors")
    parser.add_argument("--control-kills", type=int, default=2, help="kill -9 of serve")
    parser.add_argument("--cut", type=float, default=0.2, help="the share of requests cut")
    parser.add_argument("--lease", default="5s", help="serve --lease")
    parser.add_argument(
        "--work", type=float, default=0.2, help="seconds a routine works (review: up to 3x)"
    )
    parser.add_argument(
        "--db", default="sqlite", help="sqlite, or postgresql://USER@HOST:5432/EMPTY_DATABASE"
    )
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds for the tokens")
    parser.add_argument(
        "--standby",
        action="store_true",
        help="a second serve --standby on the same database; control-plane kills hit the "
        "serving one, which starts again as the standby",
    )
    parser.add_argument("--no-faults", action="store_true", help="no cuts and no kills")
    parser.add_argument(
        "--no-eager",
        action="store_true",
        help="supervisors whose reports do not ask for their next task (eager: false)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the run's folder and logs")
    args = parser.parse_args(argv)
    if args.no_faults:
        args.cut, args.kills, args.control_kills = 0.0, 0, 0
    if args.tokens < 1 or args.supervisors < 1 or not 0 <= args.cut < 1:
        parser.error("--tokens and --supervisors are at least 1, and --cut is 0 to below 1")
    if args.db != "sqlite" and not args.db.startswith("postgresql://"):
        parser.error("--db is sqlite or a postgresql:// URL")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    work = Path(tempfile.mkdtemp(prefix="stateous-chaos-"))
    run = Run(args, work)
    try:
        driver = run.setup()
        finished = run.drive(driver)
        run.settle()
        back = read_back(run.control.port, driver.tokens)
        found = check(run, driver, back)
        if driver.failure is not None:
            found.problems.insert(0, f"the control plane refused a request: {driver.failure}")
        elif not finished:
            found.problems.insert(0, f"not every token ended within {args.timeout:.0f} s")
        for line in summary(run, driver, found):
            print(line)
        for problem in found.problems[:20]:
            print(f"FAILED: {problem}")
        if len(found.problems) > 20:
            print(f"FAILED: ... and {len(found.problems) - 20} more")
        print("all checks passed" if not found.problems else f"{len(found.problems)} problem(s)")
        if args.keep:
            print(f"logs and folders: {work}")
        return 1 if found.problems else 0
    finally:
        run.close()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
