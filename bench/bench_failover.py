"""Failover: a real pg_auto_failover formation loses its primary under load, and nothing is lost.

Run: .venv/bin/python bench/bench_failover.py [--minutes 10] [--kill-every 60] [--rate 10]
     [--supervisors 2] [--lease 5s] [--seed 1] [--quick] [--keep]

A monitor and two Postgres nodes (autofailover.py; needs Debian's
postgresql-15-auto-failover) serve one `stateous serve`, which connects with the
multi-host URL `postgresql://...@h1:p1,h2:p2/stateous?target_session_attrs=read-write`.
For `--minutes` this run starts tokens of chaos.py's workflow at `--rate` a second and
fires `approved` (with an Idempotency-Key, some twice on purpose) at those waiting in
approval, while `--supervisors` real `stateous supervise` processes work the states. Every
`--kill-every` seconds it kills the primary's node whole (kill -9 of its process group: its
pg_autoctl and its postmaster), waits for the control plane to answer a change again,
then starts the killed node, which rejoins as the standby. `--quick` gives the monitor
short health checks and demote timeout (autofailover.QUICK); without it the formation runs
pg_auto_failover's defaults.

At the end it checks that:

- every token ended, and no history shows an event applied twice or overlapping attempts
  (chaos.py's checks);
- no lease ended (no supervisor was killed: a lease that ended was lost to a failover);
- every start and fire that was answered 2xx is in the database (the run keeps the list);
- every supervisor's outbox is empty.

It prints, per failover, the seconds from the kill to the first 2xx of a change sent after
it, and exits 1 when a check fails.
"""

from __future__ import annotations

import argparse
import http.client
import random
import shutil
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(ROOT), str(HERE)]

import msgspec  # noqa: E402
from autofailover import Formation  # noqa: E402
from chaos import (  # noqa: E402
    ENDED,
    Box,
    ControlPlane,
    Database,
    Findings,
    check_history,
    make_folder,
    outbox_size,
    read_back,
    stop,
    workflow,
)

from stateous.compiler.compile import compile_workflow  # noqa: E402
from stateous.model.graph_file import dump  # noqa: E402

#: How long the control plane may take to answer a change again after a kill, in seconds.
FAILOVER_SECONDS = 120.0
#: How long the tokens may take to end once the last one started, in seconds.
DRAIN_SECONDS = 120.0


@dataclass(frozen=True)
class Change:
    """A change answered 2xx: what it was, and when it was sent and answered."""

    kind: str  # "start" or "fire"
    token: str
    sent: float
    answered: float


@dataclass
class Load:
    """The outside world: starts tokens at a steady rate, and fires `approved` at those in
    approval; each request is sent again until it is answered 2xx (after a 503, or a 500
    whose COMMIT went unanswered: both are safe to send again)."""

    port: int
    rate: float
    twice: float
    rng: random.Random
    changes: list[Change] = field(default_factory=list)
    started: list[str] = field(default_factory=list)
    fired: set[str] = field(default_factory=set)
    starting: threading.Event = field(default_factory=threading.Event)
    stopped: threading.Event = field(default_factory=threading.Event)
    failure: str | None = None
    #: Changes answered 500 because the outcome of their COMMIT was not known, sent again.
    unknown: int = 0

    def call(self, link: list[http.client.HTTPConnection | None], path: str, **kw: Any) -> Any:
        """POST or GET until 2xx; a 503 (the database is out of reach) is sent again."""
        method = "GET" if kw.get("get") else "POST"
        headers = {"Content-Type": "application/json", **kw.get("headers", {})}
        data = None if method == "GET" else msgspec.json.encode(kw.get("body", {}))
        while not self.stopped.is_set():
            if link[0] is None:
                link[0] = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
            sent = time.monotonic()
            try:
                link[0].request(
                    method, path, body=None if method == "GET" else data, headers=headers
                )
                response = link[0].getresponse()
                raw = response.read()
            except (OSError, http.client.HTTPException):
                link[0].close()
                link[0] = None
                time.sleep(0.05)
                continue
            if response.status == 503:
                time.sleep(0.05)
                continue
            if response.status == 500 and kw.get("kind") is not None:
                # A COMMIT went unanswered and the database could not say: a start names its
                # token and a fire has its Idempotency-Key, so sending it again is the look.
                self.unknown += 1
                time.sleep(0.05)
                continue
            if response.status >= 300:
                self.failure = f"{method} {path}: {response.status} {raw!r}"
                self.stopped.set()
                return None
            kind = kw.get("kind")
            if kind is not None:
                self.changes.append(Change(kind, kw["token"], sent, time.monotonic()))
            return msgspec.json.decode(raw)
        return None

    def start_tokens(self) -> None:
        link: list[http.client.HTTPConnection | None] = [None]
        number, began = 0, time.monotonic()
        while self.starting.is_set() and not self.stopped.is_set():
            number += 1
            token = f"T-{number}"
            body = {"token": token, "context": {"number": number}}
            if self.call(link, "/tokens", body=body, kind="start", token=token) is None:
                return
            self.started.append(token)
            self.stopped.wait(max(0.0, began + number / self.rate - time.monotonic()))

    def fire_approvals(self) -> None:
        link: list[http.client.HTTPConnection | None] = [None]
        while not self.stopped.is_set():
            listed = self.call(link, "/tokens?status=active&state=approval&limit=1000", get=True)
            for token in [view["token"] for view in listed or []]:
                if token in self.fired:
                    continue
                for _ in range(2 if self.rng.random() < self.twice else 1):
                    key = {"Idempotency-Key": f"approve-{token}"}
                    path = f"/tokens/{token}/events/approved"
                    if self.call(link, path, headers=key, kind="fire", token=token) is None:
                        return
                self.fired.add(token)
            self.stopped.wait(0.1)


@dataclass
class Failover:
    """One kill of the primary: which node, and the seconds to the first 2xx after it."""

    node: str
    killed: float
    #: The kill's time of day (UTC), to set beside the ledger's.
    at: str = field(default_factory=lambda: time.strftime("%H:%M:%S", time.gmtime()))
    first_answer: float | None = None


class Run:
    def __init__(self, args: argparse.Namespace, work: Path) -> None:
        self.args = args
        self.work = work
        self.rng = random.Random(args.seed)
        self.formation = Formation(quick=args.quick)
        self.graph = work / "chaos.json"
        self.graph.write_bytes(dump(compile_workflow(workflow())))
        self.plane: ControlPlane | None = None
        self.boxes: list[Box] = []
        self.failovers: list[Failover] = []
        self.load: Load | None = None

    def setup(self) -> None:
        self.formation.start()
        self.plane = ControlPlane(self.work, self.graph, self.formation.url, self.args.lease)
        self.plane.start()
        for number in range(1, self.args.supervisors + 1):
            name = f"box-{number}"
            folder = make_folder(self.work, self.graph, name, [self.plane.port], 0.1)
            self.boxes.append(Box(name, folder, [self.plane.port]))
        for box in self.boxes:
            box.start()
        self.load = Load(self.plane.port, self.args.rate, 0.2, self.rng)

    def drive(self) -> None:
        """Start tokens for `--minutes`, killing the primary every `--kill-every` seconds."""
        load = self.load
        assert load is not None
        load.starting.set()
        threads = [
            threading.Thread(target=load.start_tokens, name="starts", daemon=True),
            threading.Thread(target=load.fire_approvals, name="fires", daemon=True),
        ]
        for thread in threads:
            thread.start()
        began = time.monotonic()
        end = began + self.args.minutes * 60
        next_kill = began + self.args.kill_every * self.rng.uniform(0.8, 1.0)
        while time.monotonic() < end and load.failure is None:
            if time.monotonic() >= next_kill:
                self.fail_over()
                next_kill = time.monotonic() + self.args.kill_every * self.rng.uniform(0.8, 1.2)
            time.sleep(0.05)
        load.starting.clear()
        threads[0].join()
        self.drain()
        load.stopped.set()
        threads[1].join(timeout=30)

    def fail_over(self) -> None:
        """Kill the primary's node whole; wait for a change answered after it; rejoin it."""
        assert self.load is not None
        node = self.formation.primary()
        if node is None:
            return
        killed = time.monotonic()
        node.kill()
        failover = Failover(node.name, killed)
        self.failovers.append(failover)
        deadline = killed + FAILOVER_SECONDS
        while failover.first_answer is None and time.monotonic() < deadline:
            after = [c.answered for c in list(self.load.changes) if c.sent > killed]
            if after:
                failover.first_answer = min(after) - killed
            time.sleep(0.01)
        self.formation.rejoin(node)

    def drain(self) -> None:
        """Wait until every token started has ended."""
        assert self.load is not None
        database = Database(self.formation.url)
        deadline = time.monotonic() + DRAIN_SECONDS
        while time.monotonic() < deadline and self.load.failure is None:
            try:
                if database.ended() >= len(self.load.started):
                    return
            except Exception:  # a failover under way: ask again
                pass
            time.sleep(0.2)

    def settle(self) -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and any(outbox_size(b.folder) for b in self.boxes):
            time.sleep(0.1)
        for box in self.boxes:
            stop(box.process)

    def close(self) -> None:
        for box in self.boxes:
            stop(box.process)
        if self.plane is not None:
            self.plane.stop()
        self.formation.close(keep=self.args.keep)


def lost_changes(url: str, changes: list[Change]) -> list[Change]:
    """The changes answered 2xx that the database does not have."""
    database = Database(url)
    tokens = {str(row[0]) for row in database.rows("SELECT token FROM tokens")}
    approved = {
        str(row[0])
        for row in database.rows(
            "SELECT token FROM ledger WHERE kind = 'event_accepted' "
            "AND data::json->>'event' = 'approved'"
        )
    }
    kept = {"start": tokens, "fire": approved}
    return [change for change in changes if change.token not in kept[change.kind]]


def check(run: Run, back: dict[str, tuple[dict[str, Any], list[Any]]]) -> Findings:
    assert run.load is not None
    found = Findings()
    for token, (view, entries) in back.items():
        found.statuses[view["status"]] += 1
        if view["status"] not in ENDED:
            found.problems.append(f"{token} has not ended: {view['status']} in {view['state']}")
        check_history(token, entries, found)
    for token, task, attempt in found.ended_leases:
        when = next(
            entry["at"]
            for entry in back[token][1]
            if entry["kind"] == "task_failed" and entry["data"].get("task") == task
        )
        found.problems.append(
            f"the lease of task {task} of {token} (attempt {attempt}) ended at {when}"
        )
    for change in lost_changes(run.formation.url, run.load.changes):
        found.problems.append(f"the {change.kind} of {change.token}, answered 2xx, is lost")
    for box in run.boxes:
        if left := outbox_size(box.folder):
            found.problems.append(f"the outbox of {box.name} still holds {left} message(s)")
    for failover in run.failovers:
        if failover.first_answer is None:
            found.problems.append(f"no change was answered after the kill of {failover.node}")
    return found


def summary(run: Run, found: Findings) -> list[str]:
    args, load = run.args, run.load
    assert load is not None
    statuses = ", ".join(f"{count} {status}" for status, count in sorted(found.statuses.items()))
    waits = [f.first_answer for f in run.failovers if f.first_answer is not None]
    last_kill = max((failover.killed for failover in run.failovers), default=0.0)
    before = sum(change.answered < last_kill for change in load.changes)
    lines = [
        f"failover run: seed {args.seed}, {args.minutes:g} min at {args.rate:g} tokens/s, "
        f"lease {args.lease}, {args.supervisors} supervisors, "
        f"{'quick' if args.quick else 'default'} monitor settings",
        f"tokens: {len(load.started)} ({statuses})",
        f"failovers: {len(run.failovers)} ("
        + ", ".join(f"{f.node} killed at {f.at}" for f in run.failovers)
        + ")",
        f"changes answered 2xx: {len(load.changes)}, {before} of them before the last kill; "
        f"lost: {sum('is lost' in p for p in found.problems)}; answered 500 with their outcome "
        f"unknown, then sent again: {load.unknown}",
        f"ended leases: {len(found.ended_leases)}",
    ]
    if waits:
        lines.append(
            "from the kill to the first 2xx: "
            + ", ".join(f"{wait:.1f}" for wait in waits)
            + f" s (median {statistics.median(waits):.1f} s, max {max(waits):.1f} s)"
        )
    return lines


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10.0, help="how long tokens start")
    parser.add_argument("--kill-every", type=float, default=60.0, help="seconds between kills")
    parser.add_argument("--rate", type=float, default=10.0, help="tokens started a second")
    parser.add_argument("--supervisors", type=int, default=2)
    parser.add_argument("--lease", default="5s", help="serve --lease")
    parser.add_argument("--seed", type=int, default=1, help="fixes the kills and the fires")
    parser.add_argument("--quick", action="store_true", help="short monitor timeouts")
    parser.add_argument("--keep", action="store_true", help="keep the run's folder and logs")
    args = parser.parse_args(argv)
    if args.minutes <= 0 or args.kill_every <= 0 or args.rate <= 0 or args.supervisors < 1:
        parser.error("--minutes, --kill-every, --rate and --supervisors are above 0")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    work = Path(tempfile.mkdtemp(prefix="stateous-failover-"))
    run = Run(args, work)
    try:
        run.setup()
        run.drive()
        run.settle()
        assert run.plane is not None and run.load is not None
        back = read_back(run.plane.port, run.load.started)
        found = check(run, back)
        if run.load.failure is not None:
            found.problems.insert(0, f"the control plane refused a request: {run.load.failure}")
        for line in summary(run, found):
            print(line)
        for problem in found.problems[:20]:
            print(f"FAILED: {problem}")
        print("all checks passed" if not found.problems else f"{len(found.problems)} problem(s)")
        if args.keep:
            print(f"logs and folders: {work}, {run.formation.folder}")
        return 1 if found.problems else 0
    finally:
        run.close()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
