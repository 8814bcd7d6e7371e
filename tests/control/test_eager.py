"""Eager dispatch at the control plane: a report that asks `next` is answered with the grant
of its supervisor's next task, decided in the report's transaction as a claim decides; a
report without `next` is answered as before. On both backends, over real HTTP.

The `orders` graph: `draft` emits `submitted` into `review`.
"""

from __future__ import annotations

import concurrent.futures
from typing import Any

from tests.control.conftest import Served

BOTH = ["draft", "review"]
TOKEN_FIELDS = {"token", "state", "status", "visit", "context", "entered_at"}


def start(served: Served, token: str) -> None:
    status, _, answer = served.request(
        "POST", "/tokens", {"token": token, "context": {"title": "x"}}
    )
    assert status == 201, answer


def claim(served: Served, states: list[str], request: str | None = None) -> Any:
    body: dict[str, Any] = {"supervisor": "s1", "states": states}
    if request is not None:
        body["request"] = request
    status, _, grant = served.request("POST", "/tasks/claim", body)
    assert status in (200, 204), grant
    return grant


def report(served: Served, grant: dict[str, Any], **fields: Any) -> tuple[int, Any]:
    body = {"kind": "event", "event": "submitted", "attempt": grant["attempt"], "supervisor": "s1"}
    status, _, answer = served.request("POST", f"/tasks/{grant['task']}/report", {**body, **fields})
    return status, answer


def task_of(served: Served, token: str) -> dict[str, Any]:
    status, _, tasks = served.request("GET", "/tasks")
    assert status == 200, tasks
    (task,) = [task for task in tasks if task["token"] == token]
    return task


def test_a_report_that_asks_next_is_answered_with_its_tokens_next_task(served: Served) -> None:
    start(served, "T-1")
    first = claim(served, ["draft"])
    status, answer = report(served, first, next={"states": BOTH, "request": "n-1"})
    assert status == 200, answer
    grant = answer.pop("grant")
    assert set(answer) >= TOKEN_FIELDS and answer["state"] == "review"
    assert (grant["token"], grant["state"], grant["attempt"]) == ("T-1", "review", 1)
    assert grant["entered_by"] == {"name": "submitted"} and grant["lease"] == 120
    assert grant["task"] != first["task"]
    task = task_of(served, "T-1")
    assert (task["status"], task["supervisor"]) == ("claimed", "s1")
    kinds = [entry["kind"] for entry in served.request("GET", "/tokens/T-1/history")[2]]
    assert kinds[-1] == "task_claimed" and "task_queued" in kinds


def test_the_grant_of_a_lost_answer_goes_again_to_a_claim_of_the_same_request_id(
    served: Served,
) -> None:
    start(served, "T-1")
    status, answer = report(
        served, claim(served, ["draft"]), next={"states": BOTH, "request": "n-2"}
    )
    assert status == 200
    lost = answer["grant"]  # the supervisor never reads it
    again = claim(served, BOTH, request="n-2")
    assert again == {**lost, "lease": again["lease"]}
    assert again["attempt"] == 1
    assert claim(served, BOTH, request="n-3") is None  # a new request: no other task


def test_two_reports_in_flight_from_one_supervisor_each_get_and_keep_their_own_grant(
    served: Served,
) -> None:
    start(served, "T-1")
    start(served, "T-2")
    firsts = [claim(served, ["draft"], request="c-1"), claim(served, ["draft"], request="c-2")]
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        sent = [
            pool.submit(report, served, first, next={"states": BOTH, "request": f"n-{at}"})
            for at, first in enumerate(firsts)
        ]
        answers = [future.result() for future in sent]
    assert [status for status, _ in answers] == [200, 200], answers
    grants = [answer["grant"] for _, answer in answers]
    assert [grant["token"] for grant in grants] == ["T-1", "T-2"]
    # Both answers lost: each request id is granted its own task again, in either order.
    for at in (1, 0):
        again = claim(served, BOTH, request=f"n-{at}")
        assert again == {**grants[at], "lease": again["lease"]}
    assert claim(served, BOTH, request="n-2") is None  # a new request: no other task


def test_a_report_without_next_is_answered_as_before_and_its_task_waits_for_a_claim(
    served: Served,
) -> None:
    start(served, "T-1")
    status, answer = report(served, claim(served, ["draft"]))
    assert status == 200 and "grant" not in answer
    assert answer["state"] == "review"
    assert task_of(served, "T-1")["status"] == "queued"
    assert claim(served, ["review"])["token"] == "T-1"


def test_the_tokens_own_task_goes_first_even_when_older_tasks_wait(served: Served) -> None:
    start(served, "T-1")
    first = claim(served, ["draft"])
    start(served, "T-2")  # its draft task is older than T-1's review task will be
    status, answer = report(served, first, next={"states": BOTH})
    assert status == 200
    assert (answer["grant"]["token"], answer["grant"]["state"]) == ("T-1", "review")
    assert task_of(served, "T-2")["status"] == "queued"


def test_a_next_state_not_served_grants_the_oldest_task_of_the_states_asked(
    served: Served,
) -> None:
    start(served, "T-1")
    first = claim(served, ["draft"])
    start(served, "T-2")
    status, answer = report(served, first, next={"states": ["draft"]})
    assert status == 200
    assert (answer["grant"]["token"], answer["grant"]["state"]) == ("T-2", "draft")
    assert task_of(served, "T-1")["status"] == "queued"
    status, answer = report(served, answer["grant"], next={"states": ["draft"]})
    assert status == 200 and answer["grant"] is None


def test_next_names_the_graph_as_a_claim_does(served: Served) -> None:
    checksum = served.request("GET", "/health")[2]["checksum"]
    start(served, "T-1")
    status, answer = report(
        served, claim(served, ["draft"]), next={"states": BOTH, "checksum": checksum}
    )
    assert status == 200 and answer["grant"]["state"] == "review"
    start(served, "T-2")
    status, answer = report(
        served, claim(served, ["draft"]), next={"states": BOTH, "checksum": "0" * 64}
    )
    assert status == 200 and answer["grant"] is None  # no graph of that checksum: no grant
    assert answer["state"] == "review"


def test_a_report_from_outside_or_a_bad_next_is_refused_and_nothing_is_kept(
    served: Served,
) -> None:
    start(served, "T-1")
    first = claim(served, ["draft"])
    status, answer = report(served, first, next={"states": BOTH, "request": "no spaces"})
    assert (status, answer["code"]) == (422, "invalid_argument")
    status, answer = report(served, first, supervisor=None, next={"states": BOTH})
    assert (status, answer["code"]) == (422, "invalid_body")
    assert task_of(served, "T-1")["status"] == "claimed"
