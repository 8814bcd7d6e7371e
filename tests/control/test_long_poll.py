"""Long-poll claims: `POST /tasks/claim` with `wait` holds the request until a task is queued.

The first tests run `stateous serve` as a real process on a real port; the last ones serve
the engine in-process over real HTTP on each backend (SQLite, and Postgres when given).
"""

from __future__ import annotations

import concurrent.futures
import select
import time
import urllib.request
from contextlib import closing
from pathlib import Path
from typing import Any

import apsw
import pytest

from stateous.client.http import Connection
from stateous.control.waiting_claims import COME_BACK
from tests.control import raw
from tests.control.conftest import Served as InProcess
from tests.control.serving import Launcher, Served, orders, write_graph

#: States no task is ever queued in: a claim for them waits for its whole `wait`.
NOWHERE = ["nowhere"]
CLAIM_NOWHERE = {"supervisor": "s9", "states": NOWHERE, "wait": 3}
CLAIM_DRAFT = {"supervisor": "s1", "states": ["draft"], "wait": 10}


@pytest.fixture
def graph(tmp_path: Path) -> Path:
    path = tmp_path / "orders.json"
    write_graph(path, orders())
    return path


def timed_claim(
    served: Served | InProcess, states: list[str], wait: Any, request: str | None = None
) -> tuple[int, Any, float, float]:
    """Claim with `wait`: the status, the answer, and the monotonic times of send and answer."""
    body: dict[str, Any] = {"supervisor": "s1", "states": states, "wait": wait}
    if request is not None:
        body["request"] = request
    sent = time.monotonic()
    answer = served.request("POST", "/tasks/claim", body)
    return answer[0], answer[-1], sent, time.monotonic()


def claimed_while_waiting(
    served: Served | InProcess, request: str
) -> tuple[int, Any, float, float]:
    """A claim of `draft` that waits, with `request`, while `T-1` is started: the claim's
    status, its answer, and the monotonic times of the start's answer and the claim's."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(timed_claim, served, ["draft"], 5, request)
        time.sleep(0.3)
        started = start(served, "T-1")
        status, grant, _, answered = waiting.result(timeout=10)
    return status, grant, started, answered


def start(served: Served | InProcess, token: str) -> float:
    """Start a token of `orders`; return the monotonic time of its answer."""
    status = served.request("POST", "/tokens", {"token": token, "context": {"title": "x"}})[0]
    assert status == 201
    return time.monotonic()


def test_a_waiting_claim_is_answered_with_the_grant_as_soon_as_a_task_is_queued(
    launcher: Launcher, graph: Path, tmp_path: Path
) -> None:
    served = launcher.serve(graph, tmp_path / "db.sqlite")
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(timed_claim, served, ["draft"], 5)
        time.sleep(0.5)
        started = start(served, "T-1")
        status, grant, sent, answered = waiting.result(timeout=10)
    assert status == 200, grant
    assert (grant["token"], grant["state"], grant["attempt"]) == ("T-1", "draft", 1)
    assert answered - sent >= 0.4  # it did wait for the task
    assert answered - started < 1.0
    assert "task_claimed" in served.kinds("T-1")


def test_a_waiting_claim_with_nothing_queued_is_answered_204_when_its_wait_ends(
    launcher: Launcher, graph: Path, tmp_path: Path
) -> None:
    served = launcher.serve(graph, tmp_path / "db.sqlite")
    status, answer, sent, answered = timed_claim(served, ["draft"], 1)
    assert (status, answer) == (204, None)
    assert 0.9 <= answered - sent < 3.0


#: Waits that are refused, with the code of each refusal.
REFUSED_WAITS = [
    (-1, "invalid_argument"),
    (31, "invalid_argument"),
    (30.5, "invalid_argument"),
    ("x", "invalid_body"),
    (True, "invalid_body"),
    (None, "invalid_body"),
]


def test_a_wait_outside_0_to_30_seconds_is_refused_and_writes_nothing(served: InProcess) -> None:
    start(served, "T-1")
    for wait, code in REFUSED_WAITS:
        status, answer, _, _ = timed_claim(served, ["draft"], wait)
        assert (status, answer["code"]) == (422, code), (wait, answer)
        assert "wait" in answer["error"]
    kinds = [entry["kind"] for entry in served.request("GET", "/tokens/T-1/history")[2]]
    assert "task_claimed" not in kinds
    # The task is still queued: a claim without a wait gets it.
    assert timed_claim(served, ["draft"], 0)[0] == 200


def test_claims_wait_without_holding_request_threads_and_beyond_the_bound_get_204_at_once(
    launcher: Launcher, graph: Path, tmp_path: Path
) -> None:
    served = launcher.serve(
        graph, tmp_path / "db.sqlite", "--threads", "2", "--connection-limit", "12"
    )
    start(served, "T-1")
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        claims = [pool.submit(timed_claim, served, NOWHERE, 3) for _ in range(16)]
        done, held = concurrent.futures.wait(claims, timeout=1.5)
        # Two request threads, yet 12 claims wait (as many as the connections the control
        # plane keeps open); the other 4 are answered 204 at once.
        assert len(done) == 4
        assert [claim.result()[0] for claim in done] == [204] * 4
        sent = time.monotonic()
        status, token = served.request("POST", "/tokens/T-1/events/submitted", {})
        assert status == 200, token
        assert time.monotonic() - sent < 0.5
        # A claim turned away is told when to come back; one that waited is not.
        turned_away = Connection(served.url)
        assert turned_away.call("POST", "/tasks/claim", CLAIM_NOWHERE) == (204, None)
        assert turned_away.retry_after == COME_BACK
        answers = [claim.result(timeout=10) for claim in held]
    assert [status for status, *_ in answers] == [204] * 12
    assert all(2.9 <= answered - sent < 5 for _, _, sent, answered in answers)
    waited = Connection(served.url)
    assert waited.call("POST", "/tasks/claim", {**CLAIM_NOWHERE, "wait": 0.5}) == (204, None)
    assert waited.retry_after is None


def test_a_claim_whose_client_left_while_it_waited_takes_no_task(
    launcher: Launcher, graph: Path, tmp_path: Path
) -> None:
    served = launcher.serve(graph, tmp_path / "db.sqlite")
    leaving = raw.open_socket(served.port)
    leaving.sendall(
        raw.request_bytes("POST", "/tasks/claim", {**CLAIM_DRAFT, "supervisor": "gone"})
    )
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        time.sleep(0.3)
        staying = pool.submit(timed_claim, served, ["draft"], 10)
        time.sleep(0.3)
        leaving.close()
        time.sleep(0.3)
        started = start(served, "T-1")
        status, grant, _, answered = staying.result(timeout=10)
    # The first claim waited longest, but its client left: the task goes to the second.
    assert status == 200, grant
    assert answered - started < 1.0
    claimed = [entry for entry in served.history("T-1") if entry["kind"] == "task_claimed"]
    assert [entry["data"]["supervisor"] for entry in claimed] == ["s1"]


def test_a_request_sent_behind_a_waiting_claim_ends_its_wait_at_once(
    launcher: Launcher, graph: Path, tmp_path: Path
) -> None:
    served = launcher.serve(graph, tmp_path / "db.sqlite")
    with raw.open_socket(served.port) as sock:
        sock.sendall(raw.request_bytes("POST", "/tasks/claim", {**CLAIM_NOWHERE, "wait": 20}))
        time.sleep(0.5)
        sent = time.monotonic()
        sock.sendall(raw.request_bytes("GET", "/health"))
        data = b""
        while not raw.parse_replies(data) and time.monotonic() - sent < 5:
            if select.select([sock], [], [], 0.1)[0]:
                data += sock.recv(1 << 16)
        elapsed = time.monotonic() - sent
    # Answers go in order: the claim's first, with nothing, without waiting its 20 s.
    assert [reply.status for reply in raw.parse_replies(data)][:1] == [204]
    assert elapsed < 2.0
    assert served.request("GET", "/health")[0] == 200


def test_a_waiting_claim_is_counted_once_with_its_whole_wait(
    launcher: Launcher, graph: Path, tmp_path: Path
) -> None:
    served = launcher.serve(graph, tmp_path / "db.sqlite")
    assert timed_claim(served, NOWHERE, 1)[0] == 204
    with urllib.request.urlopen(f"{served.url}/metrics", timeout=10) as response:
        text = response.read().decode()
    counted = [
        line
        for line in text.splitlines()
        if line.startswith("stateous_http_requests_total{") and 'route="/tasks/claim"' in line
    ]
    assert len(counted) == 1 and counted[0].endswith(" 1"), counted
    slow = [
        line
        for line in text.splitlines()
        if line.startswith("stateous_http_request_duration_seconds_bucket{")
        and 'route="/tasks/claim"' in line
        and 'le="0.5"' in line
    ]
    assert slow and slow[0].endswith(" 0"), slow


def test_the_empty_claims_of_an_idle_supervisor_write_nothing_after_the_first(
    launcher: Launcher, graph: Path, tmp_path: Path
) -> None:
    db = tmp_path / "db.sqlite"
    served = launcher.serve(graph, db)
    first = {"supervisor": "s1", "states": ["draft"], "request": "r-1"}
    assert served.request("POST", "/tasks/claim", first) == (204, None)
    written = rows(db, "SELECT supervisor, claimed_at FROM claims")
    for again in range(2, 5):
        body = {**first, "request": f"r-{again}"}
        assert served.request("POST", "/tasks/claim", body) == (204, None)
    assert rows(db, "SELECT supervisor, claimed_at FROM claims") == written
    assert rows(db, "SELECT * FROM claim_requests") == []
    # A task queued: the next claim takes it, and its request id is kept with it.
    start(served, "T-1")
    assert served.request("POST", "/tasks/claim", {**first, "request": "r-5"})[0] == 200
    [(task, *kept)] = rows(db, "SELECT task_id, supervisor, request, attempt FROM claim_requests")
    assert kept == ["s1", "r-5", 1]
    # The grant is given again to its request id, and only to it, while s1 holds it.
    assert served.request("POST", "/tasks/claim", {**first, "request": "r-5"})[1]["task"] == task
    assert served.request("POST", "/tasks/claim", {**first, "request": "r-6"}) == (204, None)
    assert served.request("POST", "/tasks/claim", {**first, "request": "r-5"})[1]["task"] == task
    assert served.request("POST", "/tasks/claim", {**first, "supervisor": "s2"}) == (204, None)


def rows(db: Path, query: str) -> list[list[Any]]:
    """The rows of a query on a SQLite database, read only."""
    with closing(apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)) as connection:
        return [list(row) for row in connection.execute(query)]


def test_a_sigterm_ends_the_waiting_claims_and_serve_stops_at_once(
    launcher: Launcher, graph: Path, tmp_path: Path
) -> None:
    served = launcher.serve(graph, tmp_path / "db.sqlite")
    with concurrent.futures.ThreadPoolExecutor(3) as pool:
        claims = [pool.submit(timed_claim, served, NOWHERE, 30) for _ in range(3)]
        time.sleep(0.5)
        sent = time.monotonic()
        assert served.stop() == 0
        stopped = time.monotonic() - sent
        answers = [claim.result(timeout=10)[0] for claim in claims]
    assert stopped < 3.0
    assert answers == [204, 204, 204]


def test_a_waiting_claim_with_a_request_id_gets_the_same_grant_when_repeated(
    served: InProcess,
) -> None:
    status, grant, started, answered = claimed_while_waiting(served, "r-1")
    assert status == 200, grant
    assert answered - started < 1.0
    status, again, _, _ = timed_claim(served, ["draft"], 5, "r-1")
    assert status == 200
    assert (again["task"], again["attempt"]) == (grant["task"], grant["attempt"])
    kinds = [entry["kind"] for entry in served.request("GET", "/tokens/T-1/history")[2]]
    assert kinds.count("task_claimed") == 1


def test_a_waiting_claim_is_not_woken_by_a_task_of_another_state(served: InProcess) -> None:
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(timed_claim, served, ["review"], 1)
        time.sleep(0.2)
        start(served, "T-1")
        status, _, sent, answered = waiting.result(timeout=10)
    assert status == 204
    assert answered - sent >= 0.9
    assert timed_claim(served, ["draft"], 0)[0] == 200


def ledger_moments(served: InProcess, token: str) -> dict[str, str]:
    """The moment of the first ledger row of each kind of a token, as the database keeps it."""
    found = served.engine.store.read(
        lambda tx: tx.execute("SELECT kind, at FROM ledger WHERE token = ? ORDER BY seq", (token,))
    )
    moments: dict[str, str] = {}
    for kind, at in found:
        moments.setdefault(kind, at)
    return moments


def test_a_waiting_claim_is_handed_its_task_in_the_transaction_that_queued_it(
    served: InProcess,
) -> None:
    status, grant, _, _ = claimed_while_waiting(served, "r-1")
    assert status == 200, grant
    assert (grant["token"], grant["state"], grant["attempt"]) == ("T-1", "draft", 1)
    # One transaction: the start's rows and the claim's carry the same moment.
    moments = ledger_moments(served, "T-1")
    assert moments["task_claimed"] == moments["started"]


def test_a_task_queued_is_handed_to_the_longest_waiting_claim_and_the_others_wait_on(
    served: InProcess,
) -> None:
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        first = pool.submit(timed_claim, served, ["draft"], 2, "r-1")
        time.sleep(0.3)
        second = pool.submit(timed_claim, served, ["draft"], 2, "r-2")
        time.sleep(0.3)
        started = start(served, "T-1")
        status, grant, _, answered = first.result(timeout=10)
        assert (status, grant["token"]) == (200, "T-1")
        assert answered - started < 1.0
        status, _, sent, answered = second.result(timeout=10)
    # Not woken for the task that the first took: it waited its whole wait.
    assert status == 204
    assert answered - sent >= 1.9
    kinds = [entry["kind"] for entry in served.request("GET", "/tokens/T-1/history")[2]]
    assert kinds.count("task_claimed") == 1


def test_a_claim_handed_its_task_by_a_fire_is_told_that_fire_and_its_payload(
    served: InProcess,
) -> None:
    start(served, "T-1")
    assert served.request("POST", "/tokens/T-1/events/submitted")[0] == 200
    reject = {"payload": {"approved": False, "note": "fix the title"}}
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(timed_claim, served, ["draft"], 5, "r-1")
        time.sleep(0.3)
        status, token = served.request("POST", "/tokens/T-1/events/reviewed", reject)[::2]
        assert (status, token["state"]) == (200, "draft"), token
        status, grant, _, _ = waiting.result(timeout=10)
    assert status == 200, grant
    # The event that brought the token back to `draft`, written in the same transaction.
    assert grant["entered_by"] == {"name": "reviewed", "payload": reject["payload"]}
