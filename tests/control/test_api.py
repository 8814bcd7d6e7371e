"""The HTTP API over a real port and a real SQLite file: every route, every refusal, the limits."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterator
from typing import Any, NamedTuple

import msgspec
import pytest

from stateous.control import clock, errors
from stateous.control.engine import Engine
from stateous.model.limits import BODY_DEPTH_LIMIT, BODY_LIMIT
from tests.control.conftest import Served, build_engine, read_answer, serving
from tests.control.support import BACKENDS, open_backend

SUPERVISOR = "box-1"
TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$")
TOKEN_FIELDS = {"token", "state", "status", "visit", "context", "entered_at"}


def start(served: Served, token: str = "ORDER-1", title: str = "first") -> dict[str, Any]:
    """Start a token of `orders` and return it."""
    status, _, body = served.request(
        "POST", "/tokens", {"token": token, "context": {"title": title}}
    )
    assert status == 201, body
    return body


def claim(served: Served, state: str, request: str | None = None) -> dict[str, Any]:
    """Claim the task of `state` as SUPERVISOR and return the grant."""
    ask = {"supervisor": SUPERVISOR, "states": [state], "request": request}
    status, _, grant = served.request("POST", "/tasks/claim", ask)
    assert status == 200, grant
    return grant


def report(served: Served, task: int, **fields: Any) -> dict[str, Any]:
    """Report the outcome of a task and return the token after it."""
    status, _, token = served.request("POST", f"/tasks/{task}/report", fields)
    assert status == 200, token
    return token


def history(served: Served, token: str) -> list[dict[str, Any]]:
    status, _, entries = served.request("GET", f"/tokens/{token}/history")
    assert status == 200, entries
    return entries


def kinds(served: Served, token: str) -> list[str]:
    return [entry["kind"] for entry in history(served, token)]


def snapshot(served: Served) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """Every token as it is, and the length of each one's history."""
    status, _, tokens = served.request("GET", "/tokens?limit=1000")
    assert status == 200, tokens
    tokens.sort(key=lambda token: token["token"])
    return tokens, {token["token"]: len(history(served, token["token"])) for token in tokens}


def nested_memory(levels: int, task: int) -> bytes:
    """A memory write whose JSON nests `levels` levels, the body itself being the first."""
    lists = levels - 1
    return b'{"key": "deep", "attempt": 1, "value": ' + b"[" * lists + b"]" * lists + b"}"


# Success answers, route by route.


def test_health_names_the_workflow_its_checksum_and_the_lease(served: Served) -> None:
    status, headers, body = served.request("GET", "/health")
    assert status == 200
    assert headers["content-type"] == "application/json"
    assert body["workflow"] == "orders"
    assert body["checksum"].startswith("sha256:")
    assert body["lease"] == 120
    assert set(body) == {"workflow", "checksum", "lease"}


def test_the_workflow_route_answers_the_graph_file(served: Served, tmp_path) -> None:
    status, headers, body = served.request("GET", "/workflow")
    assert status == 200
    assert headers["content-type"] == "application/json"
    assert body == msgspec.json.decode((tmp_path / "orders.json").read_bytes())


def test_starting_a_new_token_answers_201_with_the_token(served: Served) -> None:
    status, headers, body = served.request(
        "POST", "/tokens", {"token": "ORDER-1", "context": {"title": "first"}}
    )
    assert status == 201
    assert headers["content-type"] == "application/json"
    assert set(body) == TOKEN_FIELDS
    assert body["token"] == "ORDER-1"
    assert (body["state"], body["status"], body["visit"]) == ("draft", "active", 1)
    assert body["context"] == {"title": "first", "amount": 0}
    assert TIME.match(body["entered_at"])


@pytest.mark.parametrize(
    "again",
    [
        {"token": "ORDER-1", "context": {"title": "other"}},
        {"token": "ORDER-1"},
        {"token": "ORDER-1", "context": {"title": 5}},
    ],
    ids=["another context", "no context", "a context that does not fit"],
)
def test_starting_an_existing_token_answers_200_with_it_unchanged(
    served: Served, again: dict[str, Any]
) -> None:
    first = start(served, "ORDER-1", "first")
    length = len(history(served, "ORDER-1"))
    status, _, body = served.request("POST", "/tokens", again)
    assert status == 200
    assert body == first
    assert len(history(served, "ORDER-1")) == length


def test_reading_a_token_answers_it(served: Served) -> None:
    started = start(served)
    status, _, body = served.request("GET", "/tokens/ORDER-1")
    assert status == 200
    # beside the token as started: the graph file it moves by
    assert body == {**started, "checksum": served.engine.graph.checksum}


def test_path_parts_are_percent_decoded(served: Served) -> None:
    start(served)
    status, _, body = served.request("GET", "/tokens/ORDER%2D1")
    assert (status, body["token"]) == (200, "ORDER-1")
    status, _, body = served.request("POST", "/tokens/ORDER-1/events/submit%74ed")
    assert (status, body["state"]) == (200, "review")


def test_listing_tokens_answers_the_most_recently_moved_first(served: Served) -> None:
    start(served, "LIST-A")
    start(served, "LIST-B")
    served.request("POST", "/tokens/LIST-A/events/submitted")
    status, _, listed = served.request("GET", "/tokens")
    assert status == 200
    assert [token["token"] for token in listed] == ["LIST-A", "LIST-B"]
    assert all(set(token) == TOKEN_FIELDS for token in listed)
    assert len(served.request("GET", "/tokens?limit=1")[2]) == 1
    assert len(served.request("GET", "/tokens?status=active")[2]) == 2
    assert served.request("GET", "/tokens?status=completed")[2] == []
    assert served.request("GET", "/tokens?parent=LIST-A")[2] == []


def test_a_parent_holding_a_nul_lists_no_children_like_any_unknown_parent(
    served: Served,
) -> None:
    start(served, "LIST-A")
    assert served.request("GET", "/tokens?parent=LIST-A%00")[:3:2] == (200, [])


def test_the_history_lists_the_entries_in_order(served: Served) -> None:
    start(served)
    entries = history(served, "ORDER-1")
    assert [entry["kind"] for entry in entries][:1] == ["started"]
    assert "entered" in [entry["kind"] for entry in entries]
    assert all(set(entry) == {"seq", "at", "kind", "data", "text"} for entry in entries)
    assert all(TIME.match(entry["at"]) and isinstance(entry["data"], dict) for entry in entries)
    numbers = [entry["seq"] for entry in entries]
    assert numbers == sorted(set(numbers))


def test_firing_an_event_answers_the_token_after_it(served: Served) -> None:
    start(served)
    status, _, body = served.request("POST", "/tokens/ORDER-1/events/submitted")
    assert status == 200
    assert (body["state"], body["status"], body["visit"]) == ("review", "active", 1)


def test_a_payload_reaches_the_guards(served: Served) -> None:
    start(served, "ORDER-1")
    start(served, "ORDER-2")
    for token in ("ORDER-1", "ORDER-2"):
        served.request("POST", f"/tokens/{token}/events/submitted")
    approve = {"payload": {"approved": True}}
    status, _, body = served.request("POST", "/tokens/ORDER-1/events/reviewed", approve)
    assert (status, body["status"]) == (200, "completed")
    reject = {"payload": {"approved": False, "note": "too dear"}}
    status, _, body = served.request("POST", "/tokens/ORDER-2/events/reviewed", reject)
    assert (status, body["state"], body["visit"]) == (200, "draft", 2)


def test_a_repeated_idempotency_key_answers_duplicate_and_changes_nothing(served: Served) -> None:
    start(served)
    key = {"Idempotency-Key": "hook-1"}
    status, _, fired = served.request("POST", "/tokens/ORDER-1/events/submitted", headers=key)
    assert (status, fired["state"]) == (200, "review")
    length = len(history(served, "ORDER-1"))
    status, _, body = served.request("POST", "/tokens/ORDER-1/events/submitted", headers=key)
    assert status == 200
    assert body == {"duplicate": True, "token": fired}
    assert len(history(served, "ORDER-1")) == length


def test_pause_resume_and_cancel_answer_the_token(served: Served) -> None:
    start(served)
    status, _, body = served.request("POST", "/tokens/ORDER-1/pause")
    assert (status, body["status"]) == (200, "paused")
    status, _, body = served.request("POST", "/tokens/ORDER-1/resume", {})
    assert (status, body["status"]) == (200, "active")
    status, _, body = served.request("POST", "/tokens/ORDER-1/cancel", raw=b"")
    assert (status, body["status"]) == (200, "cancelled")
    assert set(body) == TOKEN_FIELDS


def test_steering_a_token_in_the_wrong_status_says_so_in_a_whole_sentence(served: Served) -> None:
    start(served)
    served.request("POST", "/tokens/ORDER-1/cancel")
    sentences = {
        verb: served.request("POST", f"/tokens/ORDER-1/{verb}")[2]["error"]
        for verb in ("pause", "resume", "cancel")
    }
    assert sentences == {
        "pause": "token 'ORDER-1' is cancelled; it cannot be paused",
        "resume": "token 'ORDER-1' is cancelled; it cannot be resumed",
        "cancel": "token 'ORDER-1' is cancelled; it cannot be cancelled",
    }


def test_a_claim_answers_the_grant_and_an_empty_claim_answers_204(served: Served) -> None:
    start(served)
    grant = claim(served, "draft")
    assert isinstance(grant["task"], int)
    assert (grant["token"], grant["state"], grant["visit"], grant["attempt"]) == (
        "ORDER-1",
        "draft",
        1,
        1,
    )
    assert grant["context"] == {"title": "first", "amount": 0}
    assert grant["memory"] == {}
    assert grant["entered_by"] == {"name": "__started__"}
    assert grant["lease"] == 120
    status, _, body = served.request(
        "POST", "/tasks/claim", {"supervisor": SUPERVISOR, "states": ["draft"]}
    )
    assert (status, body) == (204, None)


def test_a_claim_with_the_same_request_id_answers_the_same_grant(served: Served) -> None:
    start(served)
    first = claim(served, "draft", request="req-1")
    assert claim(served, "draft", request="req-1") == first
    assert kinds(served, "ORDER-1").count("task_claimed") == 1


def test_a_claim_of_states_the_graph_does_not_have_matches_no_task(served: Served) -> None:
    start(served)
    unknown = ["shipping", "billing/invoice", "s" * 129]
    ask = {"supervisor": SUPERVISOR, "states": unknown}
    status, _, body = served.request("POST", "/tasks/claim", ask)
    assert (status, body) == (204, None)
    ask = {"supervisor": SUPERVISOR, "states": [f"old-{index}" for index in range(999)]}
    assert served.request("POST", "/tasks/claim", ask)[:1] == (204,)
    grant = claim_of(served, [*unknown, "draft"])
    assert (grant["token"], grant["state"]) == ("ORDER-1", "draft")


def claim_of(served: Served, states: list[str]) -> dict[str, Any]:
    status, _, grant = served.request(
        "POST", "/tasks/claim", {"supervisor": SUPERVISOR, "states": states}
    )
    assert status == 200, grant
    return grant


#: Every GET route, with a path that exists once ORDER-1 is started.
GET_PATHS = [
    "/health",
    "/workflow",
    "/tokens",
    "/tokens?status=active&limit=5",
    "/tokens/ORDER-1",
    "/tokens/ORDER-1/history",
    "/tokens/NOPE-1",
    "/nowhere",
]


@pytest.mark.parametrize("path", GET_PATHS)
def test_head_answers_like_get_without_a_body(served: Served, path: str) -> None:
    start(served)
    connection = served.connect()
    try:
        connection.request("GET", path)
        got = connection.getresponse()
        body = got.read()
        connection.request("HEAD", path)
        head = connection.getresponse()
        assert head.read() == b""
        assert head.status == got.status
        assert head.getheader("content-type") == got.getheader("content-type")
        assert head.getheader("content-length") == str(len(body))
        # the connection stays usable after a HEAD
        connection.request("GET", "/health")
        assert connection.getresponse().read()
    finally:
        connection.close()


def test_a_heartbeat_answers_the_tasks_that_are_lost(served: Served) -> None:
    start(served)
    grant = claim(served, "draft")
    ask = {"supervisor": SUPERVISOR, "tasks": [grant["task"], 999]}
    status, _, body = served.request("POST", "/tasks/heartbeat", ask)
    assert (status, body) == (200, {"lost": [999]})


def test_a_report_answers_the_token_after_the_outcome(served: Served) -> None:
    start(served)
    grant = claim(served, "draft")
    token = report(
        served,
        grant["task"],
        kind="event",
        event="submitted",
        context={"amount": 30},
        attempt=1,
        supervisor=SUPERVISOR,
    )
    assert (token["state"], token["context"]) == ("review", {"title": "first", "amount": 30})


def test_a_waiting_task_takes_a_report_from_outside(served: Served) -> None:
    start(served)
    draft = claim(served, "draft")
    report(served, draft["task"], kind="event", event="submitted", supervisor=SUPERVISOR)
    review = claim(served, "review")
    waiting = report(served, review["task"], kind="waiting", supervisor=SUPERVISOR)
    assert waiting["state"] == "review"
    done = report(
        served, review["task"], kind="event", event="reviewed", payload={"approved": True}
    )
    assert done["status"] == "completed"


def test_a_token_keeps_at_most_1000_pending_timers(served: Served) -> None:
    start(served)
    draft = claim(served, "draft")
    report(served, draft["task"], kind="event", event="submitted", supervisor=SUPERVISOR)
    task = claim(served, "review")["task"]
    hundred = [{"event": "submitted", "after": "1h"}] * 100
    report(served, task, kind="waiting", schedules=hundred, supervisor=SUPERVISOR)
    for _ in range(8):
        report(served, task, kind="waiting", schedules=hundred)  # from outside: it waits
    # 900 set, and review's timeout: 100 more would make 1001.
    length = len(history(served, "ORDER-1"))
    status, _, body = served.request(
        "POST", f"/tasks/{task}/report", {"kind": "waiting", "schedules": hundred}
    )
    assert (status, body["code"]) == (422, "too_many_timers")
    assert "901 pending timers" in body["error"]
    assert len(history(served, "ORDER-1")) == length
    report(served, task, kind="waiting", schedules=hundred[:99])
    assert kinds(served, "ORDER-1").count("timer_set") == 1000


def test_one_tick_works_off_a_backlog_of_timers_in_due_order(
    served: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The tick's time budget is lifted, so the test does not depend on the machine's pace.
    monkeypatch.setattr(clock, "KEEP_UP", 60.0)
    tasks = []
    for token in ("BURST-1", "BURST-2", "LATE-1"):
        start(served, token)
        draft = claim(served, "draft")
        report(served, draft["task"], kind="event", event="submitted", supervisor=SUPERVISOR)
        tasks.append(claim(served, "review")["task"])
    soon = [{"event": "submitted", "after": "1s"}] * 100
    for task in tasks[:2]:
        report(served, task, kind="waiting", schedules=soon, supervisor=SUPERVISOR)
        report(served, task, kind="waiting", schedules=soon)
    report(
        served,
        tasks[2],
        kind="waiting",
        schedules=[{"event": "reviewed", "after": "1s", "payload": {"approved": True}}],
        supervisor=SUPERVISOR,
    )
    time.sleep(1.2)
    assert clock.tick(served.engine) == (0, 401)
    assert served.request("GET", "/tokens/LATE-1")[2]["status"] == "completed"
    for token in ("BURST-1", "BURST-2"):
        assert kinds(served, token).count("timer_fired") == 200


def test_a_note_and_a_memory_write_answer_204_with_no_body(served: Served) -> None:
    start(served)
    draft = claim(served, "draft")
    report(served, draft["task"], kind="event", event="submitted", supervisor=SUPERVISOR)
    review = claim(served, "review")
    task = review["task"]
    status, _, body = served.request(
        "POST", f"/tasks/{task}/note", {"text": "halfway", "attempt": 1}
    )
    assert (status, body) == (204, None)
    write = {"key": "progress", "value": {"step": 3}, "attempt": 1}
    status, _, body = served.request("PUT", f"/tasks/{task}/memory", write)
    assert (status, body) == (204, None)
    assert {"note", "memory_set"} <= set(kinds(served, "ORDER-1"))
    report(served, task, kind="failed", error="flaky", attempt=1, supervisor=SUPERVISOR)
    assert claim(served, "review")["memory"] == {"progress": {"step": 3}}


def test_one_kept_alive_connection_serves_many_requests(served: Served) -> None:
    connection = served.connect()
    try:
        served.request("GET", "/health", connection=connection)
        socket = connection.sock
        for number in range(40):
            token = {"token": f"KEEP-{number}", "context": {"title": "kept"}}
            assert served.request("POST", "/tokens", token, connection=connection)[0] == 201
            assert served.request("GET", f"/tokens/KEEP-{number}", connection=connection)[0] == 200
            assert served.request("GET", "/tokens/NOPE-1", connection=connection)[0] == 404
            assert served.request("GET", "/nowhere", connection=connection)[0] == 404
            assert connection.sock is socket
    finally:
        connection.close()


def test_a_connection_serves_requests_after_a_204(served: Served) -> None:
    connection = served.connect()
    try:
        ask = {"supervisor": SUPERVISOR, "states": ["draft"]}
        assert served.request("POST", "/tasks/claim", ask, connection=connection)[0] == 204
        start_body = {"token": "ORDER-1", "context": {"title": "after"}}
        assert served.request("POST", "/tokens", start_body, connection=connection)[0] == 201
        assert served.request("POST", "/tasks/claim", ask, connection=connection)[0] == 200
    finally:
        connection.close()


# Refusals: every code, its status, and that nothing changed.


class Refusal(NamedTuple):
    """A request that the API refuses; `records` names the token that logs `event_rejected`."""

    name: str
    method: str
    path: str
    status: int
    code: str
    body: Any = None
    raw: bytes | None = None
    headers: dict[str, str] | None = None
    records: str | None = None


LIVE = {"attempt": 2, "supervisor": SUPERVISOR}
REFUSALS = [
    Refusal("a missing token", "GET", "/tokens/NOPE-1", 404, "token_not_found"),
    Refusal(
        "the history of a missing token", "GET", "/tokens/NOPE-1/history", 404, "token_not_found"
    ),
    Refusal(
        "an event on a missing token",
        "POST",
        "/tokens/NOPE-1/events/submitted",
        404,
        "token_not_found",
    ),
    Refusal("pausing a missing token", "POST", "/tokens/NOPE-1/pause", 404, "token_not_found"),
    Refusal("cancelling a missing token", "POST", "/tokens/NOPE-1/cancel", 404, "token_not_found"),
    Refusal(
        "a task id that is a word", "POST", "/tasks/abc/note", 404, "task_not_found", {"text": "hi"}
    ),
    Refusal(
        "a negative task id",
        "PUT",
        "/tasks/-1/memory",
        404,
        "task_not_found",
        {"key": "k", "value": 1},
    ),
    Refusal(
        "a fractional task id",
        "POST",
        "/tasks/1.5/report",
        404,
        "task_not_found",
        {"kind": "waiting"},
    ),
    Refusal(
        "a task id past 64 bits",
        "POST",
        "/tasks/99999999999999999999/note",
        404,
        "task_not_found",
        {"text": "hi"},
    ),
    Refusal(
        "a report on no task",
        "POST",
        "/tasks/999/report",
        404,
        "task_not_found",
        {"kind": "waiting"},
    ),
    Refusal("a note on no task", "POST", "/tasks/999/note", 404, "task_not_found", {"text": "hi"}),
    Refusal(
        "a memory write on no task",
        "PUT",
        "/tasks/999/memory",
        404,
        "task_not_found",
        {"key": "k", "value": 1},
    ),
    Refusal("an unknown path", "GET", "/nowhere", 404, "not_found"),
    Refusal("an unknown action on a token", "POST", "/tokens/ORDER-1/jump", 404, "not_found"),
    Refusal("a task without an action", "GET", "/tasks/{review}", 404, "not_found"),
    Refusal("deleting a token", "DELETE", "/tokens/ORDER-1", 405, "method_not_allowed"),
    Refusal("reading the claim route", "GET", "/tasks/claim", 405, "method_not_allowed"),
    Refusal("posting to health", "POST", "/health", 405, "method_not_allowed"),
    Refusal("asking a path's options", "OPTIONS", "/tokens", 405, "method_not_allowed"),
    Refusal("a method no route takes", "BREW", "/tokens/ORDER-1", 405, "method_not_allowed"),
    Refusal("a method no route takes on no path", "BREW", "/nowhere", 404, "not_found"),
    Refusal(
        "posting a memory write",
        "POST",
        "/tasks/{review}/memory",
        405,
        "method_not_allowed",
        {"key": "k", "value": 1},
    ),
    Refusal(
        "malformed JSON",
        "POST",
        "/tokens/ORDER-1/events/reviewed",
        400,
        "bad_request",
        raw=b'{"payload": ',
    ),
    Refusal("a body that is not UTF-8", "POST", "/tokens", 400, "bad_request", raw=b"\xff\xfe"),
    Refusal(
        "a body with trailing data",
        "POST",
        "/tokens",
        400,
        "bad_request",
        raw=b'{"token": "NEW-1"} {}',
    ),
    Refusal(
        "a steering body that is not JSON",
        "POST",
        "/tokens/ORDER-1/pause",
        400,
        "bad_request",
        raw=b"now",
    ),
    Refusal("a limit of 0", "GET", "/tokens?limit=0", 422, "invalid_argument"),
    Refusal("a limit of 1001", "GET", "/tokens?limit=1001", 422, "invalid_argument"),
    Refusal("a limit that is a word", "GET", "/tokens?limit=ten", 422, "invalid_argument"),
    Refusal("an unknown status", "GET", "/tokens?status=sleeping", 422, "invalid_argument"),
    Refusal("a limit with an underscore", "GET", "/tokens?limit=1_0", 422, "invalid_argument"),
    Refusal(
        "a limit in Arabic-Indic digits",
        "GET",
        "/tokens?limit=%D9%A1%D9%A0",
        422,
        "invalid_argument",
    ),
    Refusal("a limit with a sign", "GET", "/tokens?limit=%2B10", 422, "invalid_argument"),
    Refusal("a token id holding a NUL", "GET", "/tokens/A%00B", 404, "token_not_found"),
    Refusal(
        "the history of a token id holding a NUL",
        "GET",
        "/tokens/ORDER-1%00/history",
        404,
        "token_not_found",
    ),
    Refusal(
        "an event on a token id holding a NUL",
        "POST",
        "/tokens/ORDER-1%00/events/submitted",
        404,
        "token_not_found",
    ),
    Refusal(
        "cancelling a token id holding a NUL", "POST", "/tokens/%00/cancel", 404, "token_not_found"
    ),
    Refusal(
        "an event name holding a NUL",
        "POST",
        "/tokens/ORDER-1/events/sub%00mitted",
        409,
        "event_not_allowed",
    ),
    Refusal(
        "a task id of 4301 digits",
        "POST",
        "/tasks/" + "9" * 4301 + "/note",
        404,
        "task_not_found",
        {"text": "hi"},
    ),
    Refusal(
        "a heartbeat of a task id past 64 bits",
        "POST",
        "/tasks/heartbeat",
        422,
        "invalid_argument",
        {"supervisor": SUPERVISOR, "tasks": [2**70]},
    ),
    Refusal(
        "a heartbeat of a task id of 0",
        "POST",
        "/tasks/heartbeat",
        422,
        "invalid_argument",
        {"supervisor": SUPERVISOR, "tasks": [0]},
    ),
    Refusal(
        "a claim by a name with a C1 control character",
        "POST",
        "/tasks/claim",
        422,
        "invalid_argument",
        {"supervisor": "box\x85one", "states": ["review"]},
    ),
    Refusal(
        "a claim by a name with a line separator",
        "POST",
        "/tasks/claim",
        422,
        "invalid_argument",
        {"supervisor": "box\u2028one", "states": ["review"]},
    ),
    Refusal(
        "a memory key with a paragraph separator",
        "PUT",
        "/tasks/{review}/memory",
        422,
        "invalid_payload",
        {"key": "k\u2029", "value": 1, "attempt": 2},
    ),
    Refusal(
        "an idempotency key with a C1 control character",
        "POST",
        "/tokens/ORDER-1/events/submitted",
        422,
        "invalid_payload",
        headers={"Idempotency-Key": "key\x9f"},
    ),
    Refusal(
        "a claim by an empty name",
        "POST",
        "/tasks/claim",
        422,
        "invalid_argument",
        {"supervisor": "", "states": ["review"]},
    ),
    Refusal(
        "a claim by a name of 257 characters",
        "POST",
        "/tasks/claim",
        422,
        "invalid_argument",
        {"supervisor": "s" * 257, "states": ["review"]},
    ),
    Refusal(
        "a claim by a name with a control character",
        "POST",
        "/tasks/claim",
        422,
        "invalid_argument",
        {"supervisor": "box\tone", "states": ["review"]},
    ),
    Refusal(
        "a claim with a bad request id",
        "POST",
        "/tasks/claim",
        422,
        "invalid_argument",
        {"supervisor": SUPERVISOR, "states": ["review"], "request": "bad id!"},
    ),
    Refusal(
        "a claim of a state name of 130 characters",
        "POST",
        "/tasks/claim",
        422,
        "invalid_argument",
        {"supervisor": SUPERVISOR, "states": ["s" * 130]},
    ),
    Refusal(
        "a claim of a state name that is a number",
        "POST",
        "/tasks/claim",
        422,
        "invalid_body",
        {"supervisor": SUPERVISOR, "states": [7]},
    ),
    Refusal(
        "a claim of 1001 states",
        "POST",
        "/tasks/claim",
        422,
        "invalid_argument",
        {"supervisor": SUPERVISOR, "states": ["review"] * 1001},
    ),
    Refusal(
        "a heartbeat of 1001 tasks",
        "POST",
        "/tasks/heartbeat",
        422,
        "invalid_argument",
        {"supervisor": SUPERVISOR, "tasks": list(range(1001))},
    ),
    Refusal(
        "a context without its required field",
        "POST",
        "/tokens",
        422,
        "invalid_context",
        {"token": "NEW-1", "context": {"amount": 1}},
    ),
    Refusal(
        "a context field of the wrong type",
        "POST",
        "/tokens",
        422,
        "invalid_context",
        {"token": "NEW-1", "context": {"title": 5}},
    ),
    Refusal(
        "a report whose context change breaks the model",
        "POST",
        "/tasks/{review}/report",
        422,
        "invalid_context",
        {"kind": "waiting", "context": {"amount": "lots"}, **LIVE},
    ),
    Refusal(
        "a payload that breaks its model",
        "POST",
        "/tokens/ORDER-1/events/reviewed",
        422,
        "invalid_payload",
        {"payload": {"approved": "yes"}},
    ),
    Refusal(
        "a payload without its required field",
        "POST",
        "/tokens/ORDER-1/events/reviewed",
        422,
        "invalid_payload",
        {"payload": {"note": "hm"}},
    ),
    Refusal(
        "an empty idempotency key",
        "POST",
        "/tokens/ORDER-1/events/reviewed",
        422,
        "invalid_payload",
        {"payload": {"approved": True}},
        headers={"Idempotency-Key": ""},
    ),
    Refusal(
        "an idempotency key of 257 characters",
        "POST",
        "/tokens/ORDER-1/events/reviewed",
        422,
        "invalid_payload",
        {"payload": {"approved": True}},
        headers={"Idempotency-Key": "k" * 257},
    ),
    Refusal(
        "a note of only spaces",
        "POST",
        "/tasks/{review}/note",
        422,
        "invalid_payload",
        {"text": "   ", "attempt": 2},
    ),
    Refusal(
        "a note of 501 characters",
        "POST",
        "/tasks/{review}/note",
        422,
        "invalid_payload",
        {"text": "x" * 501, "attempt": 2},
    ),
    Refusal(
        "an empty memory key",
        "PUT",
        "/tasks/{review}/memory",
        422,
        "invalid_payload",
        {"key": "", "value": 1, "attempt": 2},
    ),
    Refusal(
        "a memory key of 129 characters",
        "PUT",
        "/tasks/{review}/memory",
        422,
        "invalid_payload",
        {"key": "k" * 129, "value": 1, "attempt": 2},
    ),
    Refusal(
        "a memory key with a control character",
        "PUT",
        "/tasks/{review}/memory",
        422,
        "invalid_payload",
        {"key": "k\t", "value": 1, "attempt": 2},
    ),
    Refusal(
        "a schedule with a bad duration",
        "POST",
        "/tasks/{review}/report",
        422,
        "invalid_payload",
        {
            "kind": "waiting",
            "schedules": [{"event": "reviewed", "after": "soon", "payload": {"approved": True}}],
            **LIVE,
        },
    ),
    Refusal(
        "a report that sets 101 timers",
        "POST",
        "/tasks/{review}/report",
        422,
        "too_many_timers",
        {
            "kind": "waiting",
            "schedules": [{"event": "submitted", "after": "1h"}] * 101,
            **LIVE,
        },
    ),
    Refusal(
        "a token id that starts with a dash",
        "POST",
        "/tokens",
        422,
        "invalid_token_id",
        {"token": "-bad", "context": {"title": "x"}},
    ),
    Refusal(
        "a token id with a space",
        "POST",
        "/tokens",
        422,
        "invalid_token_id",
        {"token": "a b", "context": {"title": "x"}},
    ),
    Refusal(
        "a token id of 129 characters",
        "POST",
        "/tokens",
        422,
        "invalid_token_id",
        {"token": "A" * 129, "context": {"title": "x"}},
    ),
    Refusal(
        "a token id that differs only in case",
        "POST",
        "/tokens",
        422,
        "invalid_token_id",
        {"token": "order-1", "context": {"title": "x"}},
    ),
    Refusal("a start with an empty body", "POST", "/tokens", 422, "invalid_body", raw=b""),
    Refusal(
        "a start without a token id",
        "POST",
        "/tokens",
        422,
        "invalid_body",
        {"context": {"title": "x"}},
    ),
    Refusal("a token id that is a number", "POST", "/tokens", 422, "invalid_body", {"token": 7}),
    Refusal(
        "a context that is a list",
        "POST",
        "/tokens",
        422,
        "invalid_body",
        {"token": "NEW-1", "context": [1]},
    ),
    Refusal(
        "a payload that is a list",
        "POST",
        "/tokens/ORDER-1/events/reviewed",
        422,
        "invalid_body",
        {"payload": [1]},
    ),
    Refusal(
        "a claim without states",
        "POST",
        "/tasks/claim",
        422,
        "invalid_body",
        {"supervisor": SUPERVISOR},
    ),
    Refusal(
        "a heartbeat of words",
        "POST",
        "/tasks/heartbeat",
        422,
        "invalid_body",
        {"supervisor": SUPERVISOR, "tasks": ["one"]},
    ),
    Refusal(
        "a report of an unknown kind",
        "POST",
        "/tasks/{review}/report",
        422,
        "invalid_body",
        {"kind": "finished"},
    ),
    Refusal(
        "a report of an event that names none",
        "POST",
        "/tasks/{review}/report",
        422,
        "invalid_body",
        {"kind": "event", **LIVE},
    ),
    Refusal(
        "a report of an event with an empty name",
        "POST",
        "/tasks/{review}/report",
        422,
        "invalid_body",
        {"kind": "event", "event": "", **LIVE},
    ),
    Refusal(
        "a note without text", "POST", "/tasks/{review}/note", 422, "invalid_body", {"attempt": 2}
    ),
    Refusal(
        "a memory write without a value",
        "PUT",
        "/tasks/{review}/memory",
        422,
        "invalid_body",
        {"key": "k", "attempt": 2},
    ),
    Refusal(
        "an attempt that is a word",
        "POST",
        "/tasks/{review}/note",
        422,
        "invalid_body",
        {"text": "hi", "attempt": "two"},
    ),
    Refusal(
        "an event that the state does not take",
        "POST",
        "/tokens/ORDER-1/events/submitted",
        409,
        "event_not_allowed",
        records="ORDER-1",
    ),
    Refusal(
        "an event that the workflow does not declare",
        "POST",
        "/tokens/ORDER-1/events/shipped",
        409,
        "event_not_allowed",
        records="ORDER-1",
    ),
    Refusal(
        "an event of Stateous itself",
        "POST",
        "/tokens/ORDER-1/events/timeout",
        409,
        "event_not_allowed",
        records="ORDER-1",
    ),
    Refusal(
        "a report of an event that the state cannot emit",
        "POST",
        "/tasks/{review}/report",
        409,
        "event_not_allowed",
        {"kind": "event", "event": "submitted", **LIVE},
        records="ORDER-1",
    ),
    Refusal(
        "an event on a cancelled token",
        "POST",
        "/tokens/GONE-1/events/submitted",
        409,
        "token_not_active",
        records="GONE-1",
    ),
    Refusal("pausing a cancelled token", "POST", "/tokens/GONE-1/pause", 409, "token_not_active"),
    Refusal("resuming an active token", "POST", "/tokens/ORDER-1/resume", 409, "token_not_active"),
    Refusal(
        "cancelling a cancelled token", "POST", "/tokens/GONE-1/cancel", 409, "token_not_active"
    ),
    Refusal(
        "a report by another supervisor",
        "POST",
        "/tasks/{review}/report",
        409,
        "task_not_held",
        {"kind": "waiting", "attempt": 2, "supervisor": "box-2"},
    ),
    Refusal(
        "a report on a finished task",
        "POST",
        "/tasks/{draft}/report",
        409,
        "task_not_held",
        {"kind": "event", "event": "submitted", "supervisor": SUPERVISOR},
    ),
    Refusal(
        "a note on a finished task",
        "POST",
        "/tasks/{draft}/note",
        409,
        "task_not_held",
        {"text": "late"},
    ),
    *(
        Refusal(
            f"{what} for attempt {attempt}",
            method,
            path,
            422,
            "invalid_argument",
            {**body, "attempt": attempt},
        )
        for what, method, path, body in (
            ("a report", "POST", "/tasks/{review}/report", {"kind": "waiting", **LIVE}),
            ("a note", "POST", "/tasks/{review}/note", {"text": "hi"}),
            ("a memory write", "PUT", "/tasks/{review}/memory", {"key": "k", "value": 1}),
        )
        for attempt in (0, -1)
    ),
    Refusal(
        "a report of an attempt that is over",
        "POST",
        "/tasks/{review}/report",
        409,
        "attempt_over",
        {"kind": "waiting", "attempt": 1, "supervisor": SUPERVISOR},
    ),
    Refusal(
        "a note of an attempt that is over",
        "POST",
        "/tasks/{review}/note",
        409,
        "attempt_over",
        {"text": "late", "attempt": 1},
    ),
    Refusal(
        "a memory write of an attempt that is over",
        "PUT",
        "/tasks/{review}/memory",
        409,
        "attempt_over",
        {"key": "k", "value": 1, "attempt": 1},
    ),
]

#: Every route that reads a body, with a path that exists in the scene.
BODY_ROUTES = [
    ("POST", "/tokens"),
    ("POST", "/tokens/ORDER-1/events/reviewed"),
    ("POST", "/tokens/ORDER-1/pause"),
    ("POST", "/tokens/ORDER-1/resume"),
    ("POST", "/tokens/ORDER-1/cancel"),
    ("POST", "/tasks/claim"),
    ("POST", "/tasks/heartbeat"),
    ("POST", "/tasks/{review}/report"),
    ("POST", "/tasks/{review}/note"),
    ("PUT", "/tasks/{review}/memory"),
]
#: JSON that is readable but not an object, where an object is due.
NOT_OBJECTS = [b"[1, 2]", b'"x"', b"3", b"null", b"true"]
REFUSALS += [
    Refusal(
        f"a body of {raw.decode()} on {method} {path}", method, path, 422, "invalid_body", raw=raw
    )
    for method, path in BODY_ROUTES
    for raw in NOT_OBJECTS
]
REFUSALS += [
    Refusal(
        f"an unreadable body {raw!r} on {method} {path}", method, path, 400, "bad_request", raw=raw
    )
    for method, path in BODY_ROUTES
    for raw in (b"{", b"\xff", b"[1, 2] x")
]


def set_scene(served: Served) -> dict[str, int]:
    """ORDER-1 in review, its task claimed by SUPERVISOR at attempt 2; GONE-1 cancelled."""
    start(served, "ORDER-1")
    draft = claim(served, "draft")
    report(served, draft["task"], kind="event", event="submitted", attempt=1, supervisor=SUPERVISOR)
    review = claim(served, "review")
    report(served, review["task"], kind="failed", error="flaky", attempt=1, supervisor=SUPERVISOR)
    again = claim(served, "review")
    assert (again["task"], again["attempt"]) == (review["task"], 2)
    start(served, "GONE-1")
    assert served.request("POST", "/tokens/GONE-1/cancel")[0] == 200
    return {"draft": draft["task"], "review": review["task"]}


@pytest.fixture(scope="module", params=BACKENDS)
def refusals_plane(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Served, dict[str, int]]]:
    """One control plane per backend, with its scene, for every refusal: a refusal changes
    nothing (each case checks it), so the cases can share it, and the hundreds of them
    cost one database and one server instead of one each."""
    with (
        open_backend(request.param, tmp_path_factory.mktemp("refusals")) as backend,
        serving(build_engine(backend)) as served,
    ):
        yield served, set_scene(served)


@pytest.mark.parametrize("case", REFUSALS, ids=lambda case: case.name.replace(" ", "-"))
def test_each_refusal_answers_its_code_and_changes_nothing(
    refusals_plane: tuple[Served, dict[str, int]], case: Refusal
) -> None:
    served, scene = refusals_plane
    tokens, lengths = snapshot(served)
    path = case.path.format(**scene)
    status, headers, body = served.request(case.method, path, case.body, case.headers, case.raw)
    assert (status, body) == (case.status, {"error": body["error"], "code": case.code})
    assert isinstance(body["error"], str) and body["error"]
    assert headers["content-type"] == "application/json"
    if case.records:
        lengths[case.records] += 1
        assert kinds(served, case.records)[-1] == "event_rejected"
    assert snapshot(served) == (tokens, lengths)


@pytest.mark.parametrize("method", ["DELETE", "OPTIONS", "BREW"])
def test_a_refused_method_names_what_the_path_takes_in_allow(served: Served, method: str) -> None:
    status, headers, body = served.request(method, "/tokens")
    assert (status, body["code"]) == (405, "method_not_allowed")
    assert headers["allow"] == "GET, HEAD, POST"


# The limits of a body: its size and its nesting.


def test_a_body_of_exactly_one_mib_is_accepted(served: Served) -> None:
    body = b'{"token": "BIG-1", "context": {"title": "big"}}'
    status, _, token = served.request("POST", "/tokens", raw=body.ljust(BODY_LIMIT))
    assert (status, token["token"]) == (201, "BIG-1")


def test_a_body_one_byte_over_one_mib_is_refused_with_413(served: Served) -> None:
    body = b'{"token": "BIG-1", "context": {"title": "big"}}'
    status, _, answer = served.request("POST", "/tokens", raw=body.ljust(BODY_LIMIT + 1))
    assert (status, answer["code"]) == (413, "bad_request")
    assert served.request("GET", "/tokens/BIG-1")[0] == 404


#: The header that every POST and PUT carries.
JSON_TYPE = {"Content-Type": "application/json"}


def test_a_chunked_body_is_read_and_limited_like_any_other(served: Served) -> None:
    connection = served.connect()
    try:
        start_body = [b'{"token": "CHUNK-1", ', b'"context": {"title": "chunked"}}']
        connection.request(
            "POST", "/tokens", body=iter(start_body), encode_chunked=True, headers=JSON_TYPE
        )
        assert read_answer(connection.getresponse())[0] == 201
        large = [b'{"token": "CHUNK-2"}', b" " * BODY_LIMIT]
        connection.request(
            "POST", "/tokens", body=iter(large), encode_chunked=True, headers=JSON_TYPE
        )
        status, _, answer = read_answer(connection.getresponse())
        assert (status, answer["code"]) == (413, "bad_request")
    finally:
        connection.close()


def test_a_body_nesting_64_levels_is_accepted_and_65_is_refused(served: Served) -> None:
    start(served)
    task = claim(served, "draft")["task"]
    path = f"/tasks/{task}/memory"
    assert served.request("PUT", path, raw=nested_memory(BODY_DEPTH_LIMIT, task))[0] == 204
    length = len(history(served, "ORDER-1"))
    for levels in (BODY_DEPTH_LIMIT + 1, 100_000):
        status, _, answer = served.request("PUT", path, raw=nested_memory(levels, task))
        assert (status, answer["code"]) == (400, "bad_request")
    assert len(history(served, "ORDER-1")) == length


def test_a_text_holding_a_nul_character_is_refused_and_changes_nothing(served: Served) -> None:
    start(served)
    task = claim(served, "draft")["task"]
    length = len(history(served, "ORDER-1"))
    refused = [
        ("POST", "/tokens", b'{"token": "NUL-1", "context": {"title": "a\\u0000b"}}'),
        ("POST", "/tokens/ORDER-1/events/submitted", b'{"payload": {"a\\u0000": 1}}'),
        ("PUT", f"/tasks/{task}/memory", b'{"key": "k", "value": [["\\u0000"]]}'),
        ("POST", f"/tasks/{task}/note", b'{"text": "half\\u0000"}'),
    ]
    for method, path, raw in refused:
        status, _, answer = served.request(method, path, raw=raw)
        assert (status, answer["code"]) == (422, "invalid_body"), (path, answer)
        assert "NUL" in answer["error"]
    assert served.request("GET", "/tokens/NUL-1")[0] == 404
    assert len(history(served, "ORDER-1")) == length
    # An escaped backslash before "u0000" is no NUL: it is kept as written.
    status, _, answer = served.request(
        "POST", "/tokens", raw=b'{"token": "NUL-2", "context": {"title": "\\\\u0000"}}'
    )
    assert (status, answer["context"]["title"]) == (201, "\\u0000")


# Refusals that only a failing engine gives, through a fake engine's methods.


class Failing(Engine):
    """An engine whose pause, get, health and start fail as no real request makes them."""

    def pause(self, token: str, **_: Any) -> Any:
        raise errors.ChildToken(f"{token} is a child token; steer its top token")

    def get(self, token: str) -> Any:
        raise errors.DatabaseBusy("the database is busy; try again")

    def health(self) -> Any:
        raise errors.NotServing("another control plane took the database")

    def start(self, token: str, context: dict[str, Any] | None, **_: Any) -> Any:
        raise RuntimeError("secret-detail-42")


@pytest.mark.parametrize(
    ("method", "path", "status", "code"),
    [
        ("POST", "/tokens/KID-1/pause", 409, "child_token"),
        ("GET", "/tokens/ORDER-1", 503, "database_busy"),
        ("GET", "/health", 503, "not_serving"),
    ],
)
def test_an_engine_refusal_answers_its_own_status_and_code(
    serve_engine, method: str, path: str, status: int, code: str
) -> None:
    served = serve_engine(Failing)
    answer = served.request(method, path)
    assert (answer[0], set(answer[2]), answer[2]["code"]) == (status, {"error", "code"}, code)


def test_an_unexpected_error_answers_500_and_only_the_log_has_the_traceback(
    serve_engine, caplog: pytest.LogCaptureFixture
) -> None:
    served = serve_engine(Failing)
    caplog.set_level(logging.ERROR, logger="stateous.control.api")
    connection = served.connect()
    try:
        connection.request("POST", "/tokens", body=b'{"token": "ORDER-1"}', headers=JSON_TYPE)
        response = connection.getresponse()
        data = response.read()
    finally:
        connection.close()
    assert response.status == 500
    body = msgspec.json.decode(data)
    assert set(body) == {"error", "code"} and body["code"] == "unexpected"
    assert b"secret-detail-42" not in data and b"Traceback" not in data
    assert "Traceback" in caplog.text and "RuntimeError: secret-detail-42" in caplog.text
