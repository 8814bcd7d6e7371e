"""The listings over HTTP: `GET /tokens`, `GET /tasks` and `GET /supervisors`, their filters,
their pages (followed by the `Link` header) and their refusals, on both backends, with the
clock in the test's hand."""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import pytest

from stateous.client import Client
from stateous.control.claiming import CLAIM_TIME_KEPT
from stateous.control.listings import SEEN_FOR
from stateous.model.wire import ReportBody
from tests.control.conftest import Served, serving
from tests.control.support import Backend, Plane, orders, plane_for

LINK = re.compile(r'<(/[^>]*)>; rel="next"\Z')
#: The clock's start in the API's form (support.Clock starts at 1,800,000,000 s).
START = "2027-01-15T08:00:00Z"


@pytest.fixture
def plane(backend: Backend) -> Iterator[Plane]:
    made = plane_for(orders(), backend)
    yield made
    made.store.close()


@pytest.fixture
def api(plane: Plane) -> Iterator[Served]:
    with serving(plane.engine) as served:
        yield served


def pages(api: Served, path: str) -> list[list[Any]]:
    """Every page of a listing from `path` on, following each `Link: rel="next"`."""
    found = []
    while True:
        status, headers, body = api.request("GET", path)
        assert status == 200, body
        found.append(body)
        link = headers.get("link")
        if link is None:
            return found
        match = LINK.match(link)
        assert match is not None, link
        path = match.group(1)


def ids(rows: list[dict[str, Any]]) -> list[Any]:
    return [row.get("token") if "task" not in row else row["task"] for row in rows]


def start(plane: Plane, *names: str, step: float = 0.0) -> None:
    for name in names:
        plane.engine.start(name, {"title": name})
        plane.clock.advance(step)


def cursor(key: list[Any]) -> str:
    """A cursor made by hand, of the form the listings make (URL-safe base64 of JSON)."""
    return base64.urlsafe_b64encode(json.dumps(key).encode()).decode().rstrip("=")


def refusal(api: Served, path: str) -> str:
    """The sentence of a 422 `invalid_argument` answer to `path`."""
    status, _, body = api.request("GET", path)
    assert (status, body["code"]) == (422, "invalid_argument"), body
    return str(body["error"])


# tokens


def test_pages_of_tokens_moved_at_one_moment_hold_each_token_once_in_id_order(
    plane: Plane, api: Served
) -> None:
    start(plane, "E", "C", "A", "G", "B", "F", "D")  # all at one moment
    found = pages(api, "/tokens?limit=3")
    assert [ids(page) for page in found] == [["A", "B", "C"], ["D", "E", "F"], ["G"]]


def test_the_link_of_a_page_keeps_the_query_and_adds_the_cursor(plane: Plane, api: Served) -> None:
    start(plane, "A", "B", "C", step=1)
    status, headers, body = api.request("GET", "/tokens?status=active&state=draft&limit=2")
    assert (status, ids(body)) == (200, ["C", "B"])
    match = LINK.match(headers["link"])
    assert match is not None
    assert match.group(1).startswith("/tokens?status=active&state=draft&limit=2&after=")
    status, headers, body = api.request("GET", match.group(1))
    assert (status, ids(body), headers.get("link")) == (200, ["A"], None)


def test_old_clients_see_the_first_page_they_saw_before(plane: Plane, api: Served) -> None:
    start(plane, "A", "B", "C", step=1)
    plane.engine.cancel("B")
    assert ids(api.request("GET", "/tokens")[2]) == ["B", "C", "A"]
    assert ids(api.request("GET", "/tokens?status=active")[2]) == ["C", "A"]
    assert ids(api.request("GET", "/tokens?limit=1")[2]) == ["B"]


def test_a_token_that_moves_between_pages_leaves_the_pages_after_and_heads_a_new_first_page(
    plane: Plane, api: Served
) -> None:
    start(plane, "A", "B", "C", "D", "E", "F", step=1)
    _, headers, first = api.request("GET", "/tokens?limit=2")
    assert ids(first) == ["F", "E"]
    plane.engine.fire("D", "submitted")  # not listed yet: it moves ahead of the cursor
    plane.clock.advance(1)
    plane.engine.fire("F", "submitted")  # listed already: it is not listed again
    rest = pages(api, LINK.match(headers["link"]).group(1))  # type: ignore[union-attr]
    assert [ids(page) for page in rest] == [["C", "B"], ["A"]]
    assert ids(api.request("GET", "/tokens?limit=2")[2]) == ["F", "D"]


def test_tokens_by_state_status_parent_and_time(plane: Plane, api: Served) -> None:
    start(plane, "A", "B", "C", "D", step=10)  # moved at START, +10 s, +20 s, +30 s
    plane.engine.fire("B", "submitted")  # B in review, moved at +40 s
    plane.engine.pause("C")  # moved at +40 s
    by_state = api.request("GET", "/tokens?state=review")[2]
    assert [(row["token"], row["state"]) for row in by_state] == [("B", "review")]
    assert ids(api.request("GET", "/tokens?state=draft&status=active")[2]) == ["D", "A"]
    assert ids(api.request("GET", "/tokens?status=paused")[2]) == ["C"]
    assert api.request("GET", "/tokens?parent=A")[2] == []
    assert ids(api.request("GET", "/tokens?since=2027-01-15T08:00:10Z")[2]) == ["B", "C", "D"]
    window = "since=2027-01-15T08:00:30Z&until=2027-01-15T08:00:40Z"  # until is not in it
    assert ids(api.request("GET", f"/tokens?{window}")[2]) == ["D"]
    local = quote("2027-01-15T13:30:30+05:30")  # the same moment, in another zone
    assert ids(api.request("GET", f"/tokens?until={local}")[2]) == ["A"]
    assert api.request("GET", "/tokens?state=nowhere")[2] == []


def test_bad_values_of_the_token_listing_are_refused_naming_the_parameter(
    plane: Plane, api: Served
) -> None:
    start(plane, "A", "B")
    for query, name in (
        ("status=done", "status"),
        ("limit=0", "limit"),
        ("limit=1001", "limit"),
        ("limit=%2B5", "limit"),
        ("since=yesterday", "since"),
        ("until=2027-01-15T08:00:00", "until"),  # no zone
        ("after=not-a-cursor", "after"),
        (f"after={cursor(['x', 'A'])}", "after"),  # not a time
        (f"after={cursor(['2027-01-15 08:00:00.000000'])}", "after"),
    ):
        assert refusal(api, f"/tokens?{query}").startswith(name), query
    _, headers, _ = api.request("GET", "/tasks?limit=1")  # a cursor of another listing
    tasks_cursor = headers["link"].split("after=")[1].split(">")[0]
    assert refusal(api, f"/tokens?after={tasks_cursor}").startswith("after")


# tasks


def to_review(plane: Plane, token: str) -> None:
    plane.engine.start(token, {"title": token})
    plane.engine.fire(token, "submitted")


def test_live_tasks_come_oldest_first_with_their_state_supervisor_lease_and_age(
    plane: Plane, api: Served
) -> None:
    to_review(plane, "A")  # task 1 (draft) done, task 2 queued for review
    plane.clock.advance(60)
    to_review(plane, "B")  # task 4 for review
    plane.clock.advance(60)
    plane.engine.start("C", {"title": "C"})  # task 5 for draft
    grant = plane.engine.claim("box-1", ["review"])
    assert grant is not None and grant.token == "A"
    plane.clock.advance(30)
    listed = api.request("GET", "/tasks")[2]
    assert listed == [
        {
            "task": grant.task,
            "token": "A",
            "state": "review",
            "status": "claimed",
            "attempt": 1,
            "supervisor": "box-1",
            "lease_until": "2027-01-15T08:04:00Z",
            "queued_at": START,
            "age": 150.0,
            "checksum": plane.engine.graph.checksum,
            "waits_for": None,
            "waits": None,
        },
        {
            "task": 4,
            "token": "B",
            "state": "review",
            "status": "queued",
            "attempt": 0,
            "supervisor": None,
            "lease_until": None,
            "queued_at": "2027-01-15T08:01:00Z",
            "age": 90.0,
            "checksum": plane.engine.graph.checksum,
            "waits_for": None,
            "waits": None,
        },
        {
            "task": 5,
            "token": "C",
            "state": "draft",
            "status": "queued",
            "attempt": 0,
            "supervisor": None,
            "lease_until": None,
            "queued_at": "2027-01-15T08:02:00Z",
            "age": 30.0,
            "checksum": plane.engine.graph.checksum,
            "waits_for": None,
            "waits": None,
        },
    ]
    assert ids(api.request("GET", "/tasks?status=queued")[2]) == [4, 5]
    assert ids(api.request("GET", "/tasks?state=review")[2]) == [2, 4]
    assert ids(api.request("GET", "/tasks?state=review&status=queued")[2]) == [4]
    assert ids(api.request("GET", "/tasks?supervisor=box-1")[2]) == [2]
    assert api.request("GET", "/tasks?supervisor=box-2")[2] == []
    assert ids(api.request("GET", "/tasks?older_than=90s")[2]) == [2, 4]
    assert ids(api.request("GET", "/tasks?older_than=2m")[2]) == [2]
    assert api.request("GET", "/tasks?older_than=1h")[2] == []


def test_a_waiting_task_is_listed_without_a_supervisor_and_an_ended_one_not_at_all(
    plane: Plane, api: Served
) -> None:
    to_review(plane, "A")
    grant = plane.engine.claim("box-1", ["review"])
    assert grant is not None
    plane.engine.report(grant.task, ReportBody(kind="waiting", supervisor="box-1"))
    [waiting] = api.request("GET", "/tasks?status=waiting")[2]
    assert (waiting["task"], waiting["supervisor"], waiting["lease_until"]) == (2, None, None)
    assert ids(api.request("GET", "/tasks")[2]) == [2]  # task 1 (draft) is done


def test_pages_of_tasks_queued_at_one_moment_hold_each_task_once(plane: Plane, api: Served) -> None:
    start(plane, *"ABCDE")  # five draft tasks queued at one moment
    found = pages(api, "/tasks?limit=2&state=draft")
    assert [ids(page) for page in found] == [[1, 2], [3, 4], [5]]


def test_bad_values_of_the_task_listing_are_refused_naming_the_parameter(api: Served) -> None:
    for query, name in (
        ("status=done", "status"),
        ("status=active", "status"),
        ("older_than=5x", "older_than"),
        ("older_than=0s", "older_than"),
        ("older_than=-1h", "older_than"),
        ("supervisor=a%01b", "supervisor"),
        ("limit=1000000", "limit"),
        ("after=%FF", "after"),
        (f"after={cursor(['2027-01-15 08:00:00.000000', 'A'])}", "after"),  # of tokens
        (f"after={cursor(['2027-01-15 08:00:00.000000', 0])}", "after"),  # no task id
    ):
        assert refusal(api, f"/tasks?{query}").startswith(name), query


# supervisors


def test_supervisors_show_their_last_claim_and_heartbeat_and_the_tasks_they_hold(
    plane: Plane, api: Served
) -> None:
    to_review(plane, "A")
    to_review(plane, "B")
    assert api.request("GET", "/supervisors")[2] == []
    first = plane.engine.claim("box-1", ["review"])
    plane.clock.advance(5)
    second = plane.engine.claim("box-1", ["review"])
    plane.engine.claim("box-2", ["draft"])  # finds nothing
    plane.clock.advance(10)
    assert first is not None and second is not None
    plane.engine.heartbeat("box-1", [first.task, second.task])
    plane.engine.heartbeat("box-3", [])  # a heartbeat alone names a supervisor too
    assert api.request("GET", "/supervisors")[2] == [
        {
            # True to a minute: a claim 5 s after the last leaves the row alone (0025).
            "supervisor": "box-1",
            "last_claim": "2027-01-15T08:00:00Z",
            "last_heartbeat": "2027-01-15T08:00:15Z",
            "tasks": [first.task, second.task],
        },
        {
            "supervisor": "box-2",
            "last_claim": "2027-01-15T08:00:05Z",
            "last_heartbeat": None,
            "tasks": [],
        },
        {
            "supervisor": "box-3",
            "last_claim": None,
            "last_heartbeat": "2027-01-15T08:00:15Z",
            "tasks": [],
        },
    ]
    plane.engine.report(
        first.task,
        ReportBody(kind="event", event="reviewed", payload={"approved": True}, supervisor="box-1"),
    )
    [box1, *_] = api.request("GET", "/supervisors")[2]
    assert box1["tasks"] == [second.task]


def test_an_idle_supervisors_last_claim_is_written_again_once_a_minute(
    plane: Plane, api: Served
) -> None:
    def last_claim() -> str:
        [row] = api.request("GET", "/supervisors")[2]
        return str(row["last_claim"])

    plane.engine.claim("idle", ["review"])  # its first claim writes its row
    plane.clock.advance(CLAIM_TIME_KEPT - 1)
    plane.engine.claim("idle", ["review"])  # an empty claim on a fresh row only reads
    assert last_claim() == START
    plane.clock.advance(1)
    plane.engine.claim("idle", ["review"])  # the row is a minute old: written again
    assert last_claim() == "2027-01-15T08:01:00Z"


def test_a_supervisor_unseen_for_a_day_is_no_longer_listed(plane: Plane, api: Served) -> None:
    plane.engine.claim("gone", ["review"])
    plane.clock.advance(SEEN_FOR - 1)
    plane.engine.heartbeat("late", [])
    assert [row["supervisor"] for row in api.request("GET", "/supervisors")[2]] == [
        "gone",
        "late",
    ]
    plane.clock.advance(1)
    assert [row["supervisor"] for row in api.request("GET", "/supervisors")[2]] == ["late"]


def test_supervisors_are_paged_by_name_with_a_link_to_the_next_page(
    plane: Plane, api: Served
) -> None:
    names = [f"box-{number:03}" for number in range(105)]
    for name in reversed(names):
        plane.engine.heartbeat(name, [])
    status, headers, first = api.request("GET", "/supervisors")
    assert status == 200
    assert [row["supervisor"] for row in first] == names[:100]
    assert set(first[0]) == {"supervisor", "last_claim", "last_heartbeat", "tasks"}
    assert LINK.match(headers["link"])
    every = pages(api, "/supervisors?limit=40")
    assert [len(page) for page in every] == [40, 40, 25]
    assert [row["supervisor"] for page in every for row in page] == names
    status, _, body = api.request("GET", "/supervisors?after=bm90IGEgY3Vyc29y")
    assert (status, body["code"]) == (422, "invalid_argument")
    with Client(api.url) as client:
        assert [row["supervisor"] for row in client.supervisors()] == names


# the client


def test_the_client_reads_a_listing_page_after_page(plane: Plane, api: Served) -> None:
    start(plane, *"EDCBA")  # at one moment: listed by id
    with Client(api.url) as client:
        assert ids(client.listed("/tokens", 3, per_page=2)) == ["A", "B", "C"]
        assert ids(client.listed("/tokens", 10, per_page=2)) == ["A", "B", "C", "D", "E"]
        first, after = client.page("/tokens", limit=4)
        assert (ids(first), after is not None) == (["A", "B", "C", "D"], True)
        [row], last = client.page("/tokens", limit=4, after=after)
        # a listed token is the token as read by its id, without the graph file it moves by
        assert ({**row, "checksum": client.health()["checksum"]}, last) == (client.get("E"), None)
        assert ids(client.tasks(state="draft", limit=2)) == [1, 2]
        assert client.supervisors() == []
