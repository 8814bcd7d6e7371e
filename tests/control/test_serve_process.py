"""`stateous serve` as a real process: a real port, a real SQLite file, real signals.

Each test starts `python -m stateous serve` with `--listen 127.0.0.1:0`, reads the
bound port from the `serving on` line, and talks HTTP to it. The launcher kills every
process it started when the test ends.
"""

from __future__ import annotations

import http.client
import json
import signal
import socket
import sqlite3
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from stateous.model.graph_file import checksum
from tests.conftest import run_stateous
from tests.control.raw import big_token_body, closed_by_server, pipelining_without_reading
from tests.control.serving import (
    Launcher,
    Served,
    command,
    environment,
    orders,
    timers,
    write_graph,
)
from tests.control.support import failure

REFUSED_TWICE = "error: another control plane serves this database; stop it first"
#: How long a refusal at start may take: it is at once, but a loaded machine is slow.
AT_ONCE = 10.0
#: The order of the states of `orders` that a load test sees: draft, then review.
LATER = {"draft": {"draft", "review"}, "review": {"review"}}


@pytest.fixture
def graph(tmp_path: Path) -> Path:
    """The `orders` graph file: draft (retries=1), then review (timeout 1h)."""
    path = tmp_path / "orders.json"
    write_graph(path, orders())
    return path


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "orders.sqlite"


def start_token(served: Served, token: str, title: str = "an order") -> dict[str, Any]:
    status, body = served.request("POST", "/tokens", {"token": token, "context": {"title": title}})
    assert status == 201, body
    return body  # type: ignore[no-any-return]


def claim(served: Served, supervisor: str) -> dict[str, Any]:
    status, grant = served.request(
        "POST", "/tasks/claim", {"supervisor": supervisor, "states": ["draft"]}
    )
    assert status == 200, grant
    return grant  # type: ignore[no-any-return]


def heartbeat(served: Served, supervisor: str, task: int) -> list[int]:
    answer = served.ok("POST", "/tasks/heartbeat", {"supervisor": supervisor, "tasks": [task]})
    return answer["lost"]  # type: ignore[no-any-return]


def late_report(served: Served, task: int, attempt: int, supervisor: str) -> tuple[int, Any]:
    body = {"kind": "event", "event": "submitted", "attempt": attempt, "supervisor": supervisor}
    return served.request("POST", f"/tasks/{task}/report", body)


def read_only(db: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{db}?mode=ro", uri=True)


def in_order(kinds: list[str], wanted: list[str]) -> bool:
    """Tell whether `wanted` appears in `kinds` in this order, maybe with others between."""
    rest = iter(kinds)
    return all(kind in rest for kind in wanted)


def check_seqs(entries: list[dict[str, Any]]) -> None:
    assert [entry["seq"] for entry in entries] == list(range(1, len(entries) + 1))


# Starting and stopping.


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_serve_answers_health_and_stops_cleanly_on_a_signal(
    launcher: Launcher, tmp_path: Path, db: Path, sig: signal.Signals
) -> None:
    if sig == signal.SIGINT and signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        pytest.skip("SIGINT is ignored here, so the serve process inherits it ignored")
    served_graph = write_graph(tmp_path / "orders.json", orders())
    served = launcher.serve(tmp_path / "orders.json", db)
    assert served.url == f"http://127.0.0.1:{served.port}"
    assert served.port > 0
    assert served.before == []
    deadline = time.monotonic() + 10
    while True:
        try:
            status, health = served.request("GET", "/health")
        except ConnectionError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.01)
            continue
        break
    ready = time.monotonic() - served.started
    print(f"\n/health answered 200 {ready:.3f} s after the process started")
    assert status == 200
    assert health == {
        "workflow": "orders",
        "checksum": checksum(served_graph),
        "lease": 120,
        "auth": "off",
    }
    with read_only(db) as connection:
        holder = connection.execute("SELECT serving FROM control_plane").fetchone()[0]
    assert f":{served.process.pid}:" in holder

    assert served.stop(sig) == 0
    assert served.lines[1:] == ["stopped"]
    with read_only(db) as connection:
        row = connection.execute("SELECT serving, checksum FROM control_plane").fetchone()
    assert row == (None, checksum(served_graph))


def test_a_second_serve_on_the_same_database_is_refused_while_the_first_keeps_serving(
    launcher: Launcher, graph: Path, db: Path
) -> None:
    first = launcher.serve(graph, db)
    start_token(first, "ORDER-1")

    code, lines, seconds = launcher.refused(graph, db)

    assert (code, lines) == (1, [REFUSED_TWICE])
    assert seconds < AT_ONCE
    assert first.process.poll() is None
    assert first.ok("GET", "/health")["workflow"] == "orders"
    start_token(first, "ORDER-2")
    assert first.ok("GET", "/tokens/ORDER-1")["state"] == "draft"
    assert first.stop() == 0


def test_after_a_kill_9_a_new_serve_starts_at_once_and_serves_the_tokens_of_before(
    launcher: Launcher, graph: Path, db: Path
) -> None:
    first = launcher.serve(graph, db)
    start_token(first, "ORDER-1")
    first.ok("POST", "/tokens/ORDER-1/events/submitted")
    start_token(first, "ORDER-2")
    before = {name: first.history(name) for name in ("ORDER-1", "ORDER-2")}
    assert first.kill() == -signal.SIGKILL

    second = launcher.serve(graph, db)

    assert time.monotonic() - second.started < AT_ONCE
    assert second.ok("GET", "/tokens/ORDER-1")["state"] == "review"
    assert second.ok("GET", "/tokens/ORDER-2")["state"] == "draft"
    assert {name: second.history(name) for name in before} == before
    with read_only(db) as connection:
        holder = connection.execute("SELECT serving FROM control_plane").fetchone()[0]
    assert f":{second.process.pid}:" in holder
    second.ok("POST", "/tokens/ORDER-2/events/submitted")
    assert second.ok("GET", "/tokens/ORDER-2")["state"] == "review"
    assert second.stop() == 0


class Load:
    """Four clients that start tokens and fire `submitted` as fast as they can, until stopped.

    Each client records the state that every 2xx answer showed; any other answer is kept
    in `refused`. A client ends at its first connection error.
    """

    WORKERS = 4

    def __init__(self, served: Served) -> None:
        self.served = served
        self.answered: list[dict[str, str]] = [{} for _ in range(self.WORKERS)]
        self.refused: list[tuple[str, int, Any]] = []
        self.threads = [
            threading.Thread(target=self._run, args=(worker,), name=f"load-{worker}")
            for worker in range(self.WORKERS)
        ]

    def _send(
        self, connection: http.client.HTTPConnection, worker: int, token: str, path: str, body: Any
    ) -> bool:
        status, shown = self.served.request("POST", path, body, connection=connection)
        if not 200 <= status < 300:
            self.refused.append((token, status, shown))
            return False
        self.answered[worker][token] = shown["state"]
        return True

    def _run(self, worker: int) -> None:
        connection = self.served.connect(timeout=10)
        try:
            for number in range(1_000_000):
                token = f"w{worker}-{number}"
                body = {"token": token, "context": {"title": token}}
                if not self._send(connection, worker, token, "/tokens", body):
                    return
                fired = f"/tokens/{token}/events/submitted"
                if not self._send(connection, worker, token, fired, None):
                    return
        except (OSError, http.client.HTTPException):
            return
        finally:
            connection.close()

    def run_then(self, seconds: float, sig: int) -> int:
        """Load for `seconds`, send `sig` mid-load, wait for the clients; return the exit code."""
        for thread in self.threads:
            thread.start()
        time.sleep(seconds)
        code = self.served.stop(sig)
        for thread in self.threads:
            thread.join(timeout=30)
        return code

    @property
    def states(self) -> dict[str, str]:
        """The state that the last 2xx answer of each token showed."""
        return {token: state for seen in self.answered for token, state in seen.items()}


def check_answered(served: Served, states: dict[str, str]) -> None:
    """Each answered token exists, in the state its answer showed or later, with whole history."""
    connection = served.connect()
    try:
        for token, state in states.items():
            status, shown = served.request("GET", f"/tokens/{token}", connection=connection)
            assert status == 200, (token, shown)
            assert shown["status"] == "active"
            assert shown["state"] in LATER[state], (token, state, shown)
            status, entries = served.request(
                "GET", f"/tokens/{token}/history", connection=connection
            )
            assert status == 200
            check_seqs(entries)
            assert entries[0]["kind"] == "started"
    finally:
        connection.close()


def check_database(db: Path, states: dict[str, str]) -> None:
    """The file is whole, and no token is half made."""
    with read_only(db) as connection:
        assert connection.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        check_tokens_whole(lambda sql: connection.execute(sql).fetchall(), states)


def check_tokens_whole(rows_of: Callable[[str], list[Any]], states: dict[str, str]) -> None:
    """No token is half made: ledger, task and timer agree with each token's row."""
    seqs = rows_of("SELECT token, count(*), min(seq), max(seq) FROM ledger GROUP BY token")
    rows = dict(rows_of("SELECT token, state FROM tokens"))
    started = dict(rows_of("SELECT token, seq FROM ledger WHERE kind = 'started'"))
    live_tasks = rows_of(
        "SELECT token, state FROM tasks WHERE status IN ('queued', 'claimed', 'waiting')"
    )
    timers_of = rows_of(
        "SELECT token, count(*) FROM timers WHERE status = 'pending' GROUP BY token"
    )
    assert set(states) <= set(rows)
    assert [row for row in seqs if row[2] != 1 or row[3] != row[1]] == []
    assert {row[0] for row in seqs} == set(rows)
    assert started == dict.fromkeys(rows, 1)
    assert set(rows.values()) <= {"draft", "review"}
    assert len(live_tasks) == len(rows)
    assert dict(live_tasks) == rows
    reviews = {token for token, state in rows.items() if state == "review"}
    assert dict(timers_of) == dict.fromkeys(reviews, 1)


def test_a_kill_9_under_load_loses_no_answered_write_and_leaves_no_half_token(
    launcher: Launcher, graph: Path, db: Path
) -> None:
    load = Load(launcher.serve(graph, db))

    assert load.run_then(1.5, signal.SIGKILL) == -signal.SIGKILL

    assert load.refused == []
    states = load.states
    print(f"\n{len(states)} tokens were answered 2xx before the kill -9")
    assert len(states) > 20
    again = launcher.serve(graph, db)
    check_answered(again, states)
    assert again.stop() == 0
    check_database(db, states)


def test_a_sigterm_under_load_finishes_the_requests_in_progress_and_stops_cleanly(
    launcher: Launcher, graph: Path, db: Path
) -> None:
    served = launcher.serve(graph, db)
    load = Load(served)

    assert load.run_then(1.0, signal.SIGTERM) == 0

    assert served.lines[1:] == ["stopped"]
    assert load.refused == []
    states = load.states
    assert len(states) > 20
    check_database(db, states)
    again = launcher.serve(graph, db)
    check_answered(again, states)
    assert again.stop() == 0


# Refusals at start.


def test_a_port_in_use_is_refused_before_the_database_opens(
    launcher: Launcher, graph: Path, db: Path
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        code, lines, _ = launcher.refused(graph, db, listen=f"127.0.0.1:{port}")

    assert (code, lines) == (1, [f"error: cannot listen on 127.0.0.1:{port}: the port is in use"])
    assert not db.exists()
    assert not Path(f"{db}.lock").exists()


BAD_ARGUMENTS: dict[str, tuple[list[str], str]] = {
    "a missing graph file": (
        ["missing.json", "--listen", "127.0.0.1:0"],
        "error: cannot read the graph file missing.json: No such file or directory",
    ),
    "a graph file that is not JSON": (
        ["notes.json", "--listen", "127.0.0.1:0"],
        "error: notes.json cannot be served: ",
    ),
    "a graph file with a timeout of 3 weeks": (
        ["weeks.json", "--listen", "127.0.0.1:0"],
        "error: weeks.json cannot be served: states.review.timeout: '3 weeks' is not a "
        "duration; write e.g. '30s', '10m', '2h', '1d'",
    ),
    "a graph file with a guard that does not parse": (
        ["guard.json", "--listen", "127.0.0.1:0"],
        "error: guard.json cannot be served: transitions[2].when: the guard 'payload.approved =' "
        "does not parse: ",
    ),
    "--listen nonsense": (
        ["orders.json", "--listen", "nonsense"],
        "error: --listen takes HOST:PORT, e.g. 127.0.0.1:8080, not 'nonsense'",
    ),
    "--listen with a port too large": (
        ["orders.json", "--listen", "127.0.0.1:70000"],
        "error: --listen takes HOST:PORT, e.g. 127.0.0.1:8080, not '127.0.0.1:70000'",
    ),
    "--db mysql://x": (
        ["orders.json", "--db", "mysql://x", "--listen", "127.0.0.1:0"],
        "error: --db takes a URL such as sqlite:///stateous.db or "
        "postgresql://USER@HOST:5432/NAME, not 'mysql://x'",
    ),
    "--db postgresql:// that no server answers": (
        ["orders.json", "--db", "postgresql://x@127.0.0.1:1/db", "--listen", "127.0.0.1:0"],
        "error: cannot connect to the database: ",
    ),
    "--lease 2 hours": (
        ["orders.json", "--lease", "2 hours", "--listen", "127.0.0.1:0"],
        "error: --lease: '2 hours' is not a duration",
    ),
    "--threads 0": (
        ["orders.json", "--threads", "0", "--listen", "127.0.0.1:0"],
        "error: --threads takes a whole number from 1 to 256, not '0'",
    ),
    "--connection-limit lots": (
        ["orders.json", "--connection-limit", "lots", "--listen", "127.0.0.1:0"],
        "error: --connection-limit takes a whole number from 1 to 100000, not 'lots'",
    ),
    "--channel-timeout soon": (
        ["orders.json", "--channel-timeout", "soon", "--listen", "127.0.0.1:0"],
        "error: --channel-timeout: 'soon' is not a duration",
    ),
}


@pytest.mark.parametrize("case", list(BAD_ARGUMENTS))
def test_a_bad_argument_gives_one_error_line_and_exit_code_1(
    launcher: Launcher, tmp_path: Path, graph: Path, case: str
) -> None:
    (tmp_path / "notes.json").write_text("these are notes, not a graph\n")
    document = json.loads(graph.read_text())
    document["states"]["review"]["timeout"] = "3 weeks"
    (tmp_path / "weeks.json").write_text(json.dumps(document))
    document["states"]["review"].pop("timeout")
    document["transitions"][2]["when"] = "payload.approved ="
    (tmp_path / "guard.json").write_text(json.dumps(document))
    before = sorted(path.name for path in tmp_path.iterdir())
    args, sentence = BAD_ARGUMENTS[case]
    served = launcher.spawn(Path(args[0]), None, *args[1:], listen=None)

    lines = served.rest()

    assert served.process.wait() == 1
    assert len(lines) == 1, lines
    assert lines[0].startswith(sentence), lines
    assert sorted(path.name for path in tmp_path.iterdir()) == before


def versions_lines(served: Served) -> list[str]:
    """The start lines that name the older versions still in use."""
    return [line for line in served.before if line.startswith("older versions")]


def test_a_new_structure_serves_beside_the_old_one_whose_tokens_go_on_by_it(
    launcher: Launcher, tmp_path: Path, graph: Path, db: Path
) -> None:
    old = checksum(write_graph(graph, orders()))
    more_states = tmp_path / "more-states.json"
    new = checksum(write_graph(more_states, orders(extra_state=True)))

    first = launcher.serve(graph, db)
    start_token(first, "ORDER-1")
    assert versions_lines(first) == []
    assert first.stop() == 0

    second = launcher.serve(more_states, db)
    assert versions_lines(second) == [
        f"older versions still in use: {old} (1 live token(s)); new tokens start on {new}"
    ]
    start_token(second, "ORDER-2")
    for token in ("ORDER-1", "ORDER-2"):
        second.ok("POST", f"/tokens/{token}/events/submitted", {})
        second.ok("POST", f"/tokens/{token}/events/reviewed", {"payload": {"approved": False}})
    assert second.ok("GET", "/tokens/ORDER-1")["state"] == "draft"  # by the old graph
    assert second.ok("GET", "/tokens/ORDER-2")["state"] == "rework"  # by the new one
    assert second.ok("GET", "/tokens/ORDER-1")["checksum"] == old
    assert second.ok("GET", "/tokens/ORDER-2")["checksum"] == new
    assert second.ok("POST", "/tokens/ORDER-1/cancel")["status"] == "cancelled"
    assert second.stop() == 0

    third = launcher.serve(more_states, db)
    assert versions_lines(third) == []
    assert third.stop() == 0


def test_listening_on_every_address_without_a_credential_is_refused_in_one_line(
    launcher: Launcher, graph: Path, db: Path
) -> None:
    code, lines, _ = launcher.refused(graph, db, listen="0.0.0.0:0")

    assert code == 1
    assert len(lines) == 1, lines
    assert lines[0].startswith("error: listening on 0.0.0.0:0 lets other computers in")
    assert "stateous auth add NAME --role operator --db sqlite:///" in lines[0]
    assert "--no-auth" in lines[0]


def test_listening_on_every_address_with_no_auth_warns_at_start_and_on_health(
    launcher: Launcher, graph: Path, db: Path
) -> None:
    served = launcher.serve(graph, db, "--no-auth", listen="0.0.0.0:0")

    assert served.url == f"http://0.0.0.0:{served.port}"
    assert len(served.before) == 1, served.before
    warning = served.before[0]
    assert warning.startswith("warning: authentication is off (--no-auth)")
    health = served.ok("GET", "/health")
    assert health["workflow"] == "orders"
    assert health["warning"].startswith("authentication is off")
    assert served.stop() == 0


def test_behind_a_proxy_without_a_credential_serve_warns_at_start_and_on_health(
    launcher: Launcher, graph: Path, db: Path, tmp_path: Path
) -> None:
    served = launcher.serve(graph, db, "--allowed-host", "cp.example")

    [logged] = served.before
    assert "no credential protects this control plane" in logged
    assert "stateous auth add NAME --role operator" in logged
    health = served.ok("GET", "/health")
    assert health["auth"] == "off"
    assert health["warning"].startswith("no credential protects this control plane")
    added = run_stateous(
        "auth", "add", "ops-1", "--role", "operator", "--db", f"sqlite:///{db}", cwd=tmp_path
    )
    deadline = time.monotonic() + 5
    while "warning" in (health := served.ok("GET", "/health")):
        assert time.monotonic() < deadline, health
        time.sleep(0.1)
    assert health["auth"] == "on"
    assert added.stdout.strip() not in "\n".join(served.lines)
    assert served.stop() == 0


def take_the_row(db: Path, holder: str) -> None:
    """Write another holder into the `control_plane` row, as another control plane would."""
    connection = sqlite3.connect(db, timeout=10)
    try:
        with connection:
            connection.execute("UPDATE control_plane SET serving = ?", (holder,))
    finally:
        connection.close()


def test_a_serve_whose_database_another_control_plane_took_stops_with_exit_code_1(
    launcher: Launcher, graph: Path, db: Path
) -> None:
    served = launcher.serve(graph, db)
    start_token(served, "ORDER-1")

    take_the_row(db, "elsewhere:1:cafe0001")

    answers = set()
    deadline = time.monotonic() + 10
    while served.process.poll() is None and time.monotonic() < deadline:
        try:
            status, body = served.request("GET", "/tokens/ORDER-1")
        except (OSError, http.client.HTTPException):
            break
        answers.add(status if status == 200 else (status, body["code"]))
        time.sleep(0.05)
    assert served.process.wait(timeout=10) == 1
    assert answers <= {200, (503, "not_serving")}
    lines = served.rest()
    assert lines[-1] == "error: another control plane took the database; this control plane stopped"
    assert "another control plane took this database (elsewhere:1:cafe0001 holds it)" in (
        " ".join(served.lines)
    )
    with read_only(db) as connection:
        holder = connection.execute("SELECT serving FROM control_plane").fetchone()[0]
    assert holder == "elsewhere:1:cafe0001"


def test_a_serve_started_with_sigint_ignored_still_stops_when_its_database_is_taken(
    launcher: Launcher, graph: Path, db: Path
) -> None:
    served = launcher.spawn(graph, db, sigint_ignored=True)
    served.wait_serving()
    start_token(served, "ORDER-1")

    take_the_row(db, "elsewhere:1:cafe0002")

    try:
        code = served.process.wait(timeout=4)
    except subprocess.TimeoutExpired:
        status, body = served.request("GET", "/tokens/ORDER-1")
        pytest.fail(f"serve still runs 4 s after it lost its database; it answers {status} {body}")
    assert code == 1
    assert served.rest()[-1] == (
        "error: another control plane took the database; this control plane stopped"
    )


def test_a_second_serve_on_the_same_database_through_a_symlink_is_refused(
    launcher: Launcher, tmp_path: Path, graph: Path, db: Path
) -> None:
    first = launcher.serve(graph, db)
    alias = tmp_path / "alias.sqlite"
    alias.symlink_to(db)

    second = launcher.spawn(graph, alias)

    assert second.next_line(timeout=AT_ONCE) == REFUSED_TWICE
    assert second.process.wait(timeout=AT_ONCE) == 1
    assert first.process.poll() is None


# The clock.


def test_a_lease_without_heartbeats_ends_and_late_reports_of_its_attempt_are_refused(
    launcher: Launcher, graph: Path, db: Path
) -> None:
    served = launcher.serve(graph, db, "--lease", "2s")
    start_token(served, "ORDER-1")
    grant = claim(served, "box-1")
    task = grant["task"]
    assert (grant["attempt"], grant["lease"]) == (1, 2)
    claimed = time.monotonic()

    entries = served.wait_history("ORDER-1", "task_retrying")

    print(f"\nthe lease of 2 s ended {time.monotonic() - claimed:.2f} s after the claim")
    kinds = [entry["kind"] for entry in entries]
    assert kinds[-2:] == ["task_failed", "task_retrying"]
    assert entries[-2]["data"] == failure(
        task, "box-1 stopped answering: no heartbeat for 2 seconds"
    )
    assert entries[-1]["data"] == {"task": task, "attempt": 2}
    check_seqs(entries)

    status, body = late_report(served, task, 1, "box-1")
    assert (status, body["code"]) == (409, "task_not_held"), body

    second = claim(served, "box-2")
    assert (second["task"], second["attempt"]) == (task, 2)
    status, body = late_report(served, task, 1, "box-1")
    assert (status, body["code"]) == (409, "attempt_over"), body

    beating = time.monotonic()
    while time.monotonic() - beating < 3.5:
        assert heartbeat(served, "box-2", task) == []
        time.sleep(0.5)
    assert served.kinds("ORDER-1").count("task_failed") == 1
    token = served.ok(
        "POST",
        f"/tasks/{task}/report",
        {"kind": "event", "event": "submitted", "attempt": 2, "supervisor": "box-2"},
    )
    assert token["state"] == "review"
    assert served.stop() == 0


def test_a_timeout_moves_the_token_and_a_timeout_with_no_transition_fails_it(
    launcher: Launcher, tmp_path: Path, db: Path
) -> None:
    path = tmp_path / "timers.json"
    write_graph(path, timers("2s"))
    served = launcher.serve(path, db)
    served.ok("POST", "/tokens", {"token": "WAIT-1", "context": {"kind": "wait"}})
    served.ok("POST", "/tokens", {"token": "STUCK-1", "context": {"kind": "stuck"}})
    begun = time.monotonic()

    waited = served.wait_history("WAIT-1", "completed")
    stuck = served.wait_history("STUCK-1", "failed")

    print(f"\ntimeouts of 2 s fired within {time.monotonic() - begun:.2f} s")
    kinds = [entry["kind"] for entry in waited]
    assert in_order(kinds, ["timer_set", "timer_fired", "event_accepted", "completed"]), kinds
    fired = kinds.index("timer_fired")
    assert waited[fired]["data"]["event"] == "timeout"
    assert kinds[fired + 1] == "event_accepted"
    assert waited[fired + 1]["data"]["event"] == "timeout"
    assert served.ok("GET", "/tokens/WAIT-1")["status"] == "completed"
    check_seqs(waited)

    kinds = [entry["kind"] for entry in stuck]
    assert in_order(kinds, ["timer_set", "timer_fired", "failed"]), kinds
    assert stuck[-1]["kind"] == "failed"
    assert stuck[-1]["data"]["reason"].startswith("'stuck' timed out"), stuck[-1]
    assert served.ok("GET", "/tokens/STUCK-1")["status"] == "failed"
    check_seqs(stuck)
    assert served.stop() == 0


def test_after_a_kill_9_the_clock_of_the_new_serve_still_ends_a_held_lease(
    launcher: Launcher, graph: Path, db: Path
) -> None:
    first = launcher.serve(graph, db, "--lease", "2s")
    start_token(first, "ORDER-1")
    task = claim(first, "box-1")["task"]
    for _ in range(3):
        assert heartbeat(first, "box-1", task) == []
        time.sleep(0.5)
    assert first.kill() == -signal.SIGKILL

    again = launcher.serve(graph, db, "--lease", "2s")
    entries = again.wait_history("ORDER-1", "task_retrying")

    assert [entry["kind"] for entry in entries][-2:] == ["task_failed", "task_retrying"]
    assert entries[-2]["data"]["error"] == "box-1 stopped answering: no heartbeat for 2 seconds"
    check_seqs(entries)
    assert heartbeat(again, "box-1", task) == [task]
    grant = claim(again, "box-2")
    assert (grant["task"], grant["attempt"]) == (task, 2)
    assert again.stop() == 0


# The HTTP edge of a real process.


def test_serve_help_names_its_threads_connection_limit_and_channel_timeout_with_defaults() -> None:
    shown = subprocess.run(
        command("serve", "--help"), env=environment(), capture_output=True, text=True, check=True
    ).stdout
    words = " ".join(shown.split())
    assert "--threads N request threads" in words and "(default: 8)" in words
    assert "--connection-limit N open connections at once" in words
    assert "(default: 1000)" in words
    assert "--channel-timeout DURATION how long a connection may stay idle" in words
    assert "(default: 60s)" in words


def test_a_serve_process_keeps_answering_while_clients_pipeline_and_never_read(
    launcher: Launcher, graph: Path, db: Path
) -> None:
    served = launcher.serve(graph, db, "--threads", "2", "--channel-timeout", "2s")
    start_token(served, "ORDER-1")
    assert served.request("POST", "/tokens", big_token_body("BIG-1"))[0] == 201
    stuck = pipelining_without_reading(served.port, "/tokens/BIG-1", connections=4, depth=40)
    try:
        time.sleep(1.0)
        began = time.monotonic()
        assert served.request("GET", "/health")[0] == 200
        assert served.request("POST", "/tokens/ORDER-1/events/submitted")[0] == 200
        assert time.monotonic() - began < 3.0
        assert all(closed_by_server(sock, timeout=6.0) for sock in stuck)
    finally:
        for sock in stuck:
            sock.close()


def test_allowed_hosts_name_the_origins_of_proxies_and_a_bad_one_stops_serve(
    launcher: Launcher, graph: Path, db: Path
) -> None:
    code, lines, _ = launcher.refused(graph, db, "--allowed-host", "ftp://cp.example.com")
    assert (code, lines) == (
        1,
        [
            "error: --allowed-host: 'ftp://cp.example.com' is not an origin such as https://NAME:PORT"
        ],
    )
    options = ("--allowed-host", "cp.example.com", "--allowed-host", "https://ops.example:8443")
    served = launcher.serve(graph, db, *options)
    start_token(served, "ORDER-1")
    for host, origin, status in [
        ("cp.example.com", "https://cp.example.com", 200),
        ("ops.example:8443", "https://ops.example:8443", 200),
        ("ops.example:8443", "https://ops.example", 403),
        (f"127.0.0.1:{served.port}", "http://127.0.0.1:3000", 403),
        (f"127.0.0.1:{served.port}", f"http://127.0.0.1:{served.port}", 200),
    ]:
        answer = served.request("GET", "/tokens/ORDER-1", None, {"Host": host, "Origin": origin})
        assert answer[0] == status, (host, origin, answer)


def test_a_new_sqlite_database_and_its_companions_are_readable_by_their_owner_only(
    launcher: Launcher, graph: Path, db: Path
) -> None:
    served = launcher.serve(graph, db)
    start_token(served, "ORDER-1")
    companions = [db, db.with_name(db.name + "-wal"), db.with_name(db.name + "-shm")]
    assert {path.name: oct(path.stat().st_mode & 0o777) for path in companions} == {
        path.name: "0o600" for path in companions
    }
    assert served.stop() == 0
