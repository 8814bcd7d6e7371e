"""Retrying a failed or cancelled token: the engine on both backends, then over HTTP.

A retry enters a state the token visited again, in one change whose first ledger row is
`retried`; every refusal leaves the token and its history as they were.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from stateous import END, START, Workflow
from stateous.control.errors import (
    InvalidContext,
    ParentMovedOn,
    StateNotVisited,
    TokenCompleted,
    TokenLive,
    TokenNotActive,
    TokenNotFound,
    UnknownState,
)
from stateous.model.wire import ReportBody
from tests.control.conftest import Served, serving
from tests.control.support import Backend, Item, Plane, counts_drift, one_step, plane_for


def pipeline() -> Workflow:
    """draft, then review (a timeout of 1h), then END; no state has retries or an `error`
    transition, so one failed attempt fails the token."""
    flow = Workflow("pipeline", context=Item)
    draft, review, spare = (
        flow.state("draft"),
        flow.state("review", timeout="1h"),
        flow.state("spare"),
    )
    submitted, approved = flow.event("submitted"), flow.event("approved")
    flow.transition(START, draft)
    flow.transition(draft, review, on=submitted)
    flow.transition(draft, spare, on=flow.event("aside"))
    flow.transition(review, END, on=approved)
    flow.transition(spare, END, on=approved)
    return flow


def pair() -> Workflow:
    """One parallel state, `checks`, whose two children must both end before it goes on."""
    flow = Workflow("pair", context=Item)
    checks = flow.state(
        "checks", parallel=[one_step("left", "ok"), one_step("right", "ok")], inputs=["title"]
    )
    flow.transition(START, checks)
    flow.transition(checks, END, on="joined")
    return flow


@pytest.fixture
def plane(backend: Backend) -> Iterator[Plane]:
    served = plane_for(pipeline(), backend)
    yield served
    drift = counts_drift(served.store)
    served.store.close()
    assert drift == {}, "the counts drifted from the rows"


def fail_in(plane: Plane, token: str, state: str, supervisor: str = "box-1") -> int:
    """Claim the token's task in `state`, keep one memory key, fail it; return the task."""
    grant = plane.engine.claim(supervisor, [state])
    assert grant is not None and grant.token == token
    plane.engine.memory(grant.task, "session", "abc", 1)
    plane.engine.report(grant.task, ReportBody(kind="failed", error="crash", supervisor=supervisor))
    return grant.task


def failed_in_review(plane: Plane, token: str = "ORDER-1") -> int:
    """Start a token, bring it to `review` and fail it there; return the review task."""
    plane.engine.start(token, {"title": "an order"})
    plane.engine.fire(token, "submitted")
    task = fail_in(plane, token, "review")
    assert plane.engine.get(token).status == "failed"
    return task


def test_a_failed_token_enters_its_state_again_with_its_memory_and_a_first_attempt(
    plane: Plane,
) -> None:
    failed = failed_in_review(plane)
    before = plane.entries("ORDER-1")

    token = plane.engine.retry("ORDER-1", by="alice")

    assert (token.status, token.state, token.visit) == ("active", "review", 2)
    entries = plane.entries("ORDER-1")
    assert entries[: len(before)] == before
    new = entries[len(before) :]
    assert [kind for kind, _ in new] == ["retried", "entered", "task_queued", "timer_set"]
    assert new[0][1] == {"state": "review", "was": "failed", "changes": {}, "by": "alice"}
    assert new[1][1] == {"state": "review", "visit": 2}
    assert new[3][1]["event"] == "timeout"
    grant = plane.engine.claim("box-2", ["review"])
    assert grant is not None and grant.task != failed
    assert (grant.attempt, grant.memory) == (1, {"session": "abc"})
    plane.engine.report(grant.task, ReportBody(kind="event", event="approved", supervisor="box-2"))
    assert plane.engine.get("ORDER-1").status == "completed"
    assert plane.store.read(lambda tx: tx.grant_reads("ORDER-1", "review")).memory == {}


def test_a_retry_from_an_earlier_state_merges_the_context_changes_it_is_given(
    plane: Plane,
) -> None:
    failed_in_review(plane)
    token = plane.engine.retry("ORDER-1", "draft", {"amount": 7})
    assert (token.state, token.visit, token.context) == (
        "draft",
        2,
        {"title": "an order", "amount": 7, "tags": []},
    )
    assert plane.entries("ORDER-1")[-3:-1] == [
        ("retried", {"state": "draft", "was": "failed", "changes": {"amount": 7}}),
        ("entered", {"state": "draft", "visit": 2}),
    ]
    grant = plane.engine.claim("box-1", ["draft"])
    assert grant is not None and grant.attempt == 1


def test_a_cancelled_token_is_retried_and_its_cancelled_task_stays_history(plane: Plane) -> None:
    plane.engine.start("ORDER-1", {"title": "an order"})
    grant = plane.engine.claim("box-1", ["draft"])
    assert grant is not None
    plane.engine.memory(grant.task, "session", "abc", 1)
    plane.engine.cancel("ORDER-1")

    token = plane.engine.retry("ORDER-1")

    assert (token.status, token.state) == ("active", "draft")
    assert plane.store.read(lambda tx: tx.task(grant.task)).status == "cancelled"
    assert plane.entries("ORDER-1")[-3][1] == {"state": "draft", "was": "cancelled", "changes": {}}
    again = plane.engine.claim("box-1", ["draft"])
    assert again is not None and again.task != grant.task
    assert (again.attempt, again.memory) == (1, {"session": "abc"})


def refused_unchanged(plane: Plane, token: str, refusal: type[Exception], *args: object) -> str:
    """Retry, expect `refusal`, and check that the token and its history did not change;
    return the refusal's sentence."""
    before = (plane.engine.get(token), plane.entries(token))
    with pytest.raises(refusal) as refused:
        plane.engine.retry(token, *args)  # type: ignore[arg-type]
    assert (plane.engine.get(token), plane.entries(token)) == before
    return str(refused.value)


def test_each_bad_retry_is_refused_and_changes_nothing(plane: Plane) -> None:
    failed_in_review(plane)
    assert "has no state 'nowhere'" in refused_unchanged(plane, "ORDER-1", UnknownState, "nowhere")
    assert "never entered 'spare'" in refused_unchanged(plane, "ORDER-1", StateNotVisited, "spare")
    refused_unchanged(plane, "ORDER-1", InvalidContext, None, {"amount": "seven"})
    refused_unchanged(plane, "ORDER-1", InvalidContext, None, {"title": None})
    plane.engine.start("LIVE", {"title": "x"})
    assert "is active" in refused_unchanged(plane, "LIVE", TokenLive)
    plane.engine.pause("LIVE")
    assert "is paused" in refused_unchanged(plane, "LIVE", TokenLive)
    plane.engine.retry("ORDER-1")
    grant = plane.engine.claim("box-1", ["review"])
    assert grant is not None
    plane.engine.report(grant.task, ReportBody(kind="event", event="approved", supervisor="box-1"))
    assert "completed" in refused_unchanged(plane, "ORDER-1", TokenCompleted)
    with pytest.raises(TokenNotFound):
        plane.engine.retry("NOBODY")


def test_a_failed_child_is_retried_while_its_parent_waits_in_the_join(backend: Backend) -> None:
    plane = plane_for(pair(), backend)
    plane.engine.start("P", {"title": "x"})
    fail_in(plane, "P.checks.1.left", "left/step")
    assert plane.engine.get("P").state == "checks"

    child = plane.engine.retry("P.checks.1.left")

    assert (child.status, child.state, child.visit) == ("active", "step", 2)
    for state in ("left/step", "right/step"):
        grant = plane.engine.claim("box-1", [state])
        assert grant is not None
        plane.engine.report(grant.task, ReportBody(kind="event", event="ok", supervisor="box-1"))
    assert plane.engine.get("P").status == "completed"
    assert counts_drift(plane.store) == {}
    plane.store.close()


def test_a_child_whose_parent_moved_on_from_the_join_is_not_retried(backend: Backend) -> None:
    plane = plane_for(pair(), backend)
    plane.engine.start("P", {"title": "x"})
    grant = plane.engine.claim("box-1", ["right/step"])
    assert grant is not None
    plane.engine.report(grant.task, ReportBody(kind="event", event="ok", supervisor="box-1"))
    fail_in(plane, "P.checks.1.left", "left/step")
    assert plane.engine.get("P").status == "completed"

    sentence = refused_unchanged(plane, "P.checks.1.left", ParentMovedOn)

    assert "'P'" in sentence
    plane.store.close()


def test_a_child_of_a_paused_parent_is_not_retried(backend: Backend) -> None:
    plane = plane_for(pair(), backend)
    plane.engine.start("P", {"title": "x"})
    fail_in(plane, "P.checks.1.left", "left/step")
    plane.engine.pause("P")
    assert "paused" in refused_unchanged(plane, "P.checks.1.left", TokenNotActive)
    plane.store.close()


# over HTTP


@pytest.fixture
def http(backend: Backend) -> Iterator[Served]:
    with serving(plane_for(pipeline(), backend).engine) as served:
        yield served


def ok(served: Served, method: str, path: str, body: object = None) -> Any:
    """Send a request that must succeed; return its answer's JSON."""
    status, _, answer = served.request(method, path, body)
    assert 200 <= status < 300, answer
    return answer


def test_post_retry_answers_the_token_and_refuses_with_documented_codes(http: Served) -> None:
    http.request("POST", "/tokens", {"token": "ORDER-1", "context": {"title": "x"}})
    grant = ok(http, "POST", "/tasks/claim", {"supervisor": "box-1", "states": ["draft"]})
    ok(http, "POST", f"/tasks/{grant['task']}/report", {"kind": "failed", "supervisor": "box-1"})

    refusals = [
        ({"from": "nowhere"}, 422, "unknown_state"),
        ({"from": "review"}, 409, "state_not_visited"),
        ({"context": {"amount": "x"}}, 422, "invalid_context"),
        ({"from": 5}, 422, "invalid_body"),
        ({"colour": "red"}, 422, "invalid_body"),
    ]
    for body, status, code in refusals:
        answered, _, refused = http.request("POST", "/tokens/ORDER-1/retry", body)
        assert (answered, refused["code"]) == (status, code), body
    assert ok(http, "GET", "/tokens/ORDER-1")["status"] == "failed"

    token = ok(http, "POST", "/tokens/ORDER-1/retry", {"from": "draft", "context": {"amount": 2}})
    assert (token["status"], token["state"], token["context"]["amount"]) == ("active", "draft", 2)
    answered, _, refused = http.request("POST", "/tokens/ORDER-1/retry", {})
    assert (answered, refused["code"]) == (409, "token_live")
    history = ok(http, "GET", "/tokens/ORDER-1/history")
    retried = [entry for entry in history if entry["kind"] == "retried"]
    assert [entry["text"] for entry in retried] == [
        "retried in draft (it was failed); context changed: amount"
    ]
    answered, _, refused = http.request("POST", "/tokens/NOBODY/retry")
    assert (answered, refused["code"]) == (404, "token_not_found")
